// Models and datasets found by name. Plugins fill a Registry; the trainer
// asks it for factories. There is no global registry: whoever runs the
// engine owns one and passes it down.
#pragma once

#include <baton/core/config.h>
#include <baton/data/dataset.h>
#include <baton/nn/model.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace baton {

struct ModelShape {
  int64_t in_features = 0;
  int64_t out_features = 0;               // classes, or the regression target width
  std::vector<int64_t> image_shape = {};  // (C, H, W) for image data, else empty
};

// Builds a model from its config node (which the factory must read fully
// and finish()), for inputs and outputs of the given shape.
using ModelFactory =
    std::function<std::unique_ptr<Sequential>(const ConfigNode& config, const ModelShape& shape)>;

struct DatasetContext {
  std::string base_dir;  // relative paths in the config are relative to this
  uint64_t seed = 0;
};
using DatasetFactory = std::function<std::shared_ptr<const Dataset>(const ConfigNode& config,
                                                                    const DatasetContext& ctx)>;

struct PluginRecord {
  std::string name, version, description, path;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  void add_model(const std::string& name, ModelFactory factory, std::string description);
  void add_dataset(const std::string& name, DatasetFactory factory, std::string description);

  // InputError naming the config place and the known names when missing.
  const ModelFactory& model(const std::string& name, const ConfigNode& where) const;
  const DatasetFactory& dataset(const std::string& name, const ConfigNode& where) const;
  std::vector<std::string> model_names() const;
  std::vector<std::string> dataset_names() const;

  // Loads one plugin library; RuntimeError with the path and the reason on
  // failure (not a library, no entry point, wrong ABI version, register
  // failed).
  void load_plugin(const std::string& path);
  // Loads every *.so in `dir`; returns how many were loaded.
  int load_plugin_dir(const std::string& dir);
  const std::vector<PluginRecord>& plugins() const { return plugins_; }

 private:
  struct Handle;
  template <class F>
  struct Entry {
    F factory;
    std::string description;
  };
  // Declared first so they are destroyed last: factories live in the
  // libraries.
  std::vector<std::unique_ptr<Handle>> handles_;
  std::map<std::string, Entry<ModelFactory>> models_;
  std::map<std::string, Entry<DatasetFactory>> datasets_;
  std::vector<PluginRecord> plugins_;
};

// The default plugin directory for an executable at `exe_path`:
// <exe dir>/../lib/baton/plugins (same in the build tree and when installed).
std::string default_plugin_dir(const std::string& exe_path);

}  // namespace baton
