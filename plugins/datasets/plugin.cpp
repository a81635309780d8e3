// Entry point of the built-in datasets plugin (see baton/plugin_abi.h).
#include <baton/train/plugin_abi.h>

#include <cstdio>
#include <exception>

#include "datasets.h"

namespace {

int register_components(void* registry, char* err, size_t err_size) {
  // Nothing may cross the C boundary as an exception: report it instead.
  auto report = [&](const char* what) {
    if (err != nullptr && err_size > 0) std::snprintf(err, err_size, "%s", what);
    return 1;
  };
  if (registry == nullptr) return report("datasets: null registry");
  try {
    auto& r = *static_cast<baton::Registry*>(registry);
    namespace d = baton::datasets;
    r.add_dataset("synthetic_classification", d::make_synthetic,
                  "Gaussian clusters, one per class (keys: features, classes, samples, seed, "
                  "spread, separation)");
    r.add_dataset("synthetic_images", d::make_synthetic_images,
                  "Gaussian clusters as images, a random template per class (keys: "
                  "image_shape, classes, samples, seed, spread, separation)");
    r.add_dataset("csv", d::make_csv,
                  "numeric CSV, plain or .gz (keys: path, header, label, delimiter, task, "
                  "classes)");
    r.add_dataset("idx", d::make_idx,
                  "MNIST IDX image and label files, plain or .gz (keys: images, labels, "
                  "normalize, classes)");
    r.add_dataset("text", d::make_text,
                  "text files, plain or .gz, as byte-level tokens in windows of context + 1 "
                  "(keys: path, context, tokenizer)");
    return 0;
  } catch (const std::exception& e) {
    return report(e.what());
  } catch (...) {
    return report("datasets: unknown exception while registering");
  }
}

const baton_plugin_info kInfo = {
    sizeof(baton_plugin_info),
    BATON_PLUGIN_ABI_VERSION,
    "datasets",
    "1.0.0",
    "Built-in datasets: synthetic_classification, synthetic_images, csv, idx, text",
    &register_components,
    nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const baton_plugin_info* baton_plugin_entry(
    void) {
  return &kInfo;
}
