#include <baton/core/error.h>
#include <baton/train/plugin_abi.h>
#include <baton/train/registry.h>
#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

namespace baton {

struct Registry::Handle {
  void* lib = nullptr;
  const baton_plugin_info* info = nullptr;
  ~Handle() {
    if (info && info->struct_size >= offsetof(baton_plugin_info, unload) + sizeof(info->unload) &&
        info->unload) {
      info->unload();
    }
    if (lib) dlclose(lib);
  }
};

Registry::Registry() = default;

Registry::~Registry() {
  // Factories are code inside the libraries: drop them before closing.
  models_.clear();
  datasets_.clear();
}

void Registry::add_model(const std::string& name, ModelFactory factory, std::string description) {
  models_[name] = {std::move(factory), std::move(description)};
}

void Registry::add_dataset(const std::string& name, DatasetFactory factory,
                           std::string description) {
  datasets_[name] = {std::move(factory), std::move(description)};
}

namespace {

template <class Map>
std::string names_of(const Map& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s.empty() ? "(none: no plugins loaded)" : s;
}

}  // namespace

const ModelFactory& Registry::model(const std::string& name, const ConfigNode& where) const {
  auto it = models_.find(name);
  if (it == models_.end()) {
    where.fail("type", "model \"" + name + "\" is not one of " + names_of(models_));
  }
  return it->second.factory;
}

const DatasetFactory& Registry::dataset(const std::string& name, const ConfigNode& where) const {
  auto it = datasets_.find(name);
  if (it == datasets_.end()) {
    where.fail("type", "dataset \"" + name + "\" is not one of " + names_of(datasets_));
  }
  return it->second.factory;
}

std::vector<std::string> Registry::model_names() const {
  std::vector<std::string> v;
  for (const auto& [k, e] : models_) v.push_back(k);
  return v;
}

std::vector<std::string> Registry::dataset_names() const {
  std::vector<std::string> v;
  for (const auto& [k, e] : datasets_) v.push_back(k);
  return v;
}

void Registry::load_plugin(const std::string& path) {
  auto h = std::make_unique<Handle>();
  h->lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h->lib == nullptr) {
    const char* err = dlerror();
    throw RuntimeError("plugin " + path + ": cannot load: " + (err ? err : "unknown error"));
  }
  auto entry = reinterpret_cast<baton_plugin_entry_fn>(dlsym(h->lib, BATON_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    throw RuntimeError("plugin " + path +
                       ": no " BATON_PLUGIN_ENTRY_SYMBOL " entry point (not a Baton plugin)");
  }
  const baton_plugin_info* info = entry();
  if (info == nullptr) throw RuntimeError("plugin " + path + ": the entry point returned null");
  if (info->abi_version != BATON_PLUGIN_ABI_VERSION) {
    throw RuntimeError("plugin " + path + ": built for plugin ABI version " +
                       std::to_string(info->abi_version) + ", this engine needs version " +
                       std::to_string(BATON_PLUGIN_ABI_VERSION) + "; rebuild the plugin");
  }
  const size_t required =
      offsetof(baton_plugin_info, register_components) + sizeof(info->register_components);
  if (info->struct_size < required || info->register_components == nullptr) {
    throw RuntimeError("plugin " + path + ": its info struct is too small (" +
                       std::to_string(info->struct_size) + " bytes) or lacks register_components");
  }
  // Keep the library loaded from here on, even if registration fails
  // halfway: factories it already added point into it.
  h->info = info;
  handles_.push_back(std::move(h));
  char err[512] = {0};
  if (info->register_components(this, err, sizeof(err)) != 0) {
    throw RuntimeError("plugin " + path + ": registration failed: " + err);
  }
  plugins_.push_back({info->name ? info->name : "", info->version ? info->version : "",
                      info->description ? info->description : "", path});
}

int Registry::load_plugin_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw RuntimeError("plugin directory " + dir + " does not exist");
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".so") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) load_plugin(p);
  return static_cast<int>(paths.size());
}

std::string default_plugin_dir(const std::string& exe_path) {
  namespace fs = std::filesystem;
  return (fs::path(exe_path).parent_path() / ".." / "lib" / "baton" / "plugins")
      .lexically_normal()
      .string();
}

}  // namespace baton
