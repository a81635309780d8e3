// Runs a grid: each block's threads are fibers on the calling OS thread,
// one block after another. A fiber is made and first entered with ucontext;
// after that it and the scheduler switch with _setjmp/_longjmp, which keep
// the signal mask as it is (swapcontext's two system calls a switch were
// most of an emulated kernel's time); under TSan, whose longjmp tracking
// assumes one stack a thread, and in a fortified build, whose longjmp
// check takes a jump to another stack for one into a dead frame, every
// switch is swapcontext. A fiber runs until it reaches a
// barrier or a warp intrinsic and then hands back to the scheduler loop
// below, which resumes it when what it waits for has happened, and reports
// what can never happen: a barrier that part of the block does not reach,
// threads waiting at different barriers, lanes named in a warp mask that
// have exited or name another mask, and any state where no thread can move.
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "simt_device.h"
#include "simt_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define BATON_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BATON_SIMT_ASAN 1
#endif
#endif
#ifdef BATON_SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__) || (defined(__USE_FORTIFY_LEVEL) && __USE_FORTIFY_LEVEL > 0)
#define BATON_SIMT_UCONTEXT_SWITCH 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BATON_SIMT_UCONTEXT_SWITCH 1
#endif
#endif

namespace baton::simt {
namespace {

#ifdef BATON_SIMT_ASAN
constexpr size_t kStackBytes = 512 * 1024;
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif

enum class State { kReady, kBarrier, kWarp, kDone, kAbandoned };

struct Fiber {
  ucontext_t ctx{};  // its start
  jmp_buf jump{};    // where it yielded
  bool entered = false;
  char* stack = nullptr;  // usable bottom (a guard page lies below)
  uint3 tid{};
  unsigned linear = 0;
  State state = State::kReady;
  const char* bar_file = nullptr;
  int bar_line = 0;
  void* fake_stack = nullptr;
};

// One meeting of a warp intrinsic: the lanes of `mask` that have arrived
// (with their values) and those that have read the result. A lane joins
// the open meeting of its mask that it is not yet in; the meeting is
// complete when every lane of the mask has arrived, and goes when every
// lane has read. Lanes meet by mask, not by how many intrinsics each has
// entered before, so divergent code (a half-warp's shuffle, then the
// whole warp's) meets as a GPU's does.
struct WarpMeeting {
  unsigned mask = 0;
  unsigned arrived = 0;
  unsigned read = 0;
  uint64_t value[32] = {};
};
struct WarpSlots {
  std::list<WarpMeeting> meetings;
};

// The block being run on this OS thread.
struct BlockRun {
  const std::function<void()>* body = nullptr;
  dim3 grid, block;
  uint3 bid{};
  void* smem = nullptr;
  std::vector<Fiber> fibers;
  std::vector<WarpSlots> warps;
  ucontext_t scheduler{};
  jmp_buf scheduler_jump{};
  Fiber* current = nullptr;
  bool progress = false;
  std::string error;  // the first diagnostic
  const void* sched_stack_bottom = nullptr;
  size_t sched_stack_size = 0;
};

thread_local BlockRun* t_run = nullptr;

// Fiber stacks, reused across blocks and launches on this OS thread.
struct StackPool {
  std::vector<char*> stacks;
  ~StackPool() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (char* s : stacks) munmap(s - page, kStackBytes + page);
  }
  char* get(size_t i) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    while (stacks.size() <= i) {
      void* m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) return nullptr;
      mprotect(m, page, PROT_NONE);  // a stack overflow faults
      stacks.push_back(static_cast<char*>(m) + page);
    }
    return stacks[i];
  }
};
thread_local StackPool t_stacks;

// Dynamic shared memory: the block's bytes end at a guard page, so a read
// or write past them faults. Filled with 0xff (NaN floats) before each
// block: a GPU's shared memory starts with whatever was there.
struct SharedArena {
  char* map = nullptr;
  size_t map_bytes = 0;
  ~SharedArena() {
    if (map) munmap(map, map_bytes);
  }
  void* get(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t need = (bytes + page - 1) / page * page + page;
    if (need > map_bytes) {
      if (map) munmap(map, map_bytes);
      void* m = mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        map = nullptr;
        map_bytes = 0;
        return nullptr;
      }
      map = static_cast<char*>(m);
      map_bytes = need;
      mprotect(map + need - page, page, PROT_NONE);
    }
    char* p = map + map_bytes - page - ((bytes + 15) / 16 * 16);
    std::memset(p, 0xff, (bytes + 15) / 16 * 16);
    return p;
  }
};
thread_local SharedArena t_shared;

void fail(BlockRun& run, const std::string& what) {
  if (run.error.empty()) {
    run.error = what + " (block (" + std::to_string(run.bid.x) + "," + std::to_string(run.bid.y) +
                "," + std::to_string(run.bid.z) + "))";
  }
}

