// The `text` dataset: one or more text files (plain or .gz) as byte-level
// tokens (vocabulary 256: every byte is a token, so any file is accepted,
// UTF-8 or not - a multi-byte character is several tokens, as in GPT-2's
// byte-level base). A sample is a window of `context` tokens and its
// labels are the next token at each position: windows start every
// `context` tokens, so consecutive windows share one token and every token
// but a file's first is predicted once per epoch. Windows never cross a
// file's end; each file is a file for the FILE shard policy. A held-out
// split takes the last windows (by position, not a shuffled draw: nearby
// windows are too alike to hold out at random).
//
//   {"type": "text", "path": "corpus.txt.gz" | [..] | "shards/*.txt", "context": 128}
#include <baton/core/error.h>

#include <cstring>
#include <filesystem>

#include "datasets.h"

namespace baton::datasets {
namespace {

constexpr int64_t kVocab = 256;

class TextDataset final : public Dataset {
 public:
  TextDataset(std::vector<std::string> paths, std::vector<std::string> texts, int64_t context)
      : paths_(std::move(paths)), context_(context) {
    int64_t start = 0;
    for (std::string& t : texts) {
      text_starts_.push_back(static_cast<int64_t>(bytes_.size()));
      window_starts_.push_back(start);
      start += (static_cast<int64_t>(t.size()) - 1) / context_;
      bytes_.insert(bytes_.end(), t.begin(), t.end());
    }
    window_starts_.push_back(start);
  }

  int64_t size() const override { return window_starts_.back(); }
  int64_t features() const override { return context_; }
  int64_t classes() const override { return kVocab; }
  int64_t labels_per_sample() const override { return context_; }
  bool token_features() const override { return true; }
  bool split_by_position() const override { return true; }
  int64_t num_files() const override { return static_cast<int64_t>(paths_.size()); }
  int64_t file_of(int64_t i) const override {
    size_t f = 0;
    while (f + 1 < paths_.size() && window_starts_[f + 1] <= i) ++f;
    return static_cast<int64_t>(f);
  }

  void read(int64_t i, float* x, int32_t* label, float* /*target*/) const override {
    const int64_t f = file_of(i);
    const unsigned char* w = bytes_.data() + text_starts_[f] + (i - window_starts_[f]) * context_;
    for (int64_t t = 0; t < context_; ++t) x[t] = static_cast<float>(w[t]);
    if (label != nullptr) {
      for (int64_t t = 0; t < context_; ++t) label[t] = static_cast<int32_t>(w[t + 1]);
    }
  }

  std::string describe() const override {
    std::string name = std::filesystem::path(paths_.front()).filename().string();
    if (paths_.size() > 1) name += " and " + std::to_string(paths_.size() - 1) + " more";
    return "text " + name + " (" + std::to_string(bytes_.size()) + " bytes, " +
           std::to_string(size()) + " windows of " + std::to_string(context_) +
           " tokens, byte-level, vocabulary 256)";
  }

 private:
  std::vector<std::string> paths_;
  int64_t context_;
  std::vector<unsigned char> bytes_;
  std::vector<int64_t> text_starts_;    // first byte of each file in bytes_
  std::vector<int64_t> window_starts_;  // first window of each file; one more at the end
};

std::string read_all(const std::string& path) {
  GzReader in(path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const size_t got = in.read(buf, sizeof buf);
    if (got == 0) break;
    out.append(buf, got);
  }
  return out;
}

}  // namespace

std::shared_ptr<const Dataset> make_text(const ConfigNode& config, const DatasetContext& ctx) {
  config.accept("type");
  const std::vector<std::string> paths = input_paths(config, "path", ctx);
  const int64_t context = config.integer_or("context", 128, 1, 1 << 20);
  (void)config.choice_or("tokenizer", "bytes", {"bytes"});
  config.finish();
  std::vector<std::string> texts;
  for (const std::string& p : paths) {
    texts.push_back(read_all(p));
    if (static_cast<int64_t>(texts.back().size()) < context + 1) {
      config.fail("context", std::to_string(context) + " tokens need at least " +
                                 std::to_string(context + 1) + " bytes of text, and " + p +
                                 " has " + std::to_string(texts.back().size()) +
                                 ": use a shorter context or more text");
    }
  }
  return std::make_shared<TextDataset>(paths, std::move(texts), context);
}

}  // namespace baton::datasets
