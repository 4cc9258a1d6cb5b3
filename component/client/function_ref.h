// FunctionRef<R(Args...)>: a non-owning reference to a callable (two words, never
// allocates), for callbacks that are invoked during the call only, e.g. filling a DDS
// sample in place on the real-time path. std::function copies a capture larger than its
// small buffer (16 bytes in libstdc++) to the heap; this does not. The referenced callable
// must outlive the FunctionRef: pass lambdas as arguments, do not store the reference.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace ari::component {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  // Implicit, so a lambda converts where a FunctionRef is expected. The constraint keeps
  // copies of a FunctionRef on the copy constructor; a const callable is called as const
  // (the cast only erases the type: call_ restores the callable's own constness).
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>)
  // NOLINTNEXTLINE(google-explicit-constructor,bugprone-forwarding-reference-overload)
  FunctionRef(F&& f) noexcept
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast)
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<F>*>(object),
                             std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ari::component
