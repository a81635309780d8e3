// Built into `baton` only under BATON_SANITIZE. Its ranks run OpenMPI,
// which leaves allocations behind at MPI_Finalize; LeakSanitizer reports
// them and the rank's exit code says it failed. These are OpenMPI's, not
// Baton's: they are suppressed by the libraries they come from. Telling
// them apart needs the whole stack of each allocation, and Debian's
// libraries have no frame pointers for ASan's fast unwinder, so `baton`
// unwinds fully on malloc (its steady-state step allocates nothing).
// Both can still be overridden through ASAN_OPTIONS and LSAN_OPTIONS.
extern "C" {

const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

const char* __lsan_default_options() { return "print_suppressions=0"; }

const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libhwloc.so\n"
         "leak:libevent\n"
         "leak:/openmpi/\n"
         "leak:/pmix/\n";
}

}  // extern "C"
