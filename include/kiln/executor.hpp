#pragma once
// The seam between the DSL and what runs it, stated once.
//
// The planner (eval/assign.hpp) decides what a PASS computes: outputs of one shape on one
// device, each a target tensor and an expression, and it has already put temporaries
// where a target overlaps what an output reads; reductions inside the expressions have
// been computed (materialize). A REDUCTION is handed over on its own: an input expression
// free of reductions, the reduced axes, and a fresh contiguous output (kept dims in order).
//
// Two executors receive that plan:
//  - the host executor receives the plan as the pass type's kernel (eval/kernel.hpp: the
//    fused loop, compiled for each tuple of expression types) and the flat lists of its
//    leaves and targets, which eval/host_pass.hpp (compiled once) lays out and runs; a
//    reduction (reduce.hpp `run_reduction`) is compiled for each expression type;
//  - a device executor receives the plan type-erased at the kernel IR (ir/ir.hpp): each
//    expression type is lowered once per specialization (leaf pattern, access), and the
//    executor gets the lowering, the leaves, the merged iteration space and the targets
//    (device_pass, device_reduction below). It is a kiln::backend whose executor() is not
//    null. jit/ provides Vulkan and CUDA, compiled once per program; a program built
//    without jit/ (CMake target kiln::core) has no device executor, and naming a GPU
//    device there is a kiln::error.
// What an executor provides: every output written, or a kiln::error and no output touched
// past the first failing launch; work is queued in order on the device, and the host
// waits only when it reads.
#include "kiln/backend.hpp"
#include "kiln/ir/ir.hpp"
#include "kiln/layout.hpp"
#include "kiln/linkage.hpp"
#include "kiln/storage.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// A reduction as a device executor sees it. Each reduction's definition
// (reductions/*.hpp) gives its host parts (read by the host executor from the type) and
// these device parts, C-family source written against a device_spelling; the executor
// splices them into its kernel templates.
//
// The device code's names: `v` the value (register type of `value`), `r` its index within
// the reduced axes; the state (`a`, of type `acc`, and `ai`, of the kernel's index type);
// in `merge`, a second state (`b`, `bi`) folded into the first. `ai` is the reduction's to
// use (argmax's index, a float product's exponent, a count) where carries_index says so.
// A reduction whose state is two values (logsumexp's maximum and scaled sum) sets `init2`:
// `a2` (and `b2` in merge), of type `acc` too.
class device_spelling {
public:
  virtual std::string type(dtype) const = 0; // register type
  virtual std::string convert(dtype from, dtype to, const std::string& x) const = 0;
  // A statement-free expression setting the int variable k to x's binary exponent and
  // giving x's mantissa (frexp), as the dialect passes out-parameters.
  virtual std::string frexp(const std::string& x, const std::string& k) const = 0;
  // The lowest (or highest) value of a dtype: -inf (inf) for floats.
  virtual std::string limit(dtype, bool lowest) const = 0;
  // Op `op` (ir::op_info<ops::exp>) on x at compute dtype `compute`, spelled as the
  // dialect spells the op in an expression (the device math library where it has one).
  virtual std::string apply(const ir::ir_op& op, dtype compute, const std::string& x) const = 0;
  std::string index;  // the kernel's index type (of `r` and `ai`)
  std::string count;  // the number of values folded into each output, an expression
  int param_base = 0; // the kernel scalar of the reduction's first run-time parameter
  // The values ${NAME} takes in this kernel, where a tuner sets them (a custom reduction's
  // tunables, reduction_info::tunables); empty: the definition's own.
  std::span<const tunable> tunables;
  std::string param(int k) const { return "P.p" + std::to_string(param_base + k); }

protected:
  ~device_spelling() = default;
};

struct reduction_dtypes {
  dtype value, acc, result;
};

struct reduction_code {
  std::string init;              // the identity of `a`, an expression
  std::string index_init = "-1"; // the initial `ai`
  std::string init2;             // the identity of `a2`; empty: no `a2`
  std::string combine;           // statements folding (v, r) into (a, ai)
  std::string merge;             // statements folding (b, bi) into (a, ai), in any order
  std::string finish;            // an expression of the result's register type from (a, ai)
};

