#pragma once
// What the JIT needs of a GPU backend beyond kiln::backend's memory and queue: its limits,
// turning kernel IR into a launchable kernel (code generation, compilation and caching
// are the backend's, as each has its own dialect and compiler), and launching.
#include "kiln/backend.hpp"
#include "kiln/jit/jit.hpp"
#include "kiln/jit/pipeline/contract_spec.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/launch_grid.hpp"
#include "kiln/jit/pipeline/params.hpp"
#include "kiln/jit/pipeline/pass_shape.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/jit/tune/families.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <span>

namespace kiln::jit {

// A compiled kernel, ready to launch on its backend.
struct kernel {
  kernel(const kernel_ir& ir, param_layout l) : layout(std::move(l)), ir_inputs(ir.inputs.size()) {}
  virtual ~kernel() = default;
  param_layout layout;
  std::size_t ir_inputs;
  bool from_cache = false;     // compiled binary came from the disk cache
  double compile_ms = 0;       // time to make it (codegen, compile or cache load, pipeline)
  std::int64_t workgroup = 64; // invocations per workgroup it was built for
};

// One buffer argument: a storage's backend handle.
struct buffer_arg {
  void* handle;
};

// A GPU backend of the JIT: kiln::backend's memory and queue, and the device executor of
// executor.hpp, whose run() and reduce() are written once for every backend
// (run_pass.hpp, run_reduction.hpp, run_contraction.hpp) over the virtual functions below.
class jit_backend : public kiln::backend, public kiln::device_executor {
public:
  device_executor* executor() override { return this; }
  void run(const device_pass& p) override;
  void reduce(const device_reduction& r) override;
  bool contract(const device_contraction& c) override;
  std::int64_t concurrent_groups() const override;
  bool needs_tensor_input(const reduction_info& info, std::size_t leaves) const override;

  // Whether a hand-written kernel is registered for this reduction on this kind of device:
  // only built-ins have them (a user's reduction of the same name never reaches them).
  bool has_provider(const reduction_info& info) const;

  // Bytes of parameters a kernel takes inline (push constants, kernel arguments).
  virtual std::uint32_t max_inline_params() const = 0;
  // Buffers one kernel may bind (inputs + outputs), after any reserved for parameters.
  virtual int max_buffers() const = 0;
  // Compiles (or finds in its caches) the elementwise kernel for this IR, walking its
  // elements as `shape` says (its workgroup 0: the backend's default).
  virtual std::shared_ptr<kernel> compile(const kernel_ir& ir, const pass_shape& shape = {}) = 0;
  // The same for a reduction kernel: `ir` computes the reduced values (see glsl_reduce.hpp).
  virtual std::shared_ptr<kernel> compile_reduction(const kernel_ir& ir, const reduce_spec& r) = 0;
  // The same for a contraction kernel: `ir` computes both operands' values (contract_spec.hpp).
  virtual std::shared_ptr<kernel> compile_contraction(const kernel_ir& ir,
                                                      const contract_spec& c) = 0;
  // The device's grid limits and preferred group count (launch_grid.hpp).
  virtual grid_limits launch_limits() const = 0;
  // The grid that launch() uses for this kernel and work.
  launch_grid grid_for(const kernel& k, const launch_work& w) const {
    return plan_grid(w, k.workgroup, launch_limits());
  }
  // Queues the kernel over its work (a grid from grid_for: no invocation loops more than
  // loop_budget times); returns without waiting.
  virtual void launch(const kernel& k, std::span<const buffer_arg> buffers,
                      std::span<const std::byte> params, const launch_work& w) = 0;
  // launch(), noted for a captured plan where a step is being captured on this thread
  // (launch_list.hpp): every kernel family queues through here. `pass_scalars`: how many
  // leading scalars of the kernel are the pass's, in its leaf table's order.
  void queue(const kernel& k, std::span<const buffer_arg> buffers,
             std::span<const std::byte> params, const launch_work& w,
             std::uint32_t pass_scalars = 0);
  // Memory a launch makes for itself and lets go once queued (a pass's stage temporaries, a
  // reduction's partials): kept by a step's record while it is captured.
  void* temp(std::size_t bytes);
  void drop_temp(void* p) noexcept;
  std::unique_ptr<launch_record> record_launches(void (*run)(void*), void* data,
                                                 std::span<const storage* const> bound,
                                                 bool parameters) override;
  // Whether a recorded replay keeps the inline parameters it was recorded with (Vulkan's
  // push constants are part of its command buffer). A step with plan parameters then runs
  // kernels that read theirs from a buffer, which a replay rewrites (vulkan/backend.hpp).
  virtual bool records_inline_params() const { return false; }
  // The inline parameter bytes the kernels compiled now may take: none while such a step
  // is captured on this thread.
  std::uint32_t inline_param_limit() const;
  // The key of this backend's compiled kernels beside a lowering (lowered_pass::state_for):
  // the kernels with parameters in a buffer are kept apart from the others.
  const void* state_owner() const;
  std::unique_ptr<launch_batch> make_batch() override;
  // Why a kernel using these dtypes cannot run here ("" if it can).
  virtual std::string cannot_run(const std::array<bool, 9>& dtypes_used) const = 0;

