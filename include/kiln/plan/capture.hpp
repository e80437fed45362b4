#pragma once
// kiln::capture: a function of tensors traced once into a plan, then replayed.
//
//   auto step = kiln::capture([](kiln::tensor<float>& u, const kiln::tensor<float>& f,
//                                kiln::param<float> dt) { u = u + dt * f; });
//   for (...) step(u, f, 0.01f);   // the first call captures (and computes), later ones replay
//
// The first call runs the function, recording each statement's resolved work (recording.hpp);
// a later call whose tensors have the captured dtypes, devices, layouts and sharing binds
// them and runs the recorded steps. Numbers that change between calls are parameters: the
// function declares them kiln::param<T> and the plan is called with a T. A number the
// function captures by reference or computes on the host is a constant of the plan.
#include "kiln/plan/recording.hpp"
#include "kiln/tensor.hpp"

#include <atomic>
#include <string>
#include <tuple>
#include <type_traits>

namespace kiln {

// A number the plan takes at each call (a time step, a learning rate): the type of the
// captured function's parameter; the plan is called with a T there.
template <element T>
using param = scalar_expr<T>;

struct capture_options {
  std::string name = "plan"; // what errors call the plan
  // A call whose tensors have other extents (the same ranks) is captured anew and kept
  // beside the others (at most 8 shapes, the least recently used dropped); without it, a
  // kiln::error.
  bool shapeless = false;
};

namespace detail {

template <class A>
inline constexpr bool plan_tensor_arg = is_tensor_v<std::remove_cvref_t<A>>;
template <class A>
inline constexpr bool plan_number_arg = std::is_arithmetic_v<std::remove_cvref_t<A>>;

// What the captured function receives for a call's argument of type A.
template <class A>
struct plan_proxy {
  static_assert(plan_tensor_arg<A> || plan_number_arg<A>,
                "kiln::capture: a plan is called with kiln::tensor<T> arguments and numbers");
  using type = std::remove_cvref_t<A>;
};
template <class A>
requires plan_number_arg<A>
struct plan_proxy<A> {
  using type = param<std::remove_cvref_t<A>>;
};

// One instance per list of call types: a recording's signature.
template <class... A>
inline constexpr char plan_signature = 0;

// The part of a plan that is not its function's type: its recordings and who runs it
// (compiled once, plan/capture_impl.hpp).
class plan_core {
public:
  explicit plan_core(capture_options o) : options_(std::move(o)) {}
  KILN_CORE_INLINE ~plan_core();
  const std::string& name() const noexcept { return options_.name; }
  // The recording args replay (the one used last first), or null.
  KILN_CORE_INLINE plan_recording* find(std::span<const bound_argument> args, const void* sig);
  // Returns if a call that replays no recording may be captured; else throws why not.
  KILN_CORE_INLINE void may_capture(std::span<const bound_argument> args, const void* sig) const;
  KILN_CORE_INLINE plan_recording& keep(recording_ptr r);
  std::size_t last_steps() const noexcept { return last_ ? recording_steps(*last_) : 0; }
  std::size_t recordings() const noexcept { return recordings_.size(); }

  // One call at a time: a second, from another thread or from inside the function, is an
  // error (the slots hold one call's tensors).
  struct running {
    explicit running(plan_core& c) : c_(c) {
      if (c.busy_.exchange(true, std::memory_order_acquire)) [[unlikely]]
        c.refuse_running();
    }
    ~running() { c_.busy_.store(false, std::memory_order_release); }
    running(const running&) = delete;
    running& operator=(const running&) = delete;
    plan_core& c_;
  };

private:
  [[noreturn]] KILN_CORE_INLINE void refuse_running() const;
  capture_options options_;
  std::vector<recording_ptr> recordings_;
  plan_recording* last_ = nullptr;
  std::atomic<bool> busy_{false};
};

// Sets this thread's recording for a scope (and clears it however the scope ends).
struct recording_scope {
  explicit recording_scope(plan_recording& r) { recording_now() = &r; }
  ~recording_scope() { recording_now() = nullptr; }
  recording_scope(const recording_scope&) = delete;
  recording_scope& operator=(const recording_scope&) = delete;
};

[[noreturn, gnu::cold]] inline void refuse_empty_argument(const std::string& plan, std::size_t i) {
  throw error("plan " + plan, "a tensor argument is empty",
              "argument " + std::to_string(i + 1) + " has no storage");
}

} // namespace detail

// A captured function (see the file comment). Movable, not copyable; one call at a time.
template <class F>
class plan {
public:
  plan(F f, capture_options o)
      : f_(std::move(f)), core_(std::make_unique<detail::plan_core>(std::move(o))) {}

