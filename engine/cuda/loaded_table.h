// A table of a library's functions, filled once per process (nccl_loader.cu,
// cudnn_loader.cu): loading is global by nature (the dynamic loader keeps
// the library), so the table that points into it is too.
#pragma once

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace baton_cuda {

template <class Fns>
struct LoadedTable {
  Fns fns{};
  bool ok = false;
  std::string why;  // when not ok: the path tried and dlerror's text, or the missing symbol
};

// fn = the library's `name`; the first missing name goes to `missing`.
template <class F>
void bind_symbol(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr && missing.empty()) missing = name;
}

// The table `load` fills, loaded on the first call, or null with *why set.
// Thread-safe.
template <class Fns>
const Fns* load_once(void (*load)(LoadedTable<Fns>&), std::string* why) {
  static LoadedTable<Fns> loaded;
  static std::once_flag once;
  std::call_once(once, [load] { load(loaded); });
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.fns;
}

}  // namespace baton_cuda
