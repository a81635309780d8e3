// The fit loop end to end: the golden losses of a tiny model, the digits
// MLP's accuracy, checkpoint/resume equivalence, and stop/interrupt.
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

namespace baton {
namespace {

namespace fs = std::filesystem;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.load_plugin_dir(BATON_PLUGIN_DIR);
    dir_ = fs::temp_directory_path() /
           ("baton_trainer_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A config read as if it lived in resources/examples (for relative paths).
  RunConfig config(const nlohmann::json& doc) {
    return parse_run_config(doc, std::string(BATON_SOURCE_DIR) + "/resources/examples/test.json");
  }

  static nlohmann::json tiny() {
    return {
        {"seed", 3},
        {"model", {{"type", "mlp"}, {"layers", {8, 16, 3}}, {"activation", "tanh"}}},
        {"data",
         {{"train",
           {{"type", "synthetic_classification"},
            {"features", 8},
            {"classes", 3},
            {"samples", 96},
            {"seed", 11}}},
          {"shuffle_buffer", 1000}}},
        {"optimizer", {{"type", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}}},
        {"train", {{"epochs", 2}, {"global_batch_size", 16}, {"log_every_steps", 1}}},
    };
  }

  TrainSummary train(const RunConfig& cfg, TrainOptions opt, std::vector<Event>* events = nullptr,
                     std::function<void(const Event&)> hook = {}) {
    Telemetry t;
    t.add(std::make_shared<CallbackSink>([&](const Event& e) {
      if (events) events->push_back(e);
      if (hook) hook(e);
    }));
    if (opt.run_id.empty()) opt.run_id = "test";
    Trainer trainer(cfg, registry_, t, opt);
    return trainer.run();
  }

  Registry registry_;
  fs::path dir_;
};

// Recorded from this implementation at the commit that introduced it. If a
// change moves these, it changed the numerics (initialisation, data order,
// kernels or the update): make sure that was intended, then re-record.
TEST_F(TrainerTest, GoldenFirstTenLosses) {
  const std::vector<double> golden = {
      2.6163886561989784,   1.7473855391144753,  0.6036343537271023,  0.27893833350390196,
      0.23530017212033272,  0.11811234650667757, 0.07025311354664154, 0.05951196086243726,
      0.029922660054580774, 0.013113125663949177};
  TrainSummary s = train(config(tiny()), {});
  ASSERT_GE(s.step_losses.size(), golden.size());
  for (size_t i = 0; i < golden.size(); ++i) {
    EXPECT_NEAR(s.step_losses[i], golden[i], 1e-5 * std::max(1.0, golden[i])) << "step " << i;
  }
}

TEST_F(TrainerTest, SameSeedSameLossesOtherSeedOtherLosses) {
  TrainSummary a = train(config(tiny()), {});
  TrainSummary b = train(config(tiny()), {});
  EXPECT_EQ(a.step_losses, b.step_losses);
  auto other = tiny();
  other["seed"] = 4;
  TrainSummary c = train(config(other), {});
  EXPECT_NE(a.step_losses, c.step_losses);
}

TEST_F(TrainerTest, DigitsMlpReaches95PercentValidationAccuracy) {
  RunConfig cfg = load_run_config(std::string(BATON_SOURCE_DIR) + "/resources/examples/digits.json",
                                  {"checkpoint.every_epoch=false"});
  std::vector<Event> events;
  TrainSummary s = train(cfg, {}, &events);
  EXPECT_EQ(s.status, "completed");
  ASSERT_TRUE(s.has_validation);
  EXPECT_GE(s.val_accuracy, 0.95);
  EXPECT_LT(s.train_loss, 0.1);
  // The event stream is well formed: run_start first, run_end last, one
  // epoch event per epoch.
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(std::holds_alternative<RunStartEvent>(events.front()));
  EXPECT_TRUE(std::holds_alternative<RunEndEvent>(events.back()));
  int epochs = 0;
  for (const auto& e : events) epochs += std::holds_alternative<EpochEvent>(e);
  EXPECT_EQ(epochs, cfg.epochs);
}

TEST_F(TrainerTest, ResumeReproducesTheUninterruptedRun) {
  // Dropout, a cosine schedule and Adam: every piece of state that a resume
  // must restore (weights, moments, step count, data position, masks).
  auto doc = tiny();
  doc["model"]["dropout"] = 0.2;
  doc["model"]["norm"] = "batchnorm";
  doc["optimizer"] = {{"type", "adam"}, {"lr", 0.01}};
  doc["schedule"] = {{"type", "cosine"}, {"warmup_steps", 3}};
  doc["train"]["epochs"] = 3;
  const RunConfig cfg = config(doc);
  TrainSummary full = train(cfg, {});
  ASSERT_EQ(full.steps, 18);

  for (int64_t stop_at : {4, 6, 13}) {
    const std::string ckpt = (dir_ / ("ckpt" + std::to_string(stop_at))).string();
    std::atomic<bool> stop{false};
    TrainOptions first;
    first.checkpoint_dir = ckpt;
    first.stop = &stop;
    TrainSummary part = train(cfg, first, nullptr, [&](const Event& e) {
      if (auto* s = std::get_if<StepEvent>(&e); s && s->step == stop_at) stop = true;
    });
    ASSERT_EQ(part.status, "interrupted");
    ASSERT_EQ(part.steps, stop_at);

    TrainOptions second;
    second.checkpoint_dir = ckpt;
    second.resume = true;
    TrainSummary rest = train(cfg, second);
    EXPECT_EQ(rest.status, "completed");
    EXPECT_EQ(rest.start_step, stop_at);
    ASSERT_EQ(static_cast<int64_t>(rest.step_losses.size()), full.steps - stop_at);
    for (size_t i = 0; i < rest.step_losses.size(); ++i) {
      // Exact: the resumed run does the same float operations in the same order.
      ASSERT_EQ(rest.step_losses[i], full.step_losses[stop_at + i]) << "step " << stop_at + i;
    }
  }
}

TEST_F(TrainerTest, ResumeSkipsACorruptNewestCheckpoint) {
  auto doc = tiny();
  doc["checkpoint"] = {{"every_steps", 2}, {"keep", 5}, {"every_epoch", false}};
  const RunConfig cfg = config(doc);
  const std::string ckpt = (dir_ / "ckpt").string();
  TrainOptions first;
  first.checkpoint_dir = ckpt;
  TrainSummary full = train(cfg, first);
  ASSERT_FALSE(full.last_checkpoint.empty());
  {
    // Flip a byte in the middle of the newest checkpoint.
    std::fstream f(full.last_checkpoint, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(f.tellg());
    f.seekp(size / 2);
    char c = 0;
    f.seekg(size / 2);
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(size / 2);
    f.write(&c, 1);
  }
  TrainOptions again;
  again.checkpoint_dir = ckpt;
  again.resume = true;
  std::vector<Event> events;
  TrainSummary rest = train(cfg, again, &events);
  EXPECT_EQ(rest.start_step, full.steps - 2);  // the one before the newest
  bool warned = false;
  for (const auto& e : events) {
    if (auto* l = std::get_if<LogEvent>(&e)) {
      warned |= l->level == LogLevel::kWarning && l->message.find("skipped") != std::string::npos;
    }
  }
  EXPECT_TRUE(warned);
  ASSERT_EQ(rest.step_losses.size(), 2u);
  EXPECT_EQ(rest.step_losses[0], full.step_losses[full.steps - 2]);
}

// --resume-step-at-least (baton launch sets it to the newest checkpoint's
// step): a folder without a checkpoint at or after it - the chief on a host
// that does not hold the job's checkpoints - fails the resume, naming the
// step, instead of training again from 0 or an older step; a newer
// checkpoint that is there but damaged lets the older valid one stand.
TEST_F(TrainerTest, ResumeRefusesAFolderWithoutTheCheckpointItMustResumeAt) {
  auto doc = tiny();
  doc["checkpoint"] = {{"every_steps", 2}, {"keep", 5}, {"every_epoch", false}};
  const RunConfig cfg = config(doc);
  const std::string ckpt = (dir_ / "ckpt").string();
  TrainOptions first;
  first.checkpoint_dir = ckpt;
  const TrainSummary full = train(cfg, first);
  const int64_t newest = full.steps;
  const auto refusal = [&](const std::string& dir, int64_t floor) -> std::string {
    TrainOptions again;
    again.checkpoint_dir = dir;
    again.resume = true;
    again.resume_step_at_least = floor;
    try {
      train(cfg, again);
    } catch (const ResumeRefused& e) {
      return e.what();
    }
    return "";
  };
  // Another host's folder: empty.
  const std::string none = refusal((dir_ / "elsewhere").string(), newest);
  EXPECT_NE(none.find("--resume-step-at-least " + std::to_string(newest)), std::string::npos)
      << none;
  EXPECT_NE(none.find("holds no valid checkpoint"), std::string::npos) << none;
  // A folder whose newest is older than the floor (a host that was the
  // chief before).
  const std::string old_dir = (dir_ / "old").string();
  fs::create_directories(old_dir);
  const std::string oldest = CheckpointManager(ckpt, 5).list().back();
  fs::copy(oldest, old_dir);
  const std::string older = refusal(old_dir, newest);
  EXPECT_NE(older.find("its newest valid one is at step " +
                       std::to_string(*checkpoint_step_of_name(fs::path(oldest).filename()))),
            std::string::npos)
      << older;
  // The folder that holds it, and no floor: no refusal.
  EXPECT_EQ(refusal(ckpt, newest), "");
  EXPECT_EQ(refusal((dir_ / "elsewhere2").string(), 0), "");
}

TEST_F(TrainerTest, BadConfigsFailAtConstruction) {
  auto bad_width = tiny();
  bad_width["model"]["layers"] = {9, 16, 3};
  EXPECT_THROW(train(config(bad_width), {}), InputError);
  auto regression_loss = tiny();
  regression_loss["loss"] = "mse";
  EXPECT_THROW(train(config(regression_loss), {}), InputError);
  auto missing = tiny();
  missing["data"]["train"] = {{"type", "csv"}, {"path", "no/such/file.csv"}};
  EXPECT_THROW(train(config(missing), {}), InputError);
}

// A tiny GPT on the bundled corpus (windows of 16 bytes).
nlohmann::json tiny_gpt() {
  return {{"seed", 4},
          {"model",
           {{"type", "gpt"}, {"n_layer", 2}, {"n_head", 2}, {"d_model", 32}, {"dropout", 0.1}}},
          {"data",
           {{"train", {{"type", "text"}, {"path", "../datasets/kjv.txt.gz"}, {"context", 16}}},
            {"validation_split", 0.01},
            {"shuffle_buffer", 100000}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}}},
          {"schedule", {{"type", "cosine"}, {"warmup_steps", 3}}},
          {"train", {{"steps", 12}, {"global_batch_size", 16}, {"log_every_steps", 1}}}};
}

// The language model learns: the per-token loss starts near ln(256) (a
// uniform guess over the bytes) and falls fast; accuracy is per token.
TEST_F(TrainerTest, GptLossIsPerTokenAndFalls) {
  auto doc = tiny_gpt();
  doc["train"]["steps"] = 60;
  std::vector<Event> events;
  const TrainSummary s = train(config(doc), {}, &events);
  ASSERT_EQ(s.status, "completed");
  ASSERT_EQ(s.step_losses.size(), 60u);
  EXPECT_NEAR(s.step_losses.front(), std::log(256.0), 0.3);
  EXPECT_LT(s.step_losses.back(), 3.2) << "60 steps did not get below the unigram entropy (3.05)";
  double accuracy = 0;
  for (const Event& e : events) {
    if (auto* st = std::get_if<StepEvent>(&e)) accuracy = st->accuracy;
  }
  EXPECT_GT(accuracy, 0.1);
  EXPECT_LT(accuracy, 1.0);
}

// Resume is exact for the language model too (dropout masks, AdamW
// moments, the data position in a shuffled text).
TEST_F(TrainerTest, GptResumeReproducesTheUninterruptedRun) {
  const RunConfig cfg = config(tiny_gpt());
  const TrainSummary full = train(cfg, {});
  ASSERT_EQ(full.steps, 12);
  const std::string ckpt = (dir_ / "gpt").string();
  std::atomic<bool> stop{false};
  TrainOptions first;
  first.checkpoint_dir = ckpt;
  first.stop = &stop;
  const TrainSummary part = train(cfg, first, nullptr, [&](const Event& e) {
    if (auto* s = std::get_if<StepEvent>(&e); s && s->step == 5) stop = true;
  });
  ASSERT_EQ(part.steps, 5);
  TrainOptions second;
  second.checkpoint_dir = ckpt;
  second.resume = true;
  const TrainSummary rest = train(cfg, second);
  ASSERT_EQ(rest.start_step, 5);
  ASSERT_EQ(rest.step_losses.size(), 7u);
  for (size_t i = 0; i < rest.step_losses.size(); ++i) {
    ASSERT_EQ(rest.step_losses[i], full.step_losses[5 + i]) << "step " << 5 + i;
  }
}

// Malformed language-model configs fail before training, naming the key.
TEST_F(TrainerTest, GptConfigErrorsNameTheirKeys) {
  const auto message = [&](const nlohmann::json& doc) {
    try {
      train(config(doc), {});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no InputError for " << doc.dump();
    return std::string();
  };
  auto d = tiny_gpt();
  d["model"]["preset"] = "gpt5";
  EXPECT_NE(message(d).find("model.preset"), std::string::npos) << message(d);
  EXPECT_NE(message(d).find("gpt2-124m"), std::string::npos) << message(d);  // lists them
  d = tiny_gpt();
  d["model"]["d_model"] = 30;
  d["model"]["n_head"] = 4;
  EXPECT_NE(message(d).find("model.n_head: d_model 30 is not divisible"), std::string::npos)
      << message(d);
  d = tiny_gpt();
  d["model"]["context"] = 8;  // the data's windows are 16
  EXPECT_NE(message(d).find("model.context"), std::string::npos) << message(d);
  d = tiny_gpt();
  d["model"]["vocab_size"] = 100;
  EXPECT_NE(message(d).find("model.vocab_size"), std::string::npos) << message(d);
  d = tiny_gpt();
  d["data"]["standardize"] = true;
  EXPECT_NE(message(d).find("data.standardize"), std::string::npos) << message(d);
  d = tiny_gpt();
  d["model"]["n_layers"] = 2;
  EXPECT_NE(message(d).find("model.n_layers"), std::string::npos) << message(d);
}

// train.sample_every_steps: the chief generates text every N steps and
// emits it as a sample event; the key needs a language model.
TEST_F(TrainerTest, GptSamplesEveryNSteps) {
  auto doc = tiny_gpt();
  doc["train"]["sample_every_steps"] = 4;
  doc["train"]["sample_tokens"] = 25;
  doc["train"]["sample_prompt"] = "And God";
  std::vector<Event> events;
  const TrainSummary s = train(config(doc), {}, &events);
  ASSERT_EQ(s.status, "completed");
  std::vector<int64_t> steps;
  for (const Event& e : events) {
    if (const auto* sm = std::get_if<SampleEvent>(&e)) {
      steps.push_back(sm->step);
      EXPECT_EQ(sm->prompt, "And God");
      EXPECT_EQ(sm->text.size(), 25u);
      EXPECT_DOUBLE_EQ(sm->temperature, 0.8);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8, 12}));
  // Sampling leaves training alone: the same losses as without it.
  auto plain = tiny_gpt();
  EXPECT_EQ(train(config(plain), {}).step_losses, s.step_losses);

  auto mlp = tiny();
  mlp["train"]["sample_every_steps"] = 2;
  try {
    train(config(mlp), {});
    ADD_FAILURE() << "sample_every_steps accepted for an MLP";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("train.sample_every_steps"), std::string::npos)
        << e.what();
  }
}

// GPT-2 small's shape builds from its preset, with the vocabulary padded
// as asked: 12 blocks of width 768, 124M parameters (GPT-2's count with
// 50257 tokens; 38.6M of them the token table).
TEST_F(TrainerTest, Gpt2PresetHasGpt2SmallsParameterCount) {
  ConfigNode node(nlohmann::json{{"type", "gpt"}, {"preset", "gpt2-124m"}}, "t.json", "model");
  auto model = registry_.model("gpt", node)(node, ModelShape{64, 256});
  EXPECT_EQ(model->size(), 15u);  // embedding, 12 blocks, final norm, tied head
  EXPECT_EQ(model->plan(1, 64), 50257);
  EXPECT_TRUE(model->pads_outputs());
  // Parameters: wte 50257x768, wpe 1024x768, 12 x (2 norms, qkv, proj,
  // fc, fc2 with biases), the final norm.
  const int64_t d = 768, blocks = 12;
  const int64_t per_block =
      2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d);
  EXPECT_EQ(model->num_parameters(), 50257 * d + 1024 * d + blocks * per_block + 2 * d);
  EXPECT_EQ(model->num_parameters(), 124439808);
}

