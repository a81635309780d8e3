// Strategy equivalence: with the same seed and global batch, N replicas in
// threads end with the same parameters as one replica, within a stated
// tolerance (the only difference is the order in which per-row gradient
// contributions are summed). And the replicas stay identical to each other.
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "strategy_test_config.h"

namespace baton {
namespace {

class Strategies : public ::testing::Test {
 protected:
  void SetUp() override { registry_.load_plugin_dir(BATON_PLUGIN_DIR); }

  static nlohmann::json doc(const nlohmann::json& strategy, const nlohmann::json& optimizer,
                            int64_t global_batch) {
    return equivalence_config(strategy, optimizer, global_batch);
  }

  // Trains and returns every replica's parameters, flattened.
  std::vector<std::vector<float>> train(const nlohmann::json& d,
                                        std::vector<Event>* events = nullptr) {
    RunConfig cfg = parse_run_config(d, "strategy.json");
    Telemetry t;
    if (events)
      t.add(std::make_shared<CallbackSink>([events](const Event& e) { events->push_back(e); }));
    TrainOptions opt;
    opt.run_id = "eq";
    Trainer trainer(cfg, registry_, t, opt);
    TrainSummary s = trainer.run();
    EXPECT_EQ(s.status, "completed");
    std::vector<std::vector<float>> out;
    for (int r = 0; r < trainer.strategy().num_replicas(); ++r) {
      std::vector<float> flat;
      for (Param* p : trainer.model(r).params()) {
        flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
      }
      out.push_back(std::move(flat));
    }
    return out;
  }

