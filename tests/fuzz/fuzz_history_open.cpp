// Opening any file as a history database (read-only, as `history list`
// and the studio do) and reading everything it says it holds.
#include <baton/history/store.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = baton_fuzz::as_file(data, size, ".db");
  baton_fuzz::expect_clean([&] {
    const baton::HistoryStore store(path, baton::HistoryStore::Open::kReadOnly);
    (void)store.integrity_check();
    for (const auto& r : store.list_runs()) {
      (void)store.run(r.id);
      (void)store.metric_summary(r.id);
      (void)store.events(r.id);
      (void)store.links(r.id, 100);
      (void)store.timelines(r.id);
    }
  });
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
  return 0;
}
