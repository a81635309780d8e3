#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "nccl_loader.h"

namespace baton_cuda {
namespace {

// The process's one copy of a dlopen'ed library: loading is global by
// nature (the loader keeps it), so the table that points into it is too.
struct Loaded {
  NcclFns fns{};
  bool ok = false;
  std::string why;
};

template <class F>
bool bind(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr && missing.empty()) missing = name;
  return fn != nullptr;
}

void load(Loaded& l) {
  const char* env = std::getenv("BATON_NCCL_LIBRARY");
  const std::string path = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = "cannot load " + path + ": " + (e != nullptr ? e : "unknown error") +
            (env != nullptr ? " (from BATON_NCCL_LIBRARY)" : "");
    return;
  }
  std::string missing;
  NcclFns& f = l.fns;
  bind(lib, "ncclGetVersion", f.GetVersion, missing);
  bind(lib, "ncclGetErrorString", f.GetErrorString, missing);
  bind(lib, "ncclGetLastError", f.GetLastError, missing);
  bind(lib, "ncclGetUniqueId", f.GetUniqueId, missing);
  bind(lib, "ncclCommInitRank", f.CommInitRank, missing);
  bind(lib, "ncclCommInitAll", f.CommInitAll, missing);
  bind(lib, "ncclCommDestroy", f.CommDestroy, missing);
  bind(lib, "ncclCommAbort", f.CommAbort, missing);
  bind(lib, "ncclCommCount", f.CommCount, missing);
  bind(lib, "ncclCommUserRank", f.CommUserRank, missing);
  bind(lib, "ncclCommGetAsyncError", f.CommGetAsyncError, missing);
  bind(lib, "ncclAllReduce", f.AllReduce, missing);
  bind(lib, "ncclReduceScatter", f.ReduceScatter, missing);
  bind(lib, "ncclAllGather", f.AllGather, missing);
  bind(lib, "ncclBroadcast", f.Broadcast, missing);
  bind(lib, "ncclSend", f.Send, missing);
  bind(lib, "ncclRecv", f.Recv, missing);
  bind(lib, "ncclGroupStart", f.GroupStart, missing);
  bind(lib, "ncclGroupEnd", f.GroupEnd, missing);
  if (!missing.empty()) {
    l.why = path + " has no " + missing + " (an NCCL older than 2.13?)";
    return;
  }
  l.ok = true;
}

}  // namespace

const NcclFns* load_nccl(std::string* why) {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] { load(loaded); });
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.fns;
}

}  // namespace baton_cuda