  Registry registry_;
};

struct Case {
  const char* type;
  int replicas;
  const char* algorithm;
};

// shard_policy off: every replica reads the whole dataset, and the step's
// gradient is the mean over the rows of all replicas' batches together (the
// concatenated global batch). Without shuffling, 2 replicas of s rows each
// read the same s rows, so their concatenated batch has the mean gradient
// of those s rows: exactly one device with a batch of s. SGD notices a
// wrong scale (the old code summed two means: 2x the gradient).
TEST_F(Strategies, ShardPolicyOffAveragesOverTheConcatenatedBatch) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  nlohmann::json one_doc = doc({{"type", "one_device"}}, sgd, 16);
  one_doc["data"]["shuffle_buffer"] = 0;
  nlohmann::json off_doc =
      doc({{"type", "mirrored"}, {"replicas", 2}, {"allreduce", {{"algorithm", "ring"}}}}, sgd, 32);
  off_doc["data"]["shuffle_buffer"] = 0;
  off_doc["data"]["shard_policy"] = "off";
  std::vector<Event> one_events, off_events;
  const auto one = train(one_doc, &one_events)[0];
  const auto off = train(off_doc, &off_events);
  ASSERT_EQ(off.size(), 2u);
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    worst = std::max(worst, std::fabs(off[0][i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
  }
  EXPECT_LE(worst, 1.0) << "off x2 with batch 32 is not one device with batch 16";
  // The same epochs (each replica's pass over all 300 samples: 19 steps),
  // and the same mean losses.
  std::vector<double> one_loss, off_loss;
  for (const Event& e : one_events)
    if (const auto* ep = std::get_if<EpochEvent>(&e)) one_loss.push_back(ep->train_loss);
  for (const Event& e : off_events)
    if (const auto* ep = std::get_if<EpochEvent>(&e)) off_loss.push_back(ep->train_loss);
  ASSERT_EQ(one_loss.size(), 2u);
  ASSERT_EQ(off_loss.size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(off_loss[k], one_loss[k], 1e-4 * one_loss[k]);
  int64_t last_step = 0;
  for (const Event& e : off_events)
    if (const auto* end = std::get_if<RunEndEvent>(&e)) last_step = end->step;
  EXPECT_EQ(last_step, 2 * 19);
}

TEST_F(Strategies, ReplicasMatchOneDevice) {
  const nlohmann::json optimizers[] = {
      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"type", "adam"}, {"lr", 0.01}},
  };
  const Case cases[] = {{"mirrored", 2, "native"},        {"mirrored", 4, "native"},
                        {"mirrored", 3, "ring"},          {"mirrored", 4, "ring"},
                        {"central_storage", 2, "native"}, {"central_storage", 4, "ring"}};
  for (const auto& opt : optimizers) {
    // 30 rows over 4 replicas: shares 8, 8, 7, 7 (the remainder rule).
    for (int64_t batch : {32, 30}) {
      const auto one = train(doc({{"type", "one_device"}}, opt, batch))[0];
      for (const Case& c : cases) {
        nlohmann::json st = {{"type", c.type}, {"replicas", c.replicas}};
        // central_storage runs no allreduce and takes no allreduce block.
        if (std::string(c.type) != "central_storage") {
          st["allreduce"] = {{"algorithm", c.algorithm}, {"bucket_mb", 0.0005}};
        }
        const auto many = train(doc(st, opt, batch));
        ASSERT_EQ(static_cast<int>(many.size()), c.replicas);
        ASSERT_EQ(many[0].size(), one.size());
        // Tolerance: |a - b| <= 1e-4 + 1e-3 |b|, from float sums in another order.
        double worst = 0;
        for (size_t i = 0; i < one.size(); ++i) {
          const double err = std::fabs(many[0][i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i]));
          worst = std::max(worst, err);
        }
        EXPECT_LE(worst, 1.0) << c.type << " x" << c.replicas << " " << c.algorithm << " batch "
                              << batch << " " << opt.dump();
        for (int r = 1; r < c.replicas; ++r) {
          EXPECT_EQ(many[r], many[0]) << c.type << ": replica " << r << " drifted from replica 0";
        }
      }
    }
  }
}

// Dropout: a row's mask is keyed on its place in the global batch, so N
// replicas draw the masks one device draws and still train to the same
// parameters (they used to draw the same mask stream on every replica).
TEST_F(Strategies, DropoutReplicasMatchOneDevice) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  for (int64_t batch : {32, 30}) {
    nlohmann::json one_doc = doc({{"type", "one_device"}}, sgd, batch);
    one_doc["model"]["dropout"] = 0.3;
    const auto one = train(one_doc)[0];
    const Case cases[] = {
        {"mirrored", 2, "native"}, {"mirrored", 3, "ring"}, {"central_storage", 4, "native"}};
    for (const Case& c : cases) {
      nlohmann::json st = {{"type", c.type}, {"replicas", c.replicas}};
      if (std::string(c.type) != "central_storage") {
        st["allreduce"] = {{"algorithm", c.algorithm}, {"bucket_mb", 0.0005}};
      }
      nlohmann::json d = doc(st, sgd, batch);
      d["model"]["dropout"] = 0.3;
      const auto many = train(d);
      double worst = 0;
      for (size_t i = 0; i < one.size(); ++i) {
        worst = std::max(worst, std::fabs(many[0][i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
      }
      EXPECT_LE(worst, 1.0) << c.type << " x" << c.replicas << " batch " << batch << " dropout";
      for (int r = 1; r < c.replicas; ++r) EXPECT_EQ(many[r], many[0]) << c.type << " " << r;
    }
  }
}

// The chief's state reaches every replica before the first step (DDP's and
// Horovod's initial broadcast): a replica that starts from other values
// (another CPU's kernels, here a deliberate nudge) is overwritten, and the
// run still equals one device.
TEST_F(Strategies, TheChiefsStateIsBroadcastBeforeTheFirstStep) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  const auto one = train(doc({{"type", "one_device"}}, sgd, 32))[0];
  RunConfig cfg = parse_run_config(doc({{"type", "mirrored"}, {"replicas", 3}}, sgd, 32), "s.json");
  Telemetry t;
  TrainOptions opt;
  opt.run_id = "bcast";
  Trainer trainer(cfg, registry_, t, opt);
  for (Param* p : trainer.model(2).params()) p->value[0] += 0.5f;
  ASSERT_EQ(trainer.run().status, "completed");
  std::vector<std::vector<float>> flat(3);
  for (int r = 0; r < 3; ++r) {
    for (Param* p : trainer.model(r).params())
      flat[r].insert(flat[r].end(), p->value.data(), p->value.data() + p->value.numel());
  }
  EXPECT_EQ(flat[2], flat[0]) << "replica 2 kept its own start";
  double worst = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    worst = std::max(worst, std::fabs(flat[0][i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
  }
  EXPECT_LE(worst, 1.0);
}

// Every drift_check_steps steps the replicas compare parameter checksums: a
// replica nudged during the run fails it at the next check, named.
TEST_F(Strategies, AReplicaThatDriftsFailsTheRunWithItsName) {
  nlohmann::json d = doc({{"type", "mirrored"}, {"replicas", 3}, {"drift_check_steps", 3}},
                         {{"type", "sgd"}, {"lr", 0.05}}, 32);
  d["train"]["log_every_steps"] = 1;
  RunConfig cfg = parse_run_config(d, "s.json");
  Trainer* running = nullptr;
  Telemetry t;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) {
    const auto* step = std::get_if<StepEvent>(&e);
    if (step != nullptr && step->step == 4) running->model(2).params()[0]->value[3] += 1e-3f;
  }));
  TrainOptions opt;
  opt.run_id = "drift";
  Trainer trainer(cfg, registry_, t, opt);
  running = &trainer;
  try {
    trainer.run();
    ADD_FAILURE() << "the drifted replica went unnoticed";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("replica 2 drifted from the chief (replica 0) at step 6"),
              std::string::npos)
        << what;
  }
  // 0 turns the check off: the same nudge then goes unnoticed.
  d["strategy"]["drift_check_steps"] = 0;
  RunConfig off = parse_run_config(d, "s.json");
  Trainer quiet(off, registry_, t, opt);
  running = &quiet;
  EXPECT_EQ(quiet.run().status, "completed");
}