std::string where(const char* file, int line) {
  std::string f = file ? file : "?";
  const size_t slash = f.rfind('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return f + ":" + std::to_string(line);
}

// Fiber -> scheduler.
void yield(BlockRun& run, Fiber& f) {
#ifdef BATON_SIMT_ASAN
  __sanitizer_start_switch_fiber(f.state == State::kDone ? nullptr : &f.fake_stack,
                                 run.sched_stack_bottom, run.sched_stack_size);
#endif
#ifdef BATON_SIMT_UCONTEXT_SWITCH
  swapcontext(&f.ctx, &run.scheduler);
#else
  if (_setjmp(f.jump) == 0) _longjmp(run.scheduler_jump, 1);
#endif
#ifdef BATON_SIMT_ASAN
  __sanitizer_finish_switch_fiber(f.fake_stack, &run.sched_stack_bottom, &run.sched_stack_size);
#endif
}

// Scheduler -> fiber.
void resume(BlockRun& run, Fiber& f) {
  run.current = &f;
  void* fake = nullptr;
#ifdef BATON_SIMT_ASAN
  __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
#ifdef BATON_SIMT_UCONTEXT_SWITCH
  swapcontext(&run.scheduler, &f.ctx);
#else
  if (_setjmp(run.scheduler_jump) == 0) {
    if (!f.entered) {
      f.entered = true;
      setcontext(&f.ctx);  // does not return: the fiber comes back by _longjmp
    }
    _longjmp(f.jump, 1);
  }
#endif
#ifdef BATON_SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  (void)fake;
  run.current = nullptr;
}

void fiber_main() {
  BlockRun& run = *t_run;
  Fiber& f = *run.current;
#ifdef BATON_SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &run.sched_stack_bottom, &run.sched_stack_size);
#endif
  (*run.body)();
  f.state = State::kDone;
  run.progress = true;
  yield(run, f);  // never resumed
}

// A fiber stops for good after a diagnostic: its block is abandoned.
[[noreturn]] void abandon(BlockRun& run, Fiber& f) {
  f.state = State::kAbandoned;
  run.progress = true;
  yield(run, f);
  __builtin_unreachable();
}

Fiber& me() { return *t_run->current; }

// Every thread waits at a barrier, or has finished: release it or report.
bool settle_barrier(BlockRun& run) {
  size_t waiting = 0, done = 0;
  std::map<std::string, size_t> sites;
  for (const Fiber& f : run.fibers) {
    if (f.state == State::kBarrier) {
      ++waiting;
      ++sites[where(f.bar_file, f.bar_line)];
    } else if (f.state == State::kDone) {
      ++done;
    } else {
      return false;  // someone can still move
    }
  }
  if (waiting == 0) return false;
  if (done > 0) {
    fail(run, "__syncthreads() at " + sites.begin()->first + " reached by " +
                  std::to_string(waiting) + " of " + std::to_string(run.fibers.size()) +
                  " threads; " + std::to_string(done) +
                  " had exited before it (a barrier in divergent code)");
    return false;
  }
  if (sites.size() > 1) {
    std::string list;
    for (const auto& [site, n] : sites) list += " " + site + " (" + std::to_string(n) + " threads)";
    fail(run, "threads of one block wait at different __syncthreads() calls:" + list);
    return false;
  }
  for (Fiber& f : run.fibers) f.state = State::kReady;
  return true;
}

std::string describe_stuck(const BlockRun& run) {
  size_t barrier = 0, warp = 0;
  for (const Fiber& f : run.fibers) {
    barrier += f.state == State::kBarrier;
    warp += f.state == State::kWarp;
  }
  std::string masks;
  for (const WarpSlots& w : run.warps)
    for (const WarpMeeting& m : w.meetings)
      if (m.arrived != m.mask) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " 0x%08x (arrived 0x%08x)", m.mask, m.arrived);
        masks += buf;
      }
  return "no thread of the block can move: " + std::to_string(barrier) + " wait at a barrier and " +
         std::to_string(warp) + " at a warp intrinsic whose lanes never arrive" +
         (masks.empty() ? std::string() : "; open warp meetings by mask:" + masks);
}

cudaError_t run_block(BlockRun& run) {
  const size_t n = run.fibers.size();
  for (size_t i = 0; i < n; ++i) {
    Fiber& f = run.fibers[i];
    f.stack = t_stacks.get(i);
    if (!f.stack) {
      run.error = "cannot map a fiber stack";
      return cudaErrorMemoryAllocation;
    }
    f.state = State::kReady;
    f.entered = false;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
  }
  for (WarpSlots& w : run.warps) w.meetings.clear();
  for (;;) {
    run.progress = false;
    bool alive = false;
    for (Fiber& f : run.fibers) {
      if (f.state == State::kReady || f.state == State::kWarp) resume(run, f);
      if (!run.error.empty()) return cudaErrorLaunchFailure;
      alive = alive || (f.state != State::kDone);
    }
    if (!alive) return cudaSuccess;
    if (settle_barrier(run)) continue;
    if (!run.error.empty()) return cudaErrorLaunchFailure;
    if (!run.progress) {
      fail(run, describe_stuck(run));
      return cudaErrorLaunchFailure;
    }
  }
}

}  // namespace

