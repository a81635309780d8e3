#include <cstdlib>

#include "loaded_table.h"
#include "nccl_loader.h"

namespace baton_cuda {
namespace {

#if defined(__CUDACC__)
#define BATON_NCCL_BIND(fn) bind_symbol(lib, "nccl" #fn, f.fn, missing)
#else
#define BATON_NCCL_BIND(fn) f.fn = &nccl##fn
#endif

void load(LoadedTable<NcclFns>& l) {
  NcclFns& f = l.fns;
#if defined(__CUDACC__)
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
#endif
  BATON_NCCL_BIND(GetVersion);
  BATON_NCCL_BIND(GetErrorString);
  BATON_NCCL_BIND(GetLastError);
  BATON_NCCL_BIND(GetUniqueId);
  BATON_NCCL_BIND(CommInitRankConfig);
  BATON_NCCL_BIND(CommInitAll);
  BATON_NCCL_BIND(CommDestroy);
  BATON_NCCL_BIND(CommAbort);
  BATON_NCCL_BIND(CommCount);
  BATON_NCCL_BIND(CommUserRank);
  BATON_NCCL_BIND(CommGetAsyncError);
  BATON_NCCL_BIND(AllReduce);
  BATON_NCCL_BIND(ReduceScatter);
  BATON_NCCL_BIND(AllGather);
  BATON_NCCL_BIND(Broadcast);
  BATON_NCCL_BIND(Send);
  BATON_NCCL_BIND(Recv);
  BATON_NCCL_BIND(GroupStart);
  BATON_NCCL_BIND(GroupEnd);
#if defined(__CUDACC__)
  if (!missing.empty()) {
    l.why = path + " has no " + missing + " (an NCCL older than 2.14?)";
    return;
  }
#endif
  l.ok = true;
}
#undef BATON_NCCL_BIND

}  // namespace

const NcclFns* load_nccl(std::string* why) { return load_once<NcclFns>(load, why); }

}  // namespace baton_cuda
