// A trained model back from a checkpoint, for inference (baton sample):
// built from the config the checkpoint keeps, planned for one sample, its
// parameters and buffers restored.
#pragma once

#include <baton/nn/model.h>
#include <baton/train/checkpoint.h>
#include <baton/train/registry.h>

#include <memory>
#include <string>

namespace baton {

// InputError naming `where` (the checkpoint's path) when the checkpoint
// does not hold a config and model shape, or its tensors do not fit.
std::unique_ptr<Sequential> model_from_checkpoint(const CheckpointData& data,
                                                  const Registry& registry,
                                                  const std::string& where);

}  // namespace baton