// GPT-2 small trains a step on the CPU and checkpoints (slow is fine):
// the vocabulary padded to 50304 as the user asks, windows of 64 bytes.
TEST_F(TrainerTest, Gpt2SmallTrainsAStepAndCheckpoints) {
  auto doc = tiny_gpt();
  doc["model"] = {{"type", "gpt"}, {"preset", "gpt2-124m"}, {"vocab_size", 50304}};
  doc["data"]["train"]["context"] = 64;
  doc["data"]["validation_split"] = 0.0;  // a pass over it would take minutes
  doc["train"] = {{"steps", 1}, {"global_batch_size", 2}, {"log_every_steps", 1}};
  doc["checkpoint"] = {{"every_steps", 1}, {"keep", 1}};
  TrainOptions opt;
  opt.checkpoint_dir = (dir_ / "ckpt").string();
  const TrainSummary s = train(config(doc), opt);
  ASSERT_EQ(s.status, "completed");
  // The softmax is over the padded vocabulary: a uniform guess over 50304.
  EXPECT_NEAR(s.step_losses.at(0), std::log(50304.0), 0.5);
  ASSERT_FALSE(s.last_checkpoint.empty());
  // Parameters and both AdamW moments: 3 x 124.5M floats.
  EXPECT_GT(fs::file_size(s.last_checkpoint), 3ull * 124000000 * 4);
}

