#pragma once
// A plan's recording: the steps a captured function ran (host passes, reductions), each
// with its operands resolved to the plan's own memory, so that a replay binds the arguments
// and runs the steps without building a node, planning aliasing or looking up a kernel.
//
// Memory a step reads or writes is one of two kinds, found when the step is recorded:
//   - an argument's: the step points at the argument's slot, a borrowed storage the plan
//     points at the caller's tensor at each call (one pointer per argument, not per leaf),
//     whether the statement reached it through the handle the function was given or
//     through one of the caller's (an expression built before the call);
//   - the function's own (a temporary, a reduction's result, a tensor it made): kept by
//     the plan and reused at every replay.
// Anything else (a tensor the function reaches through a reference, not an argument) is
// refused when it is met: a replay would read whatever that handle held at capture.
#include "kiln/error.hpp"
#include "kiln/eval/flat.hpp"
#include "kiln/eval/kernel.hpp"
#include "kiln/plan/capture_state.hpp"

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {
struct lowering_table;
}
namespace kiln::ir {
struct expr_description;
}

namespace kiln::detail {

struct host_output;

// One recorded step; run() does what the statement did, on the plan's bound memory.
class plan_step {
public:
  virtual ~plan_step() = default;
  virtual void run() = 0;
};

// A tensor argument as a capture saw it: what a replay compares (the layout, the device,
// which earlier argument shares its storage) and where its slot is.
struct plan_argument {
  kiln::layout layout;
  kiln::device device;
  int same_as; // the first argument over the same storage (itself if none)
  int slot;
};

// An argument at a call: its handle's parts.
struct bound_argument {
  const storage* st;
  const kiln::layout* layout;
  dtype type;
};

class plan_recording {
public:
  KILN_CORE_INLINE plan_recording(std::string name, const void* signature);
  plan_recording(const plan_recording&) = delete;
  plan_recording& operator=(const plan_recording&) = delete;
  KILN_CORE_INLINE ~plan_recording();

  const std::string& name() const noexcept { return name_; }
  const void* signature() const noexcept { return signature_; }

  // --- capturing
  // The arguments: a slot each (shared where they share storage); returns the slot storage
  // of each, through which the captured function reads and writes them.
  KILN_CORE_INLINE std::vector<std::shared_ptr<storage>>
  bind_for_capture(std::span<const bound_argument> args);
  // A cell for each parameter (its bits, as a flat_scalar holds them).
  std::uint64_t* add_parameter() { return cells_.emplace_back(new std::uint64_t(0)).get(); }
  KILN_CORE_INLINE void made(const std::shared_ptr<storage>& s);
  // Memory a component of kiln owns and updates itself (an optimizer's moments and the
  // parameters it holds): steps may use it, and the plan keeps it alive.
  KILN_CORE_INLINE void adopt(const std::shared_ptr<storage>& s);
  // Memory a step uses: an argument's slot or the function's own (kept); anything else
  // is a kiln::error naming `op` and the tensor. Returns what the step is to use: the slot
  // where s is an argument's own storage, else s. `held`: the step keeps a handle to it.
  KILN_CORE_INLINE const storage* use(const storage* s, const kiln::layout& l, dtype t,
                                      const char* op, bool held = false);
  // The handle of a slot use() returned.
  KILN_CORE_INLINE const std::shared_ptr<storage>& slot_handle(const storage* slot) const;
  // Adds a step, unless a step that records itself whole is being recorded (nested).
  KILN_CORE_INLINE void add(std::unique_ptr<plan_step> step);
  // After the function returned: the handles it was given (`proxies`) must still be its
  // arguments' slots, as they were laid out (it assigned values, not other tensors).
  KILN_CORE_INLINE void check_arguments(std::span<const bound_argument> proxies) const;
  // Then, the handles let go: the function's own memory in use moves to the arena, and an
  // argument handle or a tensor the function made that is still held elsewhere (kept in a
  // handle outside the function) is an error.
  KILN_CORE_INLINE void finish();