// A communicator that counts the allreduces it passes on.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string describe() const override { return "counting/" + inner_.describe(); }
  void allreduce(float* data, int64_t count, ReduceOp op) override {
    ++allreduces;
    floats += count;
    inner_.allreduce(data, count, op);
  }
  void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) override {
    inner_.reduce_scatter(in, out, count, op);
  }
  void allgather(const float* in, float* out, int64_t count) override {
    inner_.allgather(in, out, count);
  }
  void broadcast(float* data, int64_t count, int root) override {
    inner_.broadcast(data, count, root);
  }
  void send(const float* data, int64_t count, int dst) override { inner_.send(data, count, dst); }
  void recv(float* data, int64_t count, int src) override { inner_.recv(data, count, src); }
  void sendrecv(const float* s, int64_t sc, int dst, float* r, int64_t rc, int src) override {
    inner_.sendrecv(s, sc, dst, r, rc, src);
  }
  void barrier() override { inner_.barrier(); }
  int allreduces = 0;
  int64_t floats = 0;

 private:
  Communicator& inner_;
};

// A step's loss, correct count and stop requests cross the processes in
// one collective of three floats (they were three blocking allreduces).
TEST(StepTotals, MultiWorkerCombinesAStepInOneCollective) {
  LocalGroup world(1, CommOptions{});
  for (int local : {1, 2}) {
    auto counting = std::make_unique<CountingCommunicator>(world.rank(0));
    CountingCommunicator* c = counting.get();
    MultiWorkerMirroredStrategy mwm(std::move(counting), local, GradientOptions{}, CommOptions{});
    const PerReplica<double> losses(static_cast<size_t>(local), 1.5);
    const PerReplica<double> corrects(static_cast<size_t>(local), 3.0);
    const Strategy::StepTotals t = mwm.combine_step(losses, corrects, local == 2);
    EXPECT_EQ(c->allreduces, 1) << local << " local replica(s)";
    EXPECT_EQ(c->floats, 3);
    EXPECT_DOUBLE_EQ(t.loss_sum, 1.5 * local);
    EXPECT_DOUBLE_EQ(t.correct, 3.0 * local);
    EXPECT_EQ(t.stop, local == 2);
  }
}

