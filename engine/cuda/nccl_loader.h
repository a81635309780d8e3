// libnccl.so.2, loaded on first use with dlopen rather than linked: a
// machine without NCCL still loads baton_cuda.so and discovers its GPUs;
// only the NCCL communicator is then unavailable, with the loader's reason.
// Searched: $BATON_NCCL_LIBRARY when set, then libnccl.so.2 on the loader's
// path (this library's RUNPATH includes the NCCL it was built against).
// In the emulation build (baton_cuda_emu.so) the table holds the emulator's
// NCCL stand-in (simt/nccl_reference.cpp), which implements the same
// functions with nccl.h's signatures over the emulated devices.
#pragma once

#include <nccl.h>

#include <string>

namespace baton_cuda {

// The functions Baton calls, typed from nccl.h itself.
struct NcclFns {
  decltype(&ncclGetVersion) GetVersion;
  decltype(&ncclGetErrorString) GetErrorString;
  decltype(&ncclGetLastError) GetLastError;
  decltype(&ncclGetUniqueId) GetUniqueId;
  decltype(&ncclCommInitRankConfig) CommInitRankConfig;
  decltype(&ncclCommInitAll) CommInitAll;
  decltype(&ncclCommDestroy) CommDestroy;
  decltype(&ncclCommAbort) CommAbort;
  decltype(&ncclCommCount) CommCount;
  decltype(&ncclCommUserRank) CommUserRank;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&ncclAllReduce) AllReduce;
  decltype(&ncclReduceScatter) ReduceScatter;
  decltype(&ncclAllGather) AllGather;
  decltype(&ncclBroadcast) Broadcast;
  decltype(&ncclSend) Send;
  decltype(&ncclRecv) Recv;
  decltype(&ncclGroupStart) GroupStart;
  decltype(&ncclGroupEnd) GroupEnd;
};

// The functions, or null with *why set (the paths tried, dlerror's text,
// or the missing symbol). Loaded once per process; thread-safe.
const NcclFns* load_nccl(std::string* why);

}  // namespace baton_cuda
