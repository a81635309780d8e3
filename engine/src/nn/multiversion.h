// BATON_CLONES: compile a hot loop for AVX-512, AVX2 and a generic x86-64
// target; the loader picks the best clone for the CPU, so one binary runs
// everywhere at full width. (Sanitizer builds use a single version: ifunc
// resolvers and ASan do not mix well.) Only free functions: OpenMP regions
// stay outside cloned functions (their outlined bodies are not cloned).
#pragma once

#if defined(__x86_64__) && !defined(BATON_NO_MULTIVERSION) && !defined(__SANITIZE_ADDRESS__)
#define BATON_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BATON_CLONES
#endif
