// MPI transports' eager limits through MPI_T (see mpi_eager_limit.h).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // OpenMPI's deprecated C++ bindings: not used, not linked
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include "mpi_eager_limit.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace baton {
namespace {

// MPI_T_init_thread / MPI_T_finalize around the reads (reference counted
// by MPI: other tool users are not disturbed). Asked for the thread level
// MPI already runs at: OpenMPI 4.1's MPI_T_init_thread sets the library's
// level to the one asked for, so a lower one would take MPI_THREAD_MULTIPLE
// (and its locks) away from the running job (test_comm_mpi saw it drop to
// MPI_THREAD_SINGLE).
class ToolSession {
 public:
  ToolSession() {
    int level = MPI_THREAD_SINGLE, provided = 0;
    ok_ = MPI_Query_thread(&level) == MPI_SUCCESS &&
          MPI_T_init_thread(level, &provided) == MPI_SUCCESS;
  }
  ~ToolSession() {
    if (ok_) MPI_T_finalize();
  }
  ToolSession(const ToolSession&) = delete;
  ToolSession& operator=(const ToolSession&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// One integer control variable bound to no object; nullopt when the
// library has no such variable or it is of another kind.
std::optional<int64_t> read_cvar(const char* name) {
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return std::nullopt;
  char found[256];
  char desc[16];
  int found_len = sizeof found, desc_len = sizeof desc;
  int verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  if (MPI_T_cvar_get_info(index, found, &found_len, &verbosity, &type, &enumtype, desc, &desc_len,
                          &bind, &scope) != MPI_SUCCESS ||
      bind != MPI_T_BIND_NO_OBJECT) {
    return std::nullopt;
  }
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return std::nullopt;
  std::optional<int64_t> value;
  if (count == 1) {
    alignas(16) unsigned char raw[16] = {};
    if (MPI_T_cvar_read(handle, raw) == MPI_SUCCESS) {
      const auto as = [&](auto zero) {
        decltype(zero) v = zero;
        std::memcpy(&v, raw, sizeof v);
        return static_cast<int64_t>(v);
      };
      if (type == MPI_INT)
        value = as(int{0});
      else if (type == MPI_UNSIGNED)
        value = as(0u);
      else if (type == MPI_LONG)
        value = as(0L);
      else if (type == MPI_UNSIGNED_LONG)
        value = as(0UL);
      else if (type == MPI_LONG_LONG)
        value = as(0LL);
      else if (type == MPI_UNSIGNED_LONG_LONG)
        value = as(0ULL);
      else if (type == MPI_COUNT)
        value = as(MPI_Count{0});
    }
  }
  MPI_T_cvar_handle_free(&handle);
  return value;
}

// The largest of the named variables the library has (nullopt: none),
// each one found appended to `source` as "name value".
std::optional<int64_t> largest(const std::vector<const char*>& names, std::string& source) {
  std::optional<int64_t> best;
  for (const char* name : names) {
    const auto v = read_cvar(name);
    if (!v || *v <= 0) continue;
    source += (source.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(*v);
    best = std::max(best.value_or(0), *v);
  }
  return best;
}

}  // namespace

MpiEagerLimits read_mpi_eager_limits() {
  MpiEagerLimits out;
  std::string same, other;
  std::optional<int64_t> s, o;
  const ToolSession tool;
  if (tool.ok()) {
    s = largest({"btl_vader_eager_limit", "btl_vader_rndv_eager_limit", "btl_sm_eager_limit",
                 "btl_sm_rndv_eager_limit", "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE"},
                same);
    o = largest({"btl_tcp_eager_limit", "btl_tcp_rndv_eager_limit", "btl_openib_eager_limit",
                 "btl_openib_rndv_eager_limit", "btl_ofi_eager_limit", "btl_ofi_rndv_eager_limit",
                 "btl_uct_eager_limit", "btl_uct_rndv_eager_limit", "btl_usnic_eager_limit",
                 "btl_usnic_rndv_eager_limit", "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE"},
                other);
  }
  const std::string fallback =
      "the fixed " + std::to_string(kFallbackEagerBytes) + " bytes (" +
      (tool.ok() ? "MPI_T has no eager limit for it" : "MPI_T did not start") + ")";
  out.same_host = s.value_or(kFallbackEagerBytes);
  out.other_host = o.value_or(kFallbackEagerBytes);
  out.source = "same host: " + (s ? "MPI_T " + same : fallback) +
               "; other hosts: " + (o ? "MPI_T " + other : fallback);
  return out;
}

}  // namespace baton
