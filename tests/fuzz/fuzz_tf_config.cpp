// TF_CONFIG: parse, validate, and what is written for each task reads
// back to the same cluster.
#include <baton/cluster/cluster_spec.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton_fuzz::expect_clean([&] {
    const baton::ClusterSpec spec =
        baton::parse_tf_config(baton_fuzz::text(data, size), "TF_CONFIG");
    baton::validate_cluster(spec, "TF_CONFIG");
    for (baton::TaskRole role :
         {baton::TaskRole::kChief, baton::TaskRole::kWorker, baton::TaskRole::kPs}) {
      for (size_t i = 0; i < spec.tasks(role).size(); ++i) {
        const std::string again = baton::to_tf_config(spec, role, static_cast<int>(i));
        const baton::ClusterSpec back = baton::parse_tf_config(again, "written");
        if (back.chief != spec.chief || back.worker != spec.worker || back.ps != spec.ps) {
          __builtin_trap();  // a written TF_CONFIG must read back the same
        }
      }
    }
  });
  return 0;
}
