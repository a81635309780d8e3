// A rank's event line as the launcher and the studio read it: parsed,
// turned into an event, written back and read again.
#include <baton/telemetry/chrome_trace.h>
#include <baton/telemetry/telemetry.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(baton_fuzz::text(data, size), nullptr, false);
  if (j.is_discarded()) return 0;
  baton_fuzz::expect_clean([&] {
    const auto e = baton::event_from_json(j);
    if (!e) return;
    const nlohmann::json again = baton::to_json(*e);
    const auto back = baton::event_from_json(again);
    if (!back || back->index() != e->index()) __builtin_trap();
    // A timeline event's record is what `history timeline` renders.
    if (const auto* t = std::get_if<baton::TimelineEvent>(&*e)) {
      if (!t->trace.is_null()) (void)baton::chrome_trace(t->trace);
    }
  });
  return 0;
}
