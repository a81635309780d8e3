// tf.data's auto-shard policy names (apart from the pipeline: what reads a
// config needs no threads).
#include <baton/core/error.h>
#include <baton/data/pipeline.h>

namespace baton {

ShardPolicy parse_shard_policy(const std::string& name) {
  if (name == "auto") return ShardPolicy::kAuto;
  if (name == "file") return ShardPolicy::kFile;
  if (name == "data") return ShardPolicy::kData;
  if (name == "off") return ShardPolicy::kOff;
  throw InputError("shard_policy \"" + name + "\" is not one of auto, file, data, off");
}

}  // namespace baton