struct reduction_info {
  const char* name;
  // The accumulator dtype for values of dtype `value` (double where the device has it).
  dtype (*accumulator)(dtype value, bool has_f64);
  // Whether `ai` carries state between the passes of a two-pass reduction.
  bool (*carries_index)(dtype acc);
  // Whether the state has `a2` (the kernels keep it beside `a` and `ai`).
  bool second;
  reduction_code (*device)(const device_spelling&, const reduction_dtypes&);
  // A built-in reduction: hand-written kernels registered under its name (providers) may
  // run it. A user's reduction of the same name never reaches them.
  bool builtin = true;
  // Run-time parameters of the reduction (a custom one's: an L_p norm's p), at most 4:
  // scalars of every stage's kernel, so that a new value compiles nothing.
  int params = 0;
  // A custom reduction's tunables (${NAME} in its device code): those listing values are
  // tuning parameters (jit/tune/op_tunables.hpp).
  std::span<const tunable> tunables = {};
};

// What an executor made of a lowering (its compiled kernels), kept beside the lowering so
// a later pass finds it without building a string or hashing anything.
struct executor_state {
  virtual ~executor_state() = default;
};

// An expression type lowered for one specialization: the leaf pattern (which leaves are
// the same tensor), contiguous or strided over `rank` merged dims, 32- or 64-bit indices,
// and which of the pass's outputs it computes (`outputs`, empty: all of them; a kiln::eval
// with outputs of several shapes runs one kernel per shape).
class lowered_pass {
public:
  lowered_pass(std::vector<std::int16_t> p, bool s, int r, bool w, ir::kernel_ir code,
               std::vector<bool> o = {})
      : pattern(std::move(p)), strided(s), rank(r), wide(w), outputs(std::move(o)),
        ir(std::move(code)) {}
  const std::vector<std::int16_t> pattern;
  const bool strided;
  const int rank;
  const bool wide;
  const std::vector<bool> outputs;
  const ir::kernel_ir ir;

  bool matches(const std::vector<std::int16_t>& p, bool s, int r, bool w,
               const std::vector<bool>& o) const {
    return strided == s && rank == r && wide == w && pattern == p && outputs == o;
  }
  // The state `owner` (an executor) keeps for this lowering, made by `make` on first use;
  // `make` runs outside the lock (it compiles), and a racing thread's result is dropped.
  template <class Make>
  std::shared_ptr<executor_state> state_for(const void* owner, Make&& make) const {
    {
      std::lock_guard lock(mutex_);
      for (const auto& [o, s] : states_)
        if (o == owner) return s;
    }
    std::shared_ptr<executor_state> made = make();
    std::lock_guard lock(mutex_);
    for (const auto& [o, s] : states_)
      if (o == owner) return s;
    states_.emplace_back(owner, made);
    return made;
  }

private:
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<const void*, std::shared_ptr<executor_state>>> states_;
};

// The lowerings of one tuple of expression types (the types are the rest of the key).
struct lowering_table {
  std::mutex mutex;
  std::vector<std::unique_ptr<lowered_pass>> entries;
  lowering_table() = default;
  KILN_CORE_INLINE ~lowering_table(); // out of line: one copy per program

  // The entry for this specialization, lowered by `lower()` on first use.
  template <class Lower>
  const lowered_pass& find(const std::vector<std::int16_t>& pattern, bool strided, int rank,
                           bool wide, Lower&& lower, const std::vector<bool>& outputs = {}) {
    std::lock_guard lock(mutex);
    for (const auto& e : entries)
      if (e->matches(pattern, strided, rank, wide, outputs)) return *e;
    entries.push_back(
        std::make_unique<lowered_pass>(pattern, strided, rank, wide, lower(), outputs));
    return *entries.back();
  }
};

template <class Key>
lowering_table& lowerings_of() {
  static lowering_table t;
  return t;
}

// Expressions lowered to IR in this process: an evaluation that finds its lowering adds
// nothing here (tests check that new sizes and scalars reuse kernels).
inline std::atomic<std::uint64_t>& lowering_count() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

// A tensor leaf as a kernel sees it: memory, layout, dtype.
struct device_leaf {
  const kiln::storage* storage;
  const kiln::layout* layout;
  dtype type;
  bool same_as(const device_leaf& o) const {
    return storage == o.storage && type == o.type && *layout == *o.layout;
  }
};