// data.cache keeps one copy of the decoded data per process, not one per
// replica; the validation data is split over the replicas and the sums
// reduced, and gives what one device's evaluation gives.
TEST_F(Strategies, OneCachePerProcessAndValidationSharedByTheReplicas) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  auto with_val = [&](nlohmann::json d) {
    d["data"]["cache"] = true;
    d["data"]["validation_split"] = 0.2;
    return parse_run_config(d, "s.json");
  };
  std::vector<Event> one_events, many_events;
  const auto run = [&](const RunConfig& cfg, std::vector<Event>* events, int64_t* bytes) {
    Telemetry t;
    t.add(std::make_shared<CallbackSink>([events](const Event& e) { events->push_back(e); }));
    TrainOptions opt;
    opt.run_id = "cache";
    Trainer trainer(cfg, registry_, t, opt);
    *bytes = trainer.cache_bytes();
    EXPECT_EQ(trainer.run().status, "completed");
  };
  int64_t one_bytes = 0, many_bytes = 0;
  run(with_val(doc({{"type", "one_device"}}, sgd, 30)), &one_events, &one_bytes);
  run(with_val(doc({{"type", "mirrored"}, {"replicas", 3}}, sgd, 30)), &many_events, &many_bytes);
  // 300 samples of 12 features and a label, once.
  EXPECT_EQ(one_bytes, 300 * (12 * 4 + 4));
  EXPECT_EQ(many_bytes, one_bytes) << "each of the 3 replicas kept its own cache";
  std::vector<EpochEvent> one_ep, many_ep;
  for (const Event& e : one_events)
    if (const auto* ep = std::get_if<EpochEvent>(&e)) one_ep.push_back(*ep);
  for (const Event& e : many_events)
    if (const auto* ep = std::get_if<EpochEvent>(&e)) many_ep.push_back(*ep);
  ASSERT_EQ(one_ep.size(), 2u);
  ASSERT_EQ(many_ep.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(many_ep[k].has_validation);
    EXPECT_NEAR(many_ep[k].val_loss, one_ep[k].val_loss, 1e-4 * one_ep[k].val_loss);
    EXPECT_DOUBLE_EQ(many_ep[k].val_accuracy, one_ep[k].val_accuracy);
  }
}

// central_storage is TF's: one copy of the parameters and one optimizer
// state for all replicas (mirrored keeps one per replica), and it still
// trains as one device does.
TEST_F(Strategies, CentralStorageHoldsOneCopy) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const auto bytes_of = [&](const nlohmann::json& st) {
    RunConfig cfg = parse_run_config(doc(st, adam, 30), "s.json");
    Telemetry t;
    TrainOptions opt;
    opt.run_id = "bytes";
    Trainer trainer(cfg, registry_, t, opt);
    return trainer.parameter_bytes();
  };
  const int64_t one = bytes_of({{"type", "one_device"}});
  // 12-24-16-5 MLP: 12*24+24 + 24*16+16 + 16*5+5 = 797 floats; Adam's two moments.
  EXPECT_EQ(one, 797 * 4 * 3);
  EXPECT_EQ(bytes_of({{"type", "central_storage"}, {"replicas", 3}}), one);
  EXPECT_EQ(bytes_of({{"type", "mirrored"}, {"replicas", 3}}), 3 * one);
}