cudaError_t run_grid(const std::function<void()>& body, dim3 grid, dim3 block, size_t dynamic_smem,
                     const char* kernel_name, std::string* error) {
  BlockRun run;
  run.body = &body;
  run.grid = grid;
  run.block = block;
  const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
  run.fibers.resize(threads);
  run.warps.resize((threads + 31) / 32);
  for (unsigned z = 0, i = 0; z < block.z; ++z)
    for (unsigned y = 0; y < block.y; ++y)
      for (unsigned x = 0; x < block.x; ++x, ++i) {
        run.fibers[i].tid = uint3{x, y, z};
        run.fibers[i].linear = i;
      }
  BlockRun* outer = t_run;
  t_run = &run;
  cudaError_t st = cudaSuccess;
  for (unsigned bz = 0; bz < grid.z && st == cudaSuccess; ++bz)
    for (unsigned by = 0; by < grid.y && st == cudaSuccess; ++by)
      for (unsigned bx = 0; bx < grid.x && st == cudaSuccess; ++bx) {
        run.bid = uint3{bx, by, bz};
        run.smem = t_shared.get(dynamic_smem);
        if (dynamic_smem && !run.smem) {
          st = cudaErrorMemoryAllocation;
          break;
        }
        st = run_block(run);
      }
  t_run = outer;
  if (st != cudaSuccess && error) *error = std::string(kernel_name) + ": " + run.error;
  return st;
}

// ---- the device side (simt_device.h)

const uint3& thread_index() { return me().tid; }
const uint3& block_index() { return t_run->bid; }
const dim3& block_dim() { return t_run->block; }
const dim3& grid_dim() { return t_run->grid; }
void* dynamic_shared() { return t_run->smem; }
unsigned lane_id() { return me().linear % 32; }

void syncthreads(const char* file, int line) {
  BlockRun& run = *t_run;
  Fiber& f = me();
  f.state = State::kBarrier;
  f.bar_file = file;
  f.bar_line = line;
  run.progress = true;
  yield(run, f);
  if (!run.error.empty()) abandon(run, f);
}

void report(const char* what) {
  BlockRun& run = *t_run;
  Fiber& f = me();
  fail(run, std::string(what) + " (thread " + std::to_string(f.linear) + ")");
  abandon(run, f);
}

void warp_exchange(unsigned mask, uint64_t mine, uint64_t all[32], const char* what) {
  BlockRun& run = *t_run;
  Fiber& f = me();
  const unsigned lane = f.linear % 32;
  const unsigned warp = f.linear / 32;
  const unsigned bit = 1u << lane;
  if (!(mask & bit)) {
    fail(run, std::string(what) + ": the mask does not name the calling lane " +
                  std::to_string(lane) + " (thread " + std::to_string(f.linear) + ")");
    abandon(run, f);
  }
  std::list<WarpMeeting>& meetings = run.warps[warp].meetings;
  auto m = meetings.begin();
  while (m != meetings.end() && !(m->mask == mask && m->arrived != mask && !(m->arrived & bit)))
    ++m;
  if (m == meetings.end()) m = meetings.insert(meetings.end(), WarpMeeting{mask, 0, 0, {}});
  m->value[lane] = mine;
  m->arrived |= bit;
  run.progress = true;
  while (m->arrived != mask) {
    // A lane of the mask that has exited (or does not exist) never comes.
    for (unsigned l = 0; l < 32; ++l) {
      if (!(mask >> l & 1u) || (m->arrived >> l & 1u)) continue;
      const size_t idx = warp * 32 + l;
      if (idx >= run.fibers.size() || run.fibers[idx].state == State::kDone) {
        fail(run, std::string(what) + ": lane " + std::to_string(l) +
                      " named in the mask has exited or does not exist (thread " +
                      std::to_string(f.linear) + ")");
        abandon(run, f);
      }
    }
    f.state = State::kWarp;
    yield(run, f);
    if (!run.error.empty()) abandon(run, f);
  }
  f.state = State::kReady;
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1u) all[l] = m->value[l];
  m->read |= bit;
  if (m->read == mask) meetings.erase(m);
}

void syncwarp(const char* file, int line, unsigned mask) {
  uint64_t all[32];
  const std::string what = "__syncwarp at " + where(file, line);
  warp_exchange(mask, 0, all, what.c_str());
}

}  // namespace baton::simt