// Work of this many elements or more takes 64-bit indices in a kernel: in 32 bits an index
// below the work plus one sweep of the grid must stay below 2^31, and a sweep covers at
// most the work plus (1 + y) workgroups of at most 1024 invocations, under 2^16 more.
// Part of the specialization key, so the planner decides it.
inline constexpr std::int64_t narrow_index_limit =
    (std::int64_t{1} << 30) - (std::int64_t{1} << 20);

// Strides of one operand over the merged iteration space.
using operand_strides = std::array<std::int64_t, max_rank>;

// A pass, erased at the IR: `n` elements over `extents`, outputs first then the lowering's
// inputs (one per distinct leaf) in `strides`.
struct device_pass {
  const lowered_pass& lowered;
  std::span<const device_leaf> inputs;
  std::span<const std::uint64_t> scalars; // bits of each scalar parameter (ir::leaf_table)
  const kiln::shape& extents;
  std::span<const operand_strides> strides;
  std::int64_t n;
  std::span<const storage* const> targets;
  std::span<const layout* const> target_layouts;
};

// A reduction, erased at the IR: the input's dims reordered as (kept..., reduced...) and
// merged, so element o * count + r is the r-th input of output o; `lowered` computes the
// reduced value (one output of dtype `value`).
struct device_reduction {
  const reduction_info& info; // which reduction; info.name names it in errors
  const lowered_pass& lowered;
  std::span<const device_leaf> inputs;
  std::span<const std::uint64_t> scalars;
  const kiln::shape& extents;
  std::span<const operand_strides> strides; // one per input
  std::int64_t count;                       // inputs per output
  std::int64_t nout;
  dtype value;
  dtype result;
  const storage& out;
  const layout& out_layout; // contiguous, the kept dims in order
  // The input's own dims marked reduced (hand-written kernels see the input unpermuted:
  // one leaf, its layout as given, when needs_tensor_input said so).
  std::array<bool, max_rank> mask;
  std::span<const double> params = {}; // info.params run-time values
};

// A product on a device, erased at the IR: C[bt, i, j] = sum over k of A(bt, i, k) B(bt, k, j)
// over the dims (batch..., m, n, k) of `extents`; `lowered` computes both operands' values
// (results 0 and 1, dtype `acc`) there, each operand's leaves with stride 0 along the dim
// (n or m) it does not have. Without an epilogue (lowered has two results) the product is
// stored, in dtype `result`, in targets[0]. With one, results 2... are the outputs, stored
// in targets 0...: expressions over (batch..., m, n) whose input `product` (-1: none) is the
// product, converted to `result`, in place of a load (every other input and target has
// stride 0 along k).
struct device_contraction {
  const lowered_pass& lowered;
  std::span<const device_leaf> inputs;
  std::span<const std::uint64_t> scalars;
  const kiln::shape& extents;
  std::span<const operand_strides> strides; // one per input
  int batch_rank;
  dtype acc;
  dtype result;
  std::span<const storage* const> targets;
  std::span<const std::int64_t> target_offsets;
  std::span<const operand_strides> target_strides;
  int product = -1;
  // A part of a split product (split-K): its K is the whole product's (> 0), and its first
  // batch dim is the parts where `parts_first`. Its kernel is chosen at the whole product's
  // size.
  std::int64_t whole_k = 0;
  bool parts_first = false;
  // Whether the device's vendor library could compute this product instead (then its
  // epilogue, if any, as a pass), and what the default rule picks: -1 it could not, 0 kiln's
  // kernel, 1 the library. The matmul family's `provider` chooses between them.
  int provider_rule = -1;
};

// A plain product for a vendor library (cuBLAS on CUDA): C = A B over `batch` matrices
// stored row-major (C contiguous), each operand a matrix in place: element (r, c) of batch
// element i at offset + i * batch_stride + (trans ? c * ld + r : r * ld + c), in its storage.
struct device_gemm {
  struct operand {
    const storage* st = nullptr;
    std::int64_t offset = 0, ld = 0, batch_stride = 0;
    bool trans = false;
  };
  dtype type = dtype::f32;   // both operands'
  dtype result = dtype::f32; // C's: the operands' type, or f32 for 16-bit operands
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  operand a, b;
  const storage* c = nullptr;
  std::int64_t c_offset = 0;
};

