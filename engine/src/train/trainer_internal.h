// What the Trainer's translation units share (private to train/): the
// replica record, the clock and the seed streams.
#pragma once

#include <baton/train/trainer.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace baton {

using TrainerClock = std::chrono::steady_clock;

inline double ms_between(TrainerClock::time_point a, TrainerClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Seeds for independent streams, all derived from the run seed.
enum SeedStream : uint64_t { kPipelineSeed = 1, kInitSeed = 2, kStepSeed = 3 };

struct Trainer::Replica {
  int index = 0;  // local replica index
  // Its GPU's backend (null on the CPU), and the backend its ops run on.
  DeviceBackend* device = nullptr;
  const Backend* backend = nullptr;
  // A replica's task begins here: its GPU becomes the thread's current one.
  void bind_thread() const {
    if (device != nullptr) device->make_current();
  }
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<Param*> params;
  FlatParameters flat;      // the parameters' flat buffers
  GradientSlots clip_list;  // clip_global_norm's, reused every step
  // layer_first_param[i]: the index in `params` of layer i's first
  // parameter; with gradient overlap, backward reports each finished layer
  // through on_layer_done (built once: the step does not allocate).
  std::vector<size_t> layer_first_param;
  std::function<void(size_t)> on_layer_done;
  Tensor doutput;  // (shard batch, outputs), on the replica's device
  // On a GPU: two slots of the batch's features, labels and targets, used
  // in turn, so a batch uploads while the last step's backward and update
  // may still read the other (Trainer::on_device).
  struct InputSlot {
    Tensor x, targets;
    IntTensor labels;
  };
  std::array<InputSlot, 2> inputs;
  int next_slot = 0;
  std::vector<float> drift;  // 2 x replicas: every replica's checksum (replica_sync.cpp)
  // strategy.sharding "optimizer" and "gradients" (optimizer_shards.cpp):
  // this replica's pieces of the flat buffers' groups (Trainer::piece_begin),
  // one after another: their reduce-scattered gradient sums and the
  // allgather's send buffer; the parameters its optimizer updates (views
  // of each piece of the values and of shard_grads: the decayed part and
  // the rest) and where each starts in the flat buffers.
  Tensor shard_grads, shard_values;
  Tensor shard_norm;  // the norm's two floats, where the communicator reads them
  // ZeRO-3: the group the values window's shared space holds (-1: none),
  // and whether the values are whole (not in the window).
  int window_group = -1;
  bool values_whole = true;
  std::vector<Param> shard_params;
  std::vector<Param*> shard_list;
  std::vector<int64_t> shard_starts;
  double eval_loss = 0, eval_correct = 0, eval_count = 0;  // its validation share
  LossResult last;
};

// Copies [start, start + count) of a flat layout's floats (`src`) into
// the parameters' tensors (one a parameter, laid out by `layout`) it
// overlaps.
void copy_into_parameters(const FlatLayout& layout, std::vector<Tensor>& tensors, int64_t start,
                          const float* src, int64_t count);

}  // namespace baton
