// The hot loops (kernels_rows_loops.inc, kernels_elementwise_loops.inc)
// are compiled three times over, for AVX-512, AVX2 with FMA and generic
// x86-64, each copy in a namespace of its own (isa_avx512, isa_avx2,
// isa_generic); each entry point calls the copy for cpu_level(). So one
// binary runs everywhere at full width, and a test can hold the loops to
// a lower ISA than the CPU has (BATON_MAX_CPU_ISA, as oneDNN's
// ONEDNN_MAX_CPU_ISA holds its kernels) to check that every golden and
// equivalence tolerance holds on each.
#pragma once

namespace baton::cpu {

// Zero is not a level.
enum class CpuLevel { kGeneric = 1, kAvx2, kAvx512 };

// The best level this CPU runs (AVX-512 F/BW/DQ/VL; AVX2 with FMA;
// generic), capped by the environment's BATON_MAX_CPU_ISA (generic, avx2
// or avx512; unset or empty: no cap). Read once, on the first call.
// InputError naming the variable for any other value.
CpuLevel cpu_level();
const char* cpu_level_name(CpuLevel level);  // "generic", "avx2", "avx512"

}  // namespace baton::cpu

// A loop's copy for the level in use: `BATON_ISA_CALL(f)(args...)`.
#if defined(__x86_64__)
#define BATON_ISA_CALL(f)                                                       \
  (::baton::cpu::cpu_level() == ::baton::cpu::CpuLevel::kAvx512 ? isa_avx512::f \
   : ::baton::cpu::cpu_level() == ::baton::cpu::CpuLevel::kAvx2 ? isa_avx2::f   \
                                                                : isa_generic::f)
#else
#define BATON_ISA_CALL(f) isa_generic::f
#endif

// What the copies are compiled for (GCC's and clang's spellings; _Pragma
// takes one whole string literal, so these lines are not reformatted).
// clang-format off
#if defined(__clang__)
#define BATON_TARGET_AVX2_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define BATON_TARGET_AVX512_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma\"))), apply_to = function)")
#define BATON_TARGET_END _Pragma("clang attribute pop")
#else
#define BATON_TARGET_AVX2_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define BATON_TARGET_AVX512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma\")")
#define BATON_TARGET_END _Pragma("GCC pop_options")
#endif
// clang-format on
