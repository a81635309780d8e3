#include <cstdlib>

#include "loaded_table.h"
#include "nccl_loader.h"

namespace baton_cuda {
namespace {

void load(LoadedTable<NcclFns>& l) {
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
  bind_symbol(lib, "ncclGetVersion", f.GetVersion, missing);
  bind_symbol(lib, "ncclGetErrorString", f.GetErrorString, missing);
  bind_symbol(lib, "ncclGetLastError", f.GetLastError, missing);
  bind_symbol(lib, "ncclGetUniqueId", f.GetUniqueId, missing);
  bind_symbol(lib, "ncclCommInitRank", f.CommInitRank, missing);
  bind_symbol(lib, "ncclCommInitAll", f.CommInitAll, missing);
  bind_symbol(lib, "ncclCommDestroy", f.CommDestroy, missing);
  bind_symbol(lib, "ncclCommAbort", f.CommAbort, missing);
  bind_symbol(lib, "ncclCommCount", f.CommCount, missing);
  bind_symbol(lib, "ncclCommUserRank", f.CommUserRank, missing);
  bind_symbol(lib, "ncclCommGetAsyncError", f.CommGetAsyncError, missing);
  bind_symbol(lib, "ncclAllReduce", f.AllReduce, missing);
  bind_symbol(lib, "ncclReduceScatter", f.ReduceScatter, missing);
  bind_symbol(lib, "ncclAllGather", f.AllGather, missing);
  bind_symbol(lib, "ncclBroadcast", f.Broadcast, missing);
  bind_symbol(lib, "ncclSend", f.Send, missing);
  bind_symbol(lib, "ncclRecv", f.Recv, missing);
  bind_symbol(lib, "ncclGroupStart", f.GroupStart, missing);
  bind_symbol(lib, "ncclGroupEnd", f.GroupEnd, missing);
  if (!missing.empty()) {
    l.why = path + " has no " + missing + " (an NCCL older than 2.13?)";
    return;
  }
  l.ok = true;
}

}  // namespace

const NcclFns* load_nccl(std::string* why) { return load_once<NcclFns>(load, why); }

}  // namespace baton_cuda
