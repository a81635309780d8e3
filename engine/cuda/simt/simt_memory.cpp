// Emulated device memory. Each allocation is its own mapping: the bytes end
// (rounded up to the 256-byte alignment cudaMalloc gives) right at a guard
// page, so a kernel running past its buffer faults. Outside a DeviceWindow
// the host reading or writing a device pointer faults as it would on a GPU
// (where the pointer is not even a host address). Two ways, the first the
// CPU allows:
//  - a memory protection key (x86's PKU) on every allocation: a window
//    opens the key for its own thread alone (a register write, no system
//    call), so another thread touching device memory while a stream works
//    still faults;
//  - else every allocation is PROT_NONE outside windows, and the first
//    window (of any thread) opens them all with mprotect, the last closes
//    them. BATON_SIMT_PROTECT=mprotect takes this way where keys exist.
// New memory holds 0xff bytes (NaN floats; up to 4 MiB): a GPU's fresh
// memory holds whatever was there.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>

#include "simt_internal.h"

namespace baton::simt {
namespace {

struct Allocation {
  char* map = nullptr;
  size_t map_bytes = 0;
  size_t bytes = 0;  // asked for
  size_t span = 0;   // rounded to 256, ends at the guard page
  int device = 0;
};

// The protection key of device memory, or -1 (mprotect windows).
int choose_key() {
  const char* env = std::getenv("BATON_SIMT_PROTECT");
  if (env != nullptr && std::string_view(env) == "mprotect") return -1;
  return pkey_alloc(0, PKEY_DISABLE_ACCESS);  // -1 where the CPU or kernel has none
}

struct Memory {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;  // by user address
  std::map<uintptr_t, size_t> pinned;    // by address: bytes
  int open = 0;                          // mprotect windows open, all threads
  const int key = choose_key();
};

// Key windows open on this thread.
thread_local int t_open = 0;

Memory& memory() {
  static Memory m;
  return m;
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

void protect(const Allocation& a, int prot) {
  const size_t page = page_size();
  mprotect(a.map, a.map_bytes - page, prot);
}

}  // namespace

void* device_alloc(size_t bytes, int device) {
  const size_t page = page_size();
  const size_t span = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const size_t data_pages = (span + page - 1) / page * page;
  const size_t map_bytes = data_pages + page;
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  Allocation a;
  a.map = static_cast<char*>(m);
  a.map_bytes = map_bytes;
  a.bytes = bytes;
  a.span = span;
  a.device = device;
  char* user = a.map + data_pages - span;
  // Fresh memory reads as NaN. Past 4 MiB (a library's workspace, which
  // the stand-ins never read) the pages are left untouched: populated,
  // they would make every window's mprotect walk them.
  if (span <= (size_t{4} << 20)) std::memset(user, 0xff, span);
  mprotect(a.map + data_pages, page, PROT_NONE);
  Memory& mem = memory();
  if (mem.key >= 0 && pkey_mprotect(a.map, data_pages, PROT_READ | PROT_WRITE, mem.key) != 0) {
    munmap(m, map_bytes);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mem.mu);
  if (mem.key < 0 && mem.open == 0) protect(a, PROT_NONE);
  mem.live[reinterpret_cast<uintptr_t>(user)] = a;
  return user;
}

bool device_free(void* p) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  auto it = mem.live.find(reinterpret_cast<uintptr_t>(p));
  if (it == mem.live.end()) return false;
  munmap(it->second.map, it->second.map_bytes);
  mem.live.erase(it);
  return true;
}

namespace {
// The allocation holding address p (lock held), or null.
const Allocation* find(Memory& mem, uintptr_t p) {
  auto it = mem.live.upper_bound(p);
  if (it == mem.live.begin()) return nullptr;
  --it;
  if (p >= it->first + it->second.span) return nullptr;
  return &it->second;
}
}  // namespace

bool is_device_pointer(const void* p) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  return find(mem, reinterpret_cast<uintptr_t>(p)) != nullptr;
}

bool is_device_range(const void* p, size_t bytes) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = mem.live.upper_bound(a);
  if (it == mem.live.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second.bytes;
}

int device_of_range(const void* p, size_t bytes) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = mem.live.upper_bound(a);
  if (it == mem.live.begin()) return -1;
  --it;
  if (a < it->first || a + bytes > it->first + it->second.bytes) return -1;
  return it->second.device;
}

size_t device_bytes_in_use(int device) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  size_t total = 0;
  for (const auto& [addr, a] : mem.live)
    if (a.device == device) total += a.span;
  return total;
}

bool protected_by_key() { return memory().key >= 0; }

DeviceWindow::DeviceWindow() {
  Memory& mem = memory();
  if (mem.key >= 0) {
    if (t_open++ == 0) pkey_set(mem.key, 0);
    return;
  }
  std::lock_guard<std::mutex> lock(mem.mu);
  if (mem.open++ == 0)
    for (const auto& [addr, a] : mem.live) protect(a, PROT_READ | PROT_WRITE);
}

DeviceWindow::~DeviceWindow() {
  Memory& mem = memory();
  if (mem.key >= 0) {
    if (--t_open == 0) pkey_set(mem.key, PKEY_DISABLE_ACCESS);
    return;
  }
  std::lock_guard<std::mutex> lock(mem.mu);
  if (--mem.open == 0)
    for (const auto& [addr, a] : mem.live) protect(a, PROT_NONE);
}

void* pinned_alloc(size_t bytes) {
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p) return nullptr;
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  mem.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

bool pinned_free(void* p) {
  Memory& mem = memory();
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    auto it = mem.pinned.find(reinterpret_cast<uintptr_t>(p));
    if (it == mem.pinned.end()) return false;
    mem.pinned.erase(it);
  }
  std::free(p);
  return true;
}

bool is_pinned(const void* p, size_t bytes) {
  Memory& mem = memory();
  std::lock_guard<std::mutex> lock(mem.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = mem.pinned.upper_bound(a);
  if (it == mem.pinned.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

}  // namespace baton::simt
