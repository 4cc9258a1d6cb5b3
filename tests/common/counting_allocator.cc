// Replacement global operator new/delete that count allocations while a
// CountAllocations scope is alive. Every replaceable form is replaced (malloc/free
// underneath) so no pointer crosses between this allocator and the sanitizer's.
#include "tests/common/counting_allocator.h"

#include <execinfo.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

// The replacement new/delete pair is malloc/free on both sides; GCC 12 cannot see that
// once they are inlined into library code and warns.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_count{0};
// Thread filter (set before counting starts, read while counting).
constexpr int kMaxPrefixes = 4;
char g_prefixes[kMaxPrefixes][16];
int g_num_prefixes = 0;  // 0: every thread counts
std::atomic<long> g_epoch{0};
bool g_trace = false;
thread_local long tl_epoch = -1;
thread_local bool tl_counted = false;
thread_local bool tl_in_trace = false;

// Whether this thread's allocations count in the current scope (its name, once per scope).
bool ThreadCounted() {
  if (g_num_prefixes == 0) return true;
  const long epoch = g_epoch.load(std::memory_order_relaxed);
  if (tl_epoch != epoch) {
    char name[17] = {};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';  // no allocation
    tl_counted = false;
    for (int i = 0; i < g_num_prefixes; ++i) {
      tl_counted = tl_counted || std::strncmp(name, g_prefixes[i], std::strlen(g_prefixes[i])) == 0;
    }
    tl_epoch = epoch;
  }
  return tl_counted;
}

void Trace() {
  if (!g_trace || tl_in_trace) return;
  tl_in_trace = true;  // backtrace() may allocate on its first call
  void* frames[32];
  const int n = backtrace(frames, 32);
  static const char kHead[] = "--- counted allocation:\n";
  if (write(2, kHead, sizeof kHead - 1) > 0) backtrace_symbols_fd(frames, n, 2);
  tl_in_trace = false;
}

void* CountedAlloc(std::size_t n, std::size_t align) noexcept {
  if (g_counting.load(std::memory_order_relaxed) && !tl_in_trace && ThreadCounted()) {
    g_count.fetch_add(1, std::memory_order_relaxed);
    Trace();
  }
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

void* CountedAllocOrThrow(std::size_t n, std::size_t align) {
  if (void* p = CountedAlloc(n, align)) return p;
  throw std::bad_alloc();
}

}  // namespace

namespace ari::testing {

CountAllocations::CountAllocations() {
  g_num_prefixes = 0;
  const char* trace = std::getenv("ARI_ALLOC_TRACE");
  g_trace = trace != nullptr && trace[0] == '1';
  g_epoch.fetch_add(1);
  g_count.store(0);
  g_counting.store(true);
}

CountAllocations::CountAllocations(std::initializer_list<const char*> thread_prefixes)
    : CountAllocations() {
  g_counting.store(false);
  for (const char* p : thread_prefixes) {
    if (g_num_prefixes == kMaxPrefixes) break;
    std::strncpy(g_prefixes[g_num_prefixes], p, sizeof g_prefixes[0] - 1);
    g_prefixes[g_num_prefixes][sizeof g_prefixes[0] - 1] = '\0';
    ++g_num_prefixes;
  }
  g_epoch.fetch_add(1);
  g_count.store(0);
  g_counting.store(true);
}
CountAllocations::~CountAllocations() { g_counting.store(false); }
long CountAllocations::count() const { return g_count.load(); }

}  // namespace ari::testing

void* operator new(std::size_t n) { return CountedAllocOrThrow(n, 0); }
void* operator new[](std::size_t n) { return CountedAllocOrThrow(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return CountedAlloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  return CountedAllocOrThrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return CountedAllocOrThrow(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return CountedAlloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return CountedAlloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
