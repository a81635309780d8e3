#include <baton/core/error.h>

#include <cstdlib>
#include <string>

#include "multiversion.h"

namespace baton::cpu {

namespace {

CpuLevel detect() {
  CpuLevel best = CpuLevel::kGeneric;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuLevel::kAvx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    best = CpuLevel::kAvx512;
  }
#endif
  const char* cap = std::getenv("BATON_MAX_CPU_ISA");
  if (cap == nullptr || *cap == '\0') return best;
  const std::string c = cap;
  CpuLevel most;
  if (c == "generic") {
    most = CpuLevel::kGeneric;
  } else if (c == "avx2") {
    most = CpuLevel::kAvx2;
  } else if (c == "avx512") {
    most = CpuLevel::kAvx512;
  } else {
    throw InputError("BATON_MAX_CPU_ISA: \"" + c + "\" is not one of generic, avx2, avx512");
  }
  return most < best ? most : best;
}

}  // namespace

CpuLevel cpu_level() {
  // A fact of this process (its CPU and environment), not state: computed
  // once, read by every thread after.
  static const CpuLevel level = detect();
  return level;
}

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::kAvx512:
      return "avx512";
    case CpuLevel::kAvx2:
      return "avx2";
    case CpuLevel::kGeneric:
      break;
  }
  return "generic";
}

}  // namespace baton::cpu
