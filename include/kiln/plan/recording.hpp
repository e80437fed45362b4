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
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {
struct lowering_table;
class launch_batch;
} // namespace kiln
namespace kiln::ir {
struct expr_description;
struct leaf_table;
} // namespace kiln::ir

namespace kiln::detail {

struct host_output;

// One recorded step; run() does what the statement did, on the plan's bound memory.
class plan_step {
public:
  virtual ~plan_step() = default;
  virtual void run() = 0;
  // A device step replayed from its recorded launches appends them here; the plan queues
  // the batch before a step that does not append to it, and at its end.
  launch_batch* batch = nullptr;
};

// An argument at a call: its handle's parts.
struct bound_argument {
  const storage* st;
  const kiln::layout* layout;
  dtype type;
};

// The recording a capture makes (its class is recording_impl.hpp's, compiled once: its
// members' types cost every file that includes kiln their parsing). What the library's
// statements and a plan ask of it:
class plan_recording;
struct recording_deleter {
  KILN_CORE_INLINE void operator()(plan_recording* r) const noexcept;
};
using recording_ptr = std::unique_ptr<plan_recording, recording_deleter>;
KILN_CORE_INLINE recording_ptr make_recording(std::string name, const void* signature);
KILN_CORE_INLINE std::size_t recording_steps(const plan_recording& r);
// Memory a step uses: an argument's slot or the function's own (kept), adopted or a
// constant; anything else is a kiln::error naming `op` and the tensor. Returns what the step
// is to use: the slot where s is an argument's own storage, else s. `held`: the step keeps a
// handle to it.
KILN_CORE_INLINE const storage* plan_use(plan_recording& r, const storage* s, const kiln::layout& l,
                                         dtype t, const char* op, bool held = false);
// The handle of a slot plan_use returned.
KILN_CORE_INLINE const std::shared_ptr<storage>& plan_slot_handle(const plan_recording& r,
                                                                  const storage* slot);
// Adds a step, unless inside a step that records itself whole (plan_nest).
KILN_CORE_INLINE void plan_add(plan_recording& r, std::unique_ptr<plan_step> step);
// Adds a step of a typed statement (a reduction of one expression type) as its data and two
// functions over it (run, free): a class template per reduction, with its vtable and
// unique_ptr, was code in every file with a reduction.
KILN_CORE_INLINE void plan_add(plan_recording& r, void* data, void (*run)(void*),
                               void (*drop)(void*));
// Memory a component of kiln owns and updates itself (an optimizer's moments and the
// parameters it holds): steps may use it, and the plan keeps it alive.
KILN_CORE_INLINE void plan_adopt(plan_recording& r, const std::shared_ptr<storage>& s);
KILN_CORE_INLINE void plan_nest(plan_recording& r, int by);
// A plan's side (capture.hpp): the arguments' slots for the capture, a parameter's cell, the
// checks after the function returned, a call's parameters and replay.
KILN_CORE_INLINE std::vector<std::shared_ptr<storage>>
plan_bind_for_capture(plan_recording& r, std::span<const bound_argument> args);
KILN_CORE_INLINE std::uint64_t* plan_add_parameter(plan_recording& r);
KILN_CORE_INLINE std::uint64_t* plan_parameter(plan_recording& r, std::size_t i);
KILN_CORE_INLINE void plan_check_arguments(const plan_recording& r,
                                           std::span<const bound_argument> proxies);
KILN_CORE_INLINE void plan_finish(plan_recording& r);
// Binds args, runs the steps, unbinds.
KILN_CORE_INLINE void plan_replay(plan_recording& r, std::span<const bound_argument> args);

// Host code a replay runs where the capture ran it: what a component of kiln computes on the
// host for each call (an optimizer's step count and bias corrections, into the cells its
// update reads as parameters). Does nothing when this thread is not capturing.
template <class F>
class host_call_step final : public plan_step {
public:
  explicit host_call_step(F f) : f_(std::move(f)) {}
  void run() override { f_(); }

private:
  F f_;
};
template <class F>
void record_host_call(F f) {
  if (plan_recording* r = recording_now())
    plan_add(*r, std::make_unique<host_call_step<F>>(std::move(f)));
}
// The storage of t, adopted by this thread's recording (plan_recording::adopt), if any.
template <class T>
void adopt_for_plan(const tensor<T>& t) {
  if (plan_recording* r = recording_now(); r != nullptr && t.storage()) plan_adopt(*r, t.storage());
}

// A scope whose statements are part of a step recorded whole after it (their storages are
// still checked and kept, their own steps not added).
class nested_recording {
public:
  explicit nested_recording(plan_recording& r) : r_(r) { plan_nest(r_, 1); }
  ~nested_recording() { plan_nest(r_, -1); }
  nested_recording(const nested_recording&) = delete;
  nested_recording& operator=(const nested_recording&) = delete;

private:
  plan_recording& r_;
};

// The host pass runner (eval/assign.hpp) while the thread records a plan: records the pass
// (its kernel, outputs, `stores`: an array of each target's storage, leaves and scalars,
// over `shape`), then runs it. Compiled once: the check in every pass type's code is which
// runner it calls.
KILN_CORE_INLINE void record_and_run_host_pass(const void* stores, const host_kernel_ref& k,
                                               std::span<const host_output> outs,
                                               std::span<const flat_leaf> leaves,
                                               std::span<const flat_scalar> scalars,
                                               const kiln::shape& shape);

// The tensors of a tree a step holds, each checked by use() and pointed at its slot where
// it is an argument's.
template <class T>
void adopt_leaves(tensor<T>& t, plan_recording& r, const char* op) {
  const storage* s = plan_use(r, t.storage().get(), t.layout(), t.dtype(), op, true);
  if (s != t.storage().get()) {
    kiln::layout l = t.layout();
    std::destroy_at(&t);
    std::construct_at(&t, plan_slot_handle(r, s), std::move(l));
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

// Records a device pass of device_run_outputs (eval/device_pass.hpp), as run_device_pass
// takes it, and runs it: its launches recorded where the executor can (a replay appends them
// to the plan's batch, the pass's scalars renewed), else a replay runs it again on the
// plan's memory (the lowering found again in `table`, the kernel launched on the queue).
KILN_CORE_INLINE void
record_device_pass(plan_recording& r, lowering_table& table, std::span<const flat_leaf> targets,
                   const kiln::shape& shape, std::span<const ir::expr_description> exprs,
                   std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                   std::span<const bool> active);

// A device step a typed statement holds (a reduction: reduce.hpp's reduction_replay): run
// runs it, drop deletes it, leaves lists the memory it names and its kernel scalars (a leaf
// table) and says whether a parameter is among them. record_device_step takes `data` and
// runs it once, what it runs on the way (a hand-written kernel's operand) part of it.
struct device_step_hooks {
  void (*run)(void*);
  void (*drop)(void*);
  bool (*leaves)(void*, std::vector<const storage*>&, ir::leaf_table&);
  // Whether `leaves` fills the leaf table the launches' kernel scalars come from (else a
  // replay with parameters runs the step again rather than patch its launches).
  bool scalars = true;
};
KILN_CORE_INLINE void record_device_step(plan_recording& r, void* data, device_step_hooks hooks);

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