  // --- device timers (tune/measure.hpp): the device's own clock where the API has one
  // (Vulkan timestamp queries, CUDA events). device_timer() says whether it has; between
  // timer_begin() and timer_end_ns() the device's time for every command queued in between,
  // in nanoseconds (timer_end_ns waits for them).
  virtual bool device_timer() const { return false; }
  virtual void timer_begin() {}
  virtual double timer_end_ns() { return -1; }

  // --- tuning (jit/tune/): the device as the tuning database knows it (vendor, name,
  // driver, UUID), what constrains its configurations, and its families' spaces.
  virtual const std::string& tuning_identity() const = 0;
  virtual tune::device_limits tuning_limits() const = 0;
  // Invocations per workgroup of elementwise kernels when nothing is tuned.
  virtual std::int64_t default_workgroup() const = 0;
  // Adjacent elements an elementwise kernel takes per unit by default (the family's `vector`).
  virtual std::int64_t default_vector() const { return 1; }
  const tune::space& elementwise_space() {
    std::call_once(spaces_once_, [&] { make_spaces(); });
    return *elementwise_;
  }
  const tune::space& reduction_space() {
    std::call_once(spaces_once_, [&] { make_spaces(); });
    return *reduction_;
  }
  // (`splits`: with the split-K parameter's values, for products a split may help;
  // `provider_rule` as device_contraction's: -1, or the rule's pick between kiln's kernel and
  // the vendor library.)
  const tune::space& matmul_space(bool splits = true, int provider_rule = -1) {
    std::call_once(spaces_once_, [&] { make_spaces(); });
    return *matmul_[splits][std::clamp(provider_rule, -1, 1) + 1];
  }
  // Whether a vendor library for plain products is loaded (the matmul family then has its
  // `provider` parameter).
  virtual bool has_gemm_provider() const { return false; }
  std::int64_t contract_parts(const device_contraction& c) override;
  int contract_provider(const device_contraction& c) override;
  void contract_declined() override;

private:
  // Products (run_contraction.hpp): the configuration a contraction's kernel takes, and the
  // kernel of a configuration.
  tune::config contract_choice(const device_contraction& c);
  // c's configuration, chosen once and kept for c (contract_provider, contract_parts and
  // contract then take the same).
  const tune::config& asked_choice(const device_contraction& c);
  std::shared_ptr<kernel> contraction_kernel(struct compiled_contraction& cc,
                                             const lowered_pass& lp, const contract_spec& base,
                                             const tune::config& cfg);
  void make_spaces() {
    const tune::device_limits l = tuning_limits();
    const std::int64_t groups = launch_limits().preferred;
    elementwise_ = std::make_unique<tune::space>(
        tune::elementwise_space(l, default_workgroup(), groups, default_vector()));
    reduction_ = std::make_unique<tune::space>(tune::reduction_space(l, groups));
    for (int splits = 0; splits < 2; ++splits)
      for (int rule = -1; rule <= 1; ++rule)
        matmul_[splits][rule + 1] =
            std::make_unique<tune::space>(tune::matmul_space(l, splits == 1, rule));
  }
  std::once_flag spaces_once_;
  std::unique_ptr<tune::space> elementwise_, reduction_, matmul_[2][3];
};

} // namespace kiln::jit