// A captured plan's device launches (plan/): what a step queued when captured, replayed
// without the planner. A replay appends them to a batch, which queues what it holds when
// the plan reaches a step of another kind or its end (on Vulkan: one pre-recorded command
// buffer per run of launches).
class launch_batch {
public:
  virtual ~launch_batch() = default;
  virtual void finish() = 0;         // queues what was appended since the last finish
  virtual void clear() noexcept = 0; // drops it (a replay that failed part-way)
};
class launch_record {
public:
  virtual ~launch_record() = default;
  // Appends the launches to `batch` (the same executor's): a buffer that was bound[i]'s at
  // the capture is bound[i]'s memory now; a kernel's scalars taken from a pass's leaf table
  // are `scalars` (empty: as captured).
  virtual void replay(launch_batch& batch, std::span<const storage* const> bound,
                      std::span<const std::uint64_t> scalars) const = 0;
};

// What a device backend provides to the planner.
class device_executor {
public:
  virtual ~device_executor() = default;
  // run and reduce must not evaluate kiln expressions themselves: the planner's per-thread
  // state (eval/device_pass_impl.hpp) is in use while they run.
  virtual void run(const device_pass& p) = 0;
  virtual void reduce(const device_reduction& r) = 0;
  // Runs the product with a kernel of its own and says true, or says false having done
  // nothing (no such kernel, or not for these sizes): the planner then runs it as a
  // reduction over broadcast views (contractions/device_matmul.hpp).
  virtual bool contract(const device_contraction&) { return false; }
  // Workgroups the device runs at once: a product of fewer output tiles is split along K
  // into parts that fill it (contractions/device_matmul.hpp).
  virtual std::int64_t concurrent_groups() const { return 128; }
  // How many parts this product's K is cut into, as chosen for its kernel (the matmul
  // family's `split`): 0 for the rule, 1 for none, -1 where the kernel declines the product.
  virtual std::int64_t contract_parts(const device_contraction&) { return 0; }
  // Whether this product goes to the vendor library (1) or kiln's kernel (0), as chosen for
  // its kernel (the matmul family's `provider`; the rule where nothing is tuned); -1 where
  // the library cannot take it (provider_rule -1).
  virtual int contract_provider(const device_contraction& c) { return c.provider_rule; }
  // The product contract_parts or contract_provider was asked about is not launched after all:
  // the choice kept for it is dropped (no later contraction may take it).
  virtual void contract_declined() {}
  // Runs a plain product by the device's vendor library and says true, or says false having
  // done nothing (no such library, or not for this product); with `ask`, says only whether
  // it would.
  virtual bool provider_gemm(const device_gemm&, bool /*ask*/ = false) { return false; }
  // Whether this reduction must receive a materialized tensor: a hand-written kernel is
  // registered for it, or `leaves` are too many buffers for one kernel.
  virtual bool needs_tensor_input(const reduction_info& info, std::size_t leaves) const = 0;
  // Runs run(data), which queues work on this executor through run() only, and returns its
  // launches for replay: the buffers of `bound` named by storage, the memory the launches
  // made for themselves kept by the record. Null where they cannot be replayed so (memory
  // outside `bound`, another executor's work): then a replay runs the step again.
  // `parameters`: the step's kernel scalars change between replays (plan parameters).
  virtual std::unique_ptr<launch_record> record_launches(void (*run)(void*), void* data,
                                                         std::span<const storage* const> bound,
                                                         bool parameters) {
    (void)bound;
    (void)parameters;
    run(data);
    return nullptr;
  }
  // The batch a plan's replays append this executor's records to.
  virtual std::unique_ptr<launch_batch> make_batch() { return nullptr; }
};

// The device executor of a storage's backend; a kiln::error if it has none.
inline device_executor& executor_of(const storage& s, const char* op) {
  device_executor* x = s.backend() ? s.backend()->executor() : nullptr;
  if (!x)
    throw error(op, "the device has no executor",
                s.device().str() + ": its backend cannot run kernels in this program");
  return *x;
}

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/executor_impl.hpp"
#endif
