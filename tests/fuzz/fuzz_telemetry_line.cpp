// A rank's output as the launcher reads it (mpirun's tagged chunks into
// lines, each classified), and an event line as the launcher's history and
// the studio read it: parsed, turned into an event, written back and read
// again.
#include <baton/launch/rank_lines.h>
#include <baton/telemetry/chrome_trace.h>
#include <baton/telemetry/telemetry.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // As the launcher reads mpirun's output: tagged chunks into lines, each
  // line classified (none of it may throw).
  const std::string all = baton_fuzz::text(data, size);
  baton::TaggedLines tagged;
  std::vector<baton::TaggedLines::Line> lines;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t nl = all.find('\n', start);
    tagged.feed(all.substr(start, nl == std::string::npos ? std::string::npos : nl - start), lines);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  for (const auto& l : lines) (void)baton::parse_rank_line(l.text);
  const nlohmann::json j = nlohmann::json::parse(all, nullptr, false);
  if (j.is_discarded()) return 0;
  baton_fuzz::expect_clean([&] {
    const auto e = baton::event_from_json(j);
    if (!e) return;
    const nlohmann::json again = baton::to_json(*e);
    const auto back = baton::event_from_json(again);
    if (!back || back->index() != e->index()) __builtin_trap();
    // A timeline event's record is what `history timeline` renders.
    if (const auto* t = std::get_if<baton::TimelineEvent>(&*e)) {
      if (!t->trace.is_null()) {
        (void)baton::chrome_trace(t->trace).dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
      }
    }
  });
  return 0;
}