// The equivalence matrix on threads: every in-process strategy x replica
// count x optimizer (SGD notices a wrong gradient scale, Adam hides it) x
// layer that touches replicas (dropout; SyncBatchNorm over the global
// batch) x a global batch that divides evenly and one that does not. With
// the data policy N replicas must train as one device. (off and file read
// other samples than one device by definition: their equivalence - to the
// concatenated batch, to whole files - has its own tests.)
TEST_F(Strategies, EquivalenceMatrix) {
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  struct Layerwise {
    const char* name;
    const char* norm;
    double dropout;
  };
  const Layerwise layers[] = {{"dropout", nullptr, 0.25}, {"syncbatchnorm", "syncbatchnorm", 0.0}};
  int cells = 0;
  for (const auto& opt : optimizers) {
    for (const Layerwise& l : layers) {
      // Not Adam with a norm after a biased Linear: that bias's true
      // gradient is 0 (the norm removes the mean), and Adam turns the last
      // bits of float noise around 0 into full-size steps of either sign.
      if (l.norm != nullptr && opt["type"] == "adam") continue;
      for (int64_t batch : {32, 30}) {
        nlohmann::json one = equivalence_config({{"type", "one_device"}}, opt, batch, l.norm);
        one["model"]["dropout"] = l.dropout;
        one["train"]["epochs"] = 1;
        const auto ref = train(one)[0];
        for (const char* type : {"mirrored", "central_storage"}) {
          for (int replicas : {2, 3}) {
            nlohmann::json d =
                equivalence_config({{"type", type}, {"replicas", replicas}}, opt, batch, l.norm);
            d["model"]["dropout"] = l.dropout;
            d["train"]["epochs"] = 1;
            d["data"]["shard_policy"] = "data";
            const auto many = train(d);
            const double worst = worst_equivalence_error(many[0], ref);
            EXPECT_LE(worst, 1.0) << type << " x" << replicas << " " << l.name << " batch " << batch
                                  << " " << opt.dump();
            for (int r = 1; r < replicas; ++r) EXPECT_EQ(many[r], many[0]) << type << " " << r;
            ++cells;
          }
        }
      }
    }
  }
  EXPECT_EQ(cells, 24);
}

// The language model in the same matrix: a tiny GPT with and without
// dropout (on the embedding, the attention weights and both residual
// branches), AdamW, an even and an uneven global batch.
TEST_F(Strategies, GptReplicasMatchOneDevice) {
  const nlohmann::json adamw = {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}};
  int cells = 0;
  for (double dropout : {0.0, 0.2}) {
    for (int64_t batch : {12, 11}) {
      const auto ref =
          train(gpt_equivalence_config({{"type", "one_device"}}, adamw, batch, dropout))[0];
      for (const char* type : {"mirrored", "central_storage"}) {
        for (int replicas : {2, 3}) {
          nlohmann::json d = gpt_equivalence_config({{"type", type}, {"replicas", replicas}}, adamw,
                                                    batch, dropout);
          d["data"]["shard_policy"] = "data";
          const auto many = train(d);
          ASSERT_EQ(many[0].size(), ref.size());
          const double worst = worst_equivalence_error(many[0], ref);
          EXPECT_LE(worst, 1.0) << type << " x" << replicas << " dropout " << dropout << " batch "
                                << batch;
          for (int r = 1; r < replicas; ++r) EXPECT_EQ(many[r], many[0]) << type << " " << r;
          ++cells;
        }
      }
    }
  }
  EXPECT_EQ(cells, 16);
}

// And the convolutional net: a tiny CNN with dropout, without a norm and
// with SyncBatchNorm over (N, H, W) of the global batch, SGD with momentum.
TEST_F(Strategies, CnnReplicasMatchOneDevice) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  int cells = 0;
  for (const char* norm : {static_cast<const char*>(nullptr), "syncbatchnorm"}) {
    for (int64_t batch : {24, 23}) {
      const auto ref =
          train(cnn_equivalence_config({{"type", "one_device"}}, sgd, batch, 0.25, norm))[0];
      for (const char* type : {"mirrored", "central_storage"}) {
        for (int replicas : {2, 3}) {
          nlohmann::json d = cnn_equivalence_config({{"type", type}, {"replicas", replicas}}, sgd,
                                                    batch, 0.25, norm);
          d["data"]["shard_policy"] = "data";
          const auto many = train(d);
          ASSERT_EQ(many[0].size(), ref.size());
          const double worst = worst_equivalence_error(many[0], ref);
          EXPECT_LE(worst, 1.0) << type << " x" << replicas << (norm ? " syncbn" : "") << " batch "
                                << batch;
          for (int r = 1; r < replicas; ++r) EXPECT_EQ(many[r], many[0]) << type << " " << r;
          ++cells;
        }
      }
    }
  }
  EXPECT_EQ(cells, 16);
}