  template <class... A>
  void operator()(A&&... a) {
    using namespace detail;
    static_assert(std::is_invocable_v<F&, typename plan_proxy<A>::type&...>,
                  "kiln::capture: the function must take kiln::tensor<T>& (or const&) for each "
                  "tensor the plan is called with and kiln::param<T> for each number");
    constexpr std::size_t nt = (std::size_t{0} + ... + std::size_t(plan_tensor_arg<A>));
    std::array<bound_argument, nt ? nt : 1> bound;
    {
      std::size_t t = 0, i = 0;
      (
          [&] {
            if constexpr (plan_tensor_arg<A>) {
              if (!a.storage()) [[unlikely]]
                refuse_empty_argument(core_->name(), i);
              bound[t++] = {a.storage().get(), &a.layout(), a.dtype()};
            }
            ++i;
          }(),
          ...);
    }
    const std::span<const bound_argument> args(bound.data(), nt);
    if (recording_now() != nullptr)
      refuse_in_capture("a plan", "plans are not captured inside other captured functions; "
                                  "call its function directly");
    const plan_core::running running(*core_);
    const void* sig = &plan_signature<std::remove_cvref_t<A>...>;
    if (plan_recording* r = core_->find(args, sig)) {
      std::size_t p = 0;
      (
          [&] {
            if constexpr (plan_number_arg<A>) {
              const std::remove_cvref_t<A> v = a;
              std::memcpy(plan_parameter(*r, p++), &v, sizeof v);
            }
          }(),
          ...);
      plan_replay(*r, args);
      return;
    }
    core_->may_capture(args, sig);
    recording_ptr rec = make_recording(core_->name(), sig);
    {
      const std::vector<std::shared_ptr<storage>> slots = plan_bind_for_capture(*rec, args);
      std::size_t t = 0;
      // (Braced: the proxies are made left to right, the slots and cells in call order.)
      std::tuple<typename plan_proxy<A>::type...> proxies{proxy_of(a, slots, t, *rec)...};
      {
        const recording_scope scope(*rec);
        std::apply([&](auto&... p) { f_(p...); }, proxies);
      }
      std::array<bound_argument, nt ? nt : 1> after;
      std::size_t k = 0;
      std::apply(
          [&](const auto&... p) {
            (
                [&] {
                  if constexpr (is_tensor_v<std::remove_cvref_t<decltype(p)>>)
                    after[k++] = {p.storage().get(), &p.layout(), p.dtype()};
                }(),
                ...);
          },
          proxies);
      plan_check_arguments(*rec, {after.data(), nt});
    }
    plan_finish(*rec); // (and the slots let go of this call's tensors)
    core_->keep(std::move(rec));
  }

  // Steps of the recording used last (0 before the first call), and how many are kept.
  std::size_t steps() const noexcept { return core_->last_steps(); }
  std::size_t recordings() const noexcept { return core_->recordings(); }

private:
  template <class A>
  static auto proxy_of(const A& a, const std::vector<std::shared_ptr<storage>>& slots,
                       std::size_t& t, detail::plan_recording& r) {
    if constexpr (detail::plan_tensor_arg<A>) {
      return A(slots[t++], a.layout());
    } else {
      std::uint64_t* cell = plan_add_parameter(r);
      std::memcpy(cell, &a, sizeof a);
      return param<A>(a, reinterpret_cast<const A*>(cell));
    }
  }

  F f_;
  std::unique_ptr<detail::plan_core> core_;
};

// Captures f into a plan (see the file comment); nothing runs until the plan is called.
template <class F>
plan<F> capture(F f, capture_options o = {}) {
  return plan<F>(std::move(f), std::move(o));
}

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/plan/capture_impl.hpp"
#endif
