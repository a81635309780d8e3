// The dataset readers on any file: the first byte picks csv, idx (then
// two bytes of length split the rest: an image file, a label file) or
// text; a dataset that reads has its samples read.
#include <baton/core/config.h>

#include <vector>

#include "../../plugins/datasets/datasets.h"
#include "fuzz_util.h"

namespace {

void read_all(const baton::Dataset& d) {
  std::vector<float> x(static_cast<size_t>(std::max<int64_t>(1, d.features())));
  std::vector<float> target(static_cast<size_t>(std::max<int64_t>(1, d.target_width())));
  std::vector<int32_t> label(static_cast<size_t>(std::max<int64_t>(1, d.labels_per_sample())));
  for (int64_t i = 0; i < std::min<int64_t>(d.size(), 4096); ++i) {
    d.read(i, x.data(), label.data(), target.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t kind = data[0] % 3;
  data += 1;
  size -= 1;
  baton::DatasetContext ctx;
  baton_fuzz::expect_clean([&] {
    if (kind == 0) {
      const std::string path = baton_fuzz::as_file(data, size, ".csv");
      const nlohmann::json cfg = {{"type", "csv"}, {"path", path}, {"label", -1}};
      read_all(*baton::datasets::make_csv(baton::ConfigNode(cfg, "fuzz.json"), ctx));
    } else if (kind == 1) {
      if (size < 2) return;
      // Two bytes of length, then the image file, then the label file.
      const size_t cut = std::min<size_t>(size - 2, static_cast<size_t>(data[0]) * 256 + data[1]);
      const std::string images = baton_fuzz::as_file(data + 2, cut, ".images");
      const std::string labels = baton_fuzz::as_file(data + 2 + cut, size - 2 - cut, ".labels");
      const nlohmann::json cfg = {{"type", "idx"}, {"images", images}, {"labels", labels}};
      read_all(*baton::datasets::make_idx(baton::ConfigNode(cfg, "fuzz.json"), ctx));
    } else {
      const std::string path = baton_fuzz::as_file(data, size, ".txt");
      const nlohmann::json cfg = {{"type", "text"}, {"path", path}, {"context", 8}};
      read_all(*baton::datasets::make_text(baton::ConfigNode(cfg, "fuzz.json"), ctx));
    }
  });
  return 0;
}