// Overlapping the bucket allreduces with backward runs the same collectives
// on the same buffers in the same order as reducing after backward: the
// parameters must come out bit for bit the same. Tiny buckets (one per
// parameter) make many collectives overlap.
TEST_F(Strategies, OverlapGivesTheSameBitsAsReducingAfterBackward) {
  // (central_storage has no overlap to switch: it reduces into its one
  // copy after backward, and refuses the allreduce block.)
  const Case cases[] = {{"mirrored", 2, "native"}, {"mirrored", 3, "ring"}};
  for (const Case& c : cases) {
    std::vector<std::vector<float>> result[2];
    for (bool overlap : {false, true}) {
      nlohmann::json st = {
          {"type", c.type},
          {"replicas", c.replicas},
          {"allreduce", {{"algorithm", c.algorithm}, {"bucket_mb", 0.0005}, {"overlap", overlap}}}};
      RunConfig cfg = parse_run_config(doc(st, {{"type", "adam"}, {"lr", 0.01}}, 30), "s.json");
      Telemetry t;
      TrainOptions opt;
      opt.run_id = "overlap";
      Trainer trainer(cfg, registry_, t, opt);
      EXPECT_EQ(trainer.strategy().overlaps_backward(), overlap) << c.type;
      EXPECT_EQ(trainer.run().status, "completed");
      for (int r = 0; r < c.replicas; ++r) {
        std::vector<float> flat;
        for (Param* p : trainer.model(r).params()) {
          flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
        }
        result[overlap].push_back(std::move(flat));
      }
    }
    EXPECT_EQ(result[1], result[0]) << c.type << " x" << c.replicas << " " << c.algorithm;
  }
}

// SyncBatchNorm communicates during backward on the replica's communicator:
// the strategy then reduces after backward, and the run says why.
TEST_F(Strategies, SyncBatchNormTurnsOverlapOff) {
  nlohmann::json d =
      doc({{"type", "mirrored"}, {"replicas", 2}}, {{"type", "sgd"}, {"lr", 0.1}}, 32);
  d["model"]["norm"] = "syncbatchnorm";
  d["train"]["epochs"] = 1;
  RunConfig cfg = parse_run_config(d, "s.json");
  std::vector<Event> events;
  Telemetry t;
  t.add(std::make_shared<CallbackSink>([&events](const Event& e) { events.push_back(e); }));
  TrainOptions opt;
  opt.run_id = "syncbn";
  Trainer trainer(cfg, registry_, t, opt);
  EXPECT_FALSE(trainer.strategy().overlaps_backward());
  EXPECT_EQ(trainer.run().status, "completed");
  bool said = false;
  for (const auto& e : events) {
    if (auto* l = std::get_if<LogEvent>(&e)) {
      said = said || l->message.find("gradient overlap is off") != std::string::npos;
    }
  }
  EXPECT_TRUE(said);
}

TEST_F(Strategies, MirroredEmitsLinkEvents) {
  std::vector<Event> events;
  train(doc({{"type", "mirrored"}, {"replicas", 2}}, {{"type", "sgd"}, {"lr", 0.1}}, 32), &events);
  int links = 0;
  bool start_names_comm = false;
  for (const auto& e : events) {
    if (auto* l = std::get_if<LinkEvent>(&e)) {
      ++links;
      EXPECT_GT(l->num_bytes, 0);
      EXPECT_NE(l->src, l->dst);
    }
    if (auto* s = std::get_if<RunStartEvent>(&e))
      start_names_comm = s->communication == "local/native";
  }
  EXPECT_GT(links, 0);
  EXPECT_TRUE(start_names_comm);
}

