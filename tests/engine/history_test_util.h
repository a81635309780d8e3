// Helpers shared by the history tests and the history benchmark.
#pragma once

#include <baton/history/sink.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace baton::history_test {

// A fresh directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "baton-history-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Raw SQL on a file, outside the engine (fixtures, checks).
inline void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

inline std::string query_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

inline std::string pragma(const std::string& path, const std::string& name) {
  return query_text(path, "PRAGMA " + name);
}

inline int64_t count(const std::string& path, const std::string& sql) {
  return std::atoll(query_text(path, sql).c_str());
}

struct Recorded {
  std::vector<StepEvent> steps;
  std::vector<double> losses;
  size_t links = 0;
  int64_t epochs = 0;
  std::vector<Event> events;  // everything emitted, in order
};

// Records a synthetic run through a HistorySink: `total_steps` steps,
// a step event every `log_every`, an epoch every 100 steps, a link event
// with each step event, a log before the run_start, and the given end.
inline Recorded record_run(const std::string& db, const std::string& run, int64_t total_steps,
                           int64_t log_every, const std::string& status,
                           const std::string& strategy = "mirrored") {
  Recorded rec;
  HistoryRunInfo info;
  info.topology = {{"world_size", 1}};
  HistorySink sink(db, info);
  auto emit = [&](const Event& e) {
    rec.events.push_back(e);
    sink.emit(e);
  };
  emit(LogEvent{run, LogLevel::kInfo, "before run_start"});
  RunStartEvent start;
  start.run = run;
  start.name = run;
  start.strategy = strategy;
  start.replicas = 2;
  start.total_steps = total_steps;
  start.tokens_per_sample = 64;  // as a language model's: kept and replayed
  start.model_flops_per_step = 1.5e9;
  start.peak_flops = 6.69e13;  // as on GPUs: kept and replayed
  start.peak_note = "modelled fp32 dense peak";
  start.config = {{"name", run}, {"optimizer", {{"lr", 0.01}}}};
  emit(start);
  double wall = 0;
  for (int64_t step = 1; step <= total_steps; ++step) {
    wall += 0.001;
    if (step % log_every == 0) {
      StepEvent e;
      e.run = run;
      e.step = step;
      e.epoch = (step - 1) / 100;
      e.loss = 2.0 / std::sqrt(static_cast<double>(step)) + 0.01 * std::sin(step * 0.37);
      e.accuracy = 1.0 - e.loss / 3;
      e.lr = 0.01;
      e.grad_norm = 1.5 + std::cos(step * 0.11);
      e.samples_per_s = 1000 + step;
      e.rank_samples_per_s = e.samples_per_s;  // one process: its rate is the job's
      e.local_replicas = 2;                    // both replicas (start.replicas) in it
      e.step_time_ms = 0.1 + 1e-7 * static_cast<double>(step);
      e.data_ms = 0.01;
      e.compute_ms = 0.07;
      e.comm_ms = 0.01;
      e.optimizer_ms = 0.01;
      e.wall_time_s = wall;
      // MFU as on GPUs, on some steps (a step without one stores none).
      if (step % 3 == 0) e.mfu = 1.5e9 / (e.step_time_ms / 1000) / (2 * 6.69e13);
      rec.steps.push_back(e);
      rec.losses.push_back(e.loss);
      emit(e);
      // The time waiting for the peer, kept beside the transfer time; odd
      // steps' samples are of messages under MPI's eager limit.
      emit(LinkEvent{run, step, 0, 1, 4096 * step, 1e-4, 4096.0 * step / 1e-4 / 1e9, false,
                     1e-3 * static_cast<double>(step), step % 2 == 1});
      ++rec.links;
    }
    if (step % 100 == 0) {
      EpochEvent ep;
      ep.run = run;
      ep.epoch = step / 100 - 1;
      ep.step = step;
      ep.train_loss = rec.losses.empty() ? 0 : rec.losses.back();
      ep.train_accuracy = 0.5;
      ep.has_validation = true;
      ep.val_loss = 0.7;
      ep.val_accuracy = 0.6;
      ep.samples_per_s = 123;
      ep.epoch_time_s = 0.1;
      emit(ep);
      emit(CheckpointEvent{run, step, "/ckpt/" + std::to_string(step), 1000, 2.5});
      // A language model's sample (schema 5), bytes of every kind in it.
      emit(SampleEvent{run, step, "And", " God said\n\t" + std::to_string(step), 0.8});
      // Two GPUs' state: one measured, one emulated (its utilisation not
      // known).
      emit(DeviceEvent{run, step, "gpu:0", 93.5, 2048.25, 81559, 305.5, 64, false});
      emit(DeviceEvent{run, step, "gpu_emulated:1", -1, 12.5, 4096, -1, -1, true});
      ++rec.epochs;
    }
  }
  RunEndEvent end;
  end.run = run;
  end.status = status;
  end.step = total_steps;
  end.wall_time_s = wall;
  end.train_loss = rec.losses.empty() ? 0 : rec.losses.back();
  end.tokens_per_s = 64000;
  end.model_flops_per_s = 1.5e12;
  end.mfu = 0.0112;
  end.error = status == "failed" ? "boom" : "";
  emit(end);
  sink.close();
  return rec;
}

}  // namespace baton::history_test
