#include "sample_command.h"

#include <baton/core/error.h>
#include <baton/history/store.h>
#include <baton/nn/decoder.h>
#include <baton/train/checkpoint.h>
#include <baton/train/checkpoint_model.h>
#include <baton/train/registry.h>
#include <baton/train/run_dir.h>

#include <cstdio>
#include <filesystem>

#include "cli_checks.h"
#include "cli_paths.h"

namespace baton::cli {
namespace fs = std::filesystem;

void add_sample_command(CLI::App& app, SampleArgs& a) {
  CLI::App* s = app.add_subcommand("sample", "Generate text from a trained GPT run or checkpoint");
  s->add_option("source", a.source,
                "A run (history id or run id), a run directory, a checkpoint directory or file")
      ->required();
  s->add_option("--prompt", a.prompt, "Text to continue (default: a new line)");
  s->add_option("--tokens", a.tokens, "Tokens (bytes) to generate")->check(integer_in(1, 1 << 24));
  s->add_option("--temperature", a.temperature, "Softmax temperature; 0 takes the likeliest")
      ->check(CLI::Range(0.0, 100.0));
  s->add_option("--top-k", a.top_k, "Sample among the k likeliest tokens (0: all)")
      ->check(integer_in(0, 1 << 24));
  s->add_option("--seed", a.seed, "Seed of the sampling")->check(integer_in(0, 1LL << 62));
  s->add_option("--runs-dir", a.runs_dir, "Where runs live (default: the user's runs directory)");
  s->add_option("--db", a.db, "History database to look the run up in");
  s->add_option("--plugin-dir", a.plugin_dir, "Load model plugins from DIR");
}

namespace {

// The newest valid checkpoint of `dir` (a checkpoints directory).
CheckpointData latest_in(const std::string& dir, const std::string& what) {
  std::vector<std::string> skipped;
  auto d = CheckpointManager(dir, 1 << 30).load_latest(&skipped);
  if (!d) {
    throw InputError(what + ": no readable checkpoint in " + dir +
                     (skipped.empty() ? "" : " (" + skipped.front() + ")"));
  }
  return std::move(*d);
}

CheckpointData find_checkpoint(const SampleArgs& a, std::string* where) {
  const std::string& src = a.source;
  std::error_code ec;
  if (fs::is_regular_file(src, ec)) {
    *where = src;
    try {
      return read_checkpoint(src);
    } catch (const CheckpointError& e) {
      throw InputError(src + ": not a readable checkpoint (" + e.what() + ")");
    }
  }
  if (fs::is_directory(src, ec)) {
    const fs::path sub = fs::path(src) / "checkpoints";
    *where = fs::is_directory(sub, ec) ? sub.string() : src;
    return latest_in(*where, src);
  }
  const std::string root = a.runs_dir.empty() ? default_runs_root() : a.runs_dir;
  std::string uid = src;
  if (!fs::is_directory(fs::path(root) / uid, ec)) {
    // A history id or uid: the run's directory under the runs root.
    const std::string db = a.db.empty() ? default_history_db_path() : a.db;
    if (!fs::exists(db, ec)) {
      throw InputError("no file, directory or run named \"" + src + "\" (runs under " + root +
                       "; no history at " + db + ")");
    }
    const HistoryStore store(db, HistoryStore::Open::kReadOnly);
    uid = store.run(store.resolve(src)).uid;
  }
  *where = (fs::path(root) / uid / "checkpoints").string();
  return latest_in(*where, "run " + uid);
}

}  // namespace

int run_sample(const SampleArgs& a, const std::string& exe_path) {
  if (!a.plugin_dir.empty()) check_existing_dir("--plugin-dir", a.plugin_dir);
  std::string where;
  const CheckpointData data = find_checkpoint(a, &where);
  Registry registry;
  registry.load_plugin_dir(a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir);
  auto model = model_from_checkpoint(data, registry, where);
  GptDecoder decoder(*model);
  SampleOptions o;
  o.tokens = a.tokens;
  o.temperature = static_cast<float>(a.temperature);
  o.top_k = a.top_k;
  o.seed = static_cast<uint64_t>(a.seed);
  // The data's vocabulary (byte-level text: 256); padding is never sampled.
  o.vocab_limit = data.meta["model_shape"][1].get<int64_t>();
  if (o.vocab_limit > decoder.vocab()) o.vocab_limit = decoder.vocab();
  std::vector<int32_t> prompt;
  for (unsigned char c : a.prompt) prompt.push_back(c);
  if (o.vocab_limit < 256) {
    for (int32_t t : prompt) {
      if (t >= o.vocab_limit) {
        throw InputError("--prompt: byte " + std::to_string(t) + " is outside the model's " +
                         std::to_string(o.vocab_limit) + "-token vocabulary");
      }
    }
  }
  std::fputs(a.prompt.c_str(), stdout);
  generate(decoder, prompt, o, [](int32_t t) {
    std::fputc(t, stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fprintf(stderr, "(%lld tokens from %s, step %lld)\n", static_cast<long long>(a.tokens),
               where.c_str(), static_cast<long long>(data.step));
  return 0;
}

}  // namespace baton::cli