// central_storage runs no allreduce: it reports the in-process sum it
// does, never a communicator's "local/<algorithm>", in the run_start event
// and the summary.
TEST_F(Strategies, CentralStorageReportsTheSumItRuns) {
  std::vector<Event> events;
  RunConfig cfg = parse_run_config(
      doc({{"type", "central_storage"}, {"replicas", 2}}, {{"type", "sgd"}, {"lr", 0.1}}, 32),
      "s.json");
  Telemetry t;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) { events.push_back(e); }));
  TrainOptions opt;
  opt.run_id = "central";
  Trainer trainer(cfg, registry_, t, opt);
  EXPECT_EQ(trainer.strategy().communication(), "in-process sum into the central copy");
  const TrainSummary sum = trainer.run();
  EXPECT_EQ(sum.communication, "in-process sum into the central copy");
  EXPECT_EQ(sum.communication_note, "");
  bool started = false;
  for (const auto& e : events) {
    if (const auto* s = std::get_if<RunStartEvent>(&e)) {
      started = true;
      EXPECT_EQ(s->communication, "in-process sum into the central copy");
      EXPECT_EQ(s->communication.find("local/"), std::string::npos) << s->communication;
    }
  }
  EXPECT_TRUE(started);
}

// Regression (mse) with a short last batch: 100 rows in global batches of
// 16 over 2 replicas, so the last batch's 4 rows are all replica 0's and
// replica 1 has none. Its loss adds nothing (it used to average over a
// width of 0: NaN), and the run ends where one device does.
TEST_F(Strategies, RegressionWithAnEmptyReplicaMatchesOneDevice) {
  const std::string csv = ::testing::TempDir() + "baton_strategies_regression.csv";
  ASSERT_TRUE(write_regression_csv(csv, 100, 4));
  const auto regression = [&](const nlohmann::json& strategy) {
    nlohmann::json d = {
        {"seed", 3},
        {"model", {{"type", "mlp"}, {"layers", {4, 8, 1}}, {"activation", "tanh"}}},
        {"loss", "mse"},
        {"data",
         {{"train", {{"type", "csv"}, {"path", csv}, {"task", "regression"}, {"label", 4}}},
          {"shuffle_buffer", 0}}},
        {"optimizer", {{"type", "sgd"}, {"lr", 0.05}}},
        {"train", {{"epochs", 1}, {"global_batch_size", 16}}},
        {"checkpoint", {{"every_epoch", false}}},
        {"strategy", strategy}};
    return train(d);
  };
  const auto one = regression({{"type", "one_device"}})[0];
  const auto two = regression({{"type", "mirrored"}, {"replicas", 2}});
  ASSERT_EQ(two.size(), 2u);
  ASSERT_EQ(two[0].size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_NEAR(two[0][i], one[i], 1e-4 + 1e-3 * std::fabs(one[i])) << "parameter " << i;
  }
  EXPECT_EQ(two[1], two[0]);
  std::remove(csv.c_str());
}

TEST_F(Strategies, SplitBatchRule) {
  OneDeviceStrategy one;
  EXPECT_EQ(one.split_batch(7), (std::vector<int64_t>{7}));
  RunConfig cfg = parse_run_config(
      doc({{"type", "mirrored"}, {"replicas", 4}}, {{"type", "sgd"}, {"lr", 0.1}}, 30),
      "strategy.json");
  Telemetry t;
  TrainOptions opt;
  opt.run_id = "split";
  Trainer trainer(cfg, registry_, t, opt);
  EXPECT_EQ(trainer.strategy().split_batch(30), (std::vector<int64_t>{8, 8, 7, 7}));
  EXPECT_THROW(trainer.strategy().split_batch(3), InputError);
}

}  // namespace
}  // namespace baton
