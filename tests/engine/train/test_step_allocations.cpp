// The steady-state training step does not touch the heap: buffers are
// planned once. Counted by replacing the global operator new in this test
// binary (the engine's allocations resolve to it too). Allocations made
// inside a third-party library's call (baton/core/library_call.h: oneDNN's
// per-execution argument map) are counted apart and reported.
#include <baton/core/library_call.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/core/timeline.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_library_allocations{0};
}  // namespace

// GCC pairs malloc with operator new here and warns; the pairing is ours.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  (baton::inside_library_call() ? g_library_allocations : g_allocations)
      .fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace baton {
namespace {

// Allocations of a whole run of `steps` steps (all inside one epoch).
const nlohmann::json kTabular = {{"type", "synthetic_classification"},
                                 {"features", 16},
                                 {"classes", 4},
                                 {"samples", 4096},
                                 {"seed", 2}};

int64_t allocations_for(int64_t steps, const nlohmann::json& model, const Registry& registry,
                        const nlohmann::json& train = kTabular,
                        const nlohmann::json& augment = nullptr) {
  nlohmann::json data = {
      {"train", train}, {"shuffle_buffer", 512}, {"cache", true}, {"prefetch", 2}};
  if (!augment.is_null()) data["augment"] = augment;
  nlohmann::json doc = {
      {"seed", 1},
      {"model", model},
      {"data", data},
      {"optimizer", {{"type", "adam"}, {"lr", 0.001}, {"clip_global_norm", 1.0}}},
      {"schedule", {{"type", "cosine"}, {"warmup_steps", 5}}},
      {"train", {{"steps", steps}, {"global_batch_size", 32}, {"log_every_steps", 100000}}},
      {"checkpoint", {{"every_epoch", false}}}};
  RunConfig cfg = parse_run_config(doc, "alloc.json");
  Telemetry telemetry;
  TrainOptions opt;
  opt.run_id = "alloc";
  Trainer trainer(cfg, registry, telemetry, opt);
  const int64_t before = g_allocations.load(), library_before = g_library_allocations.load();
  trainer.run();
  std::printf("%lld steps: %lld allocations of Baton's, %lld inside library calls\n",
              static_cast<long long>(steps), static_cast<long long>(g_allocations.load() - before),
              static_cast<long long>(g_library_allocations.load() - library_before));
  return g_allocations.load() - before;
}

TEST(StepAllocations, MoreStepsDoNotAllocateMore) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  for (const char* norm : {"none", "layernorm", "batchnorm"}) {
    const nlohmann::json model = {{"type", "mlp"},
                                  {"layers", {16, 32, 32, 4}},
                                  {"norm", norm},
                                  {"dropout", 0.1},
                                  {"activation", "gelu"}};
    // The first run pays one-time costs (OpenMP and oneDNN start-up).
    allocations_for(10, model, registry);
    const int64_t short_run = allocations_for(10, model, registry);
    const int64_t long_run = allocations_for(100, model, registry);
    EXPECT_EQ(long_run, short_run)
        << "norm " << norm << ": " << (long_run - short_run) << " allocations in 90 extra steps";
  }
}

// Recording a timeline - what a step adds with --timeline: a clock read
// and a slot claimed, spans past the buffer counted - allocates nothing.
// (A whole run's count would not show it: the record gathered at the end
// is as long as its numbers' digits.)
TEST(StepAllocations, ATimelineRecordsWithoutAllocating) {
  Timeline tl(64);
  const int64_t before = g_allocations.load();
  for (int64_t step = 0; step < 100; ++step) {
    tl.set_step(step);
    const TimelineScope span(&tl, "step", "step", timeline_lane(TimelineLane::kStepLoop), step);
    tl.record("forward", "compute", timeline_lane(TimelineLane::kReplica), -1, tl.now_ns(),
              tl.now_ns());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(tl.spans().size(), 64u);
  EXPECT_EQ(tl.dropped(), 200 - 64);
}

// The language model too: embedding, attention (with dropout on its
// weights), blocks and the tied head plan every buffer once.
TEST(StepAllocations, TheGptStepDoesNotAllocate) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json model = {
      {"type", "gpt"}, {"n_layer", 2}, {"n_head", 2}, {"d_model", 16}, {"dropout", 0.1}};
  const nlohmann::json text = {{"type", "text"},
                               {"path", BATON_SOURCE_DIR "/resources/datasets/kjv.txt.gz"},
                               {"context", 16}};
  allocations_for(10, model, registry, text);
  const int64_t short_run = allocations_for(10, model, registry, text);
  const int64_t long_run = allocations_for(60, model, registry, text);
  EXPECT_EQ(long_run, short_run) << (long_run - short_run) << " allocations in 50 extra steps";
}

// And the convolutional nets: convolutions, pooling, BatchNorm over
// (N, H, W), residual blocks and augmentation plan every buffer once.
TEST(StepAllocations, TheCnnStepDoesNotAllocate) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json images = {{"type", "csv"},
                                 {"path", BATON_SOURCE_DIR "/resources/datasets/digits.csv.gz"},
                                 {"image_shape", {1, 8, 8}}};
  for (const nlohmann::json& model :
       {nlohmann::json{{"type", "cnn"},
                       {"blocks", {{{"conv", 8}, {"pool", "max"}}, {{"conv", 8}, {"pool", "avg"}}}},
                       {"head", {16}},
                       {"dropout", 0.1}},
        nlohmann::json{{"type", "resnet"}, {"stem", 4}, {"stages", {{4, 1}, {8, 1}}}}}) {
    const nlohmann::json augment = {{"crop_padding", 1}, {"horizontal_flip", true}};
    allocations_for(10, model, registry, images, augment);
    const int64_t short_run = allocations_for(10, model, registry, images, augment);
    const int64_t long_run = allocations_for(20, model, registry, images, augment);
    EXPECT_EQ(long_run, short_run)
        << model.dump() << ": " << (long_run - short_run) << " allocations in 10 extra steps";
  }
}

}  // namespace
}  // namespace baton