  // --- replaying
  // Whether args are what the capture saw (matches() == 0, without saying why not).
  KILN_CORE_INLINE bool replays(std::span<const bound_argument> args) const noexcept;
  // 0 where args are what the capture saw; else (with *why set, where given, to what
  // changed) 1 where only layouts differ, ranks kept, and 2 for anything else.
  KILN_CORE_INLINE int matches(std::span<const bound_argument> args, std::string* why) const;
  KILN_CORE_INLINE void bind(std::span<const bound_argument> args);
  KILN_CORE_INLINE void unbind() noexcept;
  KILN_CORE_INLINE void replay();
  std::size_t steps() const noexcept { return steps_.size(); }
  std::uint64_t* parameter(std::size_t i) noexcept { return cells_[i].get(); }

private:
  std::string name_;
  const void* signature_;
  std::vector<plan_argument> args_;
  std::vector<std::shared_ptr<storage>> slots_;
  std::vector<const storage*> real_; // per slot: the argument's own storage at capture
  std::vector<std::unique_ptr<std::uint64_t>> cells_;
  std::vector<std::unique_ptr<plan_step>> steps_;
  std::vector<std::shared_ptr<storage>> arena_;
  // The memory the function's own host temporaries share (those whose steps never meet).
  struct free_block {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  std::vector<std::unique_ptr<void, free_block>> blocks_;
  KILN_CORE_INLINE void share_arena();
  // While capturing: the first and last step that uses each storage.
  std::unordered_map<const storage*, std::pair<std::size_t, std::size_t>> span_;
  // While capturing: what the function made, which of that steps use, handles steps hold.
  std::unordered_map<const storage*, std::shared_ptr<storage>> made_;
  std::unordered_map<const storage*, long> used_;
  std::unordered_map<const storage*, std::shared_ptr<storage>> adopted_;
  std::uint64_t overlaps_ = 0; // pairs of borrowed arguments whose memory meets
  // The argument storages of the last call replays() accepted (one call at a time: a plan
  // runs one, plan_core::running).
  mutable std::vector<const storage*> last_;
  bool borrowed_ = false;

public:
  int nested = 0;
};

// Host code a replay runs where the capture ran it: what a component of kiln computes on the
// host for each call (an optimizer's step count and bias corrections, into the cells its
// update reads as parameters). Does nothing when this thread is not capturing.
class host_call_step final : public plan_step {
public:
  explicit host_call_step(std::function<void()> f) : f_(std::move(f)) {}
  void run() override { f_(); }

private:
  std::function<void()> f_;
};
inline void record_host_call(std::function<void()> f) {
  if (plan_recording* r = recording_now()) r->add(std::make_unique<host_call_step>(std::move(f)));
}
// The storage of t, adopted by this thread's recording (plan_recording::adopt), if any.
template <class T>
void adopt_for_plan(const tensor<T>& t) {
  if (plan_recording* r = recording_now(); r != nullptr && t.storage()) r->adopt(t.storage());
}

// A scope whose statements are part of a step recorded whole after it (their storages are
// still checked and kept, their own steps not added).
class nested_recording {
public:
  explicit nested_recording(plan_recording& r) : r_(r) { ++r_.nested; }
  ~nested_recording() { --r_.nested; }
  nested_recording(const nested_recording&) = delete;
  nested_recording& operator=(const nested_recording&) = delete;

private:
  plan_recording& r_;
};

// Records a host pass run by host_run_pass_with (eval/assign.hpp): its kernel, outputs
// (`stores`: each target's storage), leaves and scalars, over `shape`.
KILN_CORE_INLINE void
record_host_pass(plan_recording& r, const host_kernel_ref& k, std::span<const host_output> outs,
                 std::span<const storage* const> stores, std::span<const flat_leaf> leaves,
                 std::span<const flat_scalar> scalars, const kiln::shape& shape);

// The tensors of a tree a step holds, each checked by use() and pointed at its slot where
// it is an argument's.
template <class T>
void adopt_leaves(tensor<T>& t, plan_recording& r, const char* op) {
  const storage* s = r.use(t.storage().get(), t.layout(), t.dtype(), op, true);
  if (s != t.storage().get()) {
    kiln::layout l = t.layout();
    std::destroy_at(&t);
    std::construct_at(&t, r.slot_handle(s), std::move(l));
  }
}
template <class T>
void adopt_leaves(scalar_expr<T>&, plan_recording&, const char*) {}
template <class Op, class... C>
void adopt_leaves(expr_node<Op, C...>& n, plan_recording& r, const char* op) {
  n.each_child([&](const auto& c) {
    adopt_leaves(const_cast<std::remove_cvref_t<decltype(c)>&>(c), r, op);
  });
}

// Records a device pass run by device_run_outputs (eval/device_pass.hpp), as
// run_device_pass takes it; a replay runs it again on the plan's memory (the lowering found
// again in `table`, the kernel launched on the device's queue).
KILN_CORE_INLINE void
record_device_pass(plan_recording& r, lowering_table& table, std::span<const flat_leaf> targets,
                   const kiln::shape& shape, std::span<const ir::expr_description> exprs,
                   std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                   std::span<const bool> active);

// A plan parameter's current value in a tree a step holds (a reduction's operand).
template <class T>
void refresh_parameters(tensor<T>&) {}
template <class T>
void refresh_parameters(scalar_expr<T>& s) {
  if (s.source) std::memcpy(&s.value, s.source, sizeof(T)); // (a cell: bits, not a T)
}
template <class Op, class... C>
void refresh_parameters(expr_node<Op, C...>& n) {
  n.each_child(
      [](const auto& c) { refresh_parameters(const_cast<std::remove_cvref_t<decltype(c)>&>(c)); });
}

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/plan/recording_impl.hpp"
#endif
