// Counting global allocator for the "no heap allocation after warm-up" tests.
//
// Linking tests/common/counting_allocator.cc into a test (ari_add_tests(... COUNTING_ALLOC
// <file>)) replaces every replaceable form of global operator new/delete with a malloc/free
// pair that counts calls, from every thread, while a CountAllocations scope is alive.
// (glibc >= 2.34 has no malloc hooks; the runtime allocates only through new.)
#pragma once

namespace ari::testing {

// Resets the count and starts counting; the destructor stops. Scopes do not nest.
class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;

  // Global operator new calls (any form, any thread) since construction.
  long count() const;
};

}  // namespace ari::testing
