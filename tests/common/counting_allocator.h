// Counting global allocator for the "no heap allocation after warm-up" tests.
//
// Linking tests/common/counting_allocator.cc into a test (ari_add_tests(... COUNTING_ALLOC
// <file>)) replaces every replaceable form of global operator new/delete with a malloc/free
// pair that counts calls while a CountAllocations scope is alive: from every thread, or,
// with a thread filter, only on threads whose name (pthread_setname_np) starts with one of
// the given prefixes (the node's real-time path: "ari-sched", "ari-pool").
// (glibc >= 2.34 has no malloc hooks; the runtime allocates only through new.)
//
// Debugging: ARI_ALLOC_TRACE=1 prints a backtrace (stderr) of every counted allocation.
#pragma once

#include <initializer_list>

namespace ari::testing {

// Resets the count and starts counting; the destructor stops. Scopes do not nest.
class CountAllocations {
 public:
  CountAllocations();
  // Counts only on threads named with one of these prefixes (at most 4, < 16 bytes each).
  explicit CountAllocations(std::initializer_list<const char*> thread_prefixes);
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

  // Global operator new calls (any form, counted threads) since construction.
  long count() const;
};

}  // namespace ari::testing