// A CNN (BatchNorm's running statistics, dropout, AdamW) resumes exactly;
// image shapes that do not fit are errors naming the key.
TEST_F(TrainerTest, CnnResumesExactlyAndItsShapeErrorsNameTheKey) {
  nlohmann::json doc = {
      {"seed", 3},
      {"model",
       {{"type", "cnn"},
        {"blocks", {{{"conv", 4}, {"pool", "max"}}, {{"conv", 6}}}},
        {"head", {8}},
        {"dropout", 0.2}}},
      {"data",
       {{"train",
         {{"type", "csv"}, {"path", "../datasets/digits.csv.gz"}, {"image_shape", {1, 8, 8}}}},
        {"standardize", true},
        {"augment", {{"crop_padding", 1}}}}},
      {"optimizer", {{"type", "adamw"}, {"lr", 0.01}}},
      {"train", {{"steps", 10}, {"global_batch_size", 16}, {"log_every_steps", 1}}}};
  const RunConfig cfg = config(doc);
  const TrainSummary full = train(cfg, {});
  ASSERT_EQ(full.steps, 10);
  const std::string ckpt = (dir_ / "cnn").string();
  std::atomic<bool> stop{false};
  TrainOptions first;
  first.checkpoint_dir = ckpt;
  first.stop = &stop;
  (void)train(cfg, first, nullptr, [&](const Event& e) {
    if (auto* s = std::get_if<StepEvent>(&e); s && s->step == 4) stop = true;
  });
  TrainOptions second;
  second.checkpoint_dir = ckpt;
  second.resume = true;
  const TrainSummary rest = train(cfg, second);
  ASSERT_EQ(rest.step_losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) ASSERT_EQ(rest.step_losses[i], full.step_losses[4 + i]) << i;

  const auto message = [&](const nlohmann::json& d) {
    try {
      train(config(d), {});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no InputError for " << d.dump();
    return std::string();
  };
  auto bad = doc;
  bad["data"]["train"]["image_shape"] = {1, 8, 9};
  EXPECT_NE(message(bad).find("data.train.image_shape"), std::string::npos) << message(bad);
  bad = doc;
  bad["data"]["train"].erase("image_shape");
  bad["data"].erase("augment");
  EXPECT_NE(message(bad).find("model.type: a convolutional net needs image data"),
            std::string::npos)
      << message(bad);
  bad = doc;
  bad["model"]["blocks"] = {{{"conv", 4}, {"kernel", 9}, {"padding", 0}}};
  EXPECT_NE(message(bad).find("model.blocks[0].conv"), std::string::npos) << message(bad);
  bad = tiny();
  bad["data"]["augment"] = {{"horizontal_flip", true}};
  EXPECT_NE(message(bad).find("data.augment"), std::string::npos) << message(bad);
}

TEST_F(TrainerTest, StepsLimitAndStepEvents) {
  auto doc = tiny();
  doc["train"]["steps"] = 7;
  doc["train"]["log_every_steps"] = 3;
  std::vector<Event> events;
  TrainSummary s = train(config(doc), {}, &events);
  EXPECT_EQ(s.steps, 7);
  std::vector<int64_t> logged;
  for (const auto& e : events) {
    if (auto* st = std::get_if<StepEvent>(&e)) {
      logged.push_back(st->step);
      EXPECT_GT(st->samples_per_s, 0);
      EXPECT_NEAR(st->step_time_ms, st->data_ms + st->compute_ms + st->comm_ms + st->optimizer_ms,
                  1e-6 + 1e-9 * st->step_time_ms);
    }
  }
  EXPECT_EQ(logged, (std::vector<int64_t>{3, 6, 7}));
}

}  // namespace
}  // namespace baton
