#pragma once
// What the JIT needs of a GPU backend beyond kiln::backend's memory and queue: its limits,
// turning kernel IR into a launchable kernel (code generation, compilation and caching
// are the backend's, as each has its own dialect and compiler), and launching.
#include "kiln/backend.hpp"
#include "kiln/jit/jit.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/launch_grid.hpp"
#include "kiln/jit/pipeline/params.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"

#include <atomic>
#include <memory>
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
// (run_pass.hpp, run_reduction.hpp) over the virtual functions below.
class jit_backend : public kiln::backend, public kiln::device_executor {
public:
  device_executor* executor() override { return this; }
  void run(const device_pass& p) override;
  void reduce(const device_reduction& r) override;
  bool needs_tensor_input(const reduction_info& info, std::size_t leaves) const override;

  // Whether a hand-written kernel is registered for this reduction on this kind of device:
  // only built-ins have them (a user's reduction of the same name never reaches them).
  bool has_provider(const reduction_info& info) const;

  // Bytes of parameters a kernel takes inline (push constants, kernel arguments).
  virtual std::uint32_t max_inline_params() const = 0;
  // Buffers one kernel may bind (inputs + outputs), after any reserved for parameters.
  virtual int max_buffers() const = 0;
  // Compiles (or finds in its caches) the kernel for this IR.
  virtual std::shared_ptr<kernel> compile(const kernel_ir& ir) = 0;
  // The same for a reduction kernel: `ir` computes the reduced values (see glsl_reduce.hpp).
  virtual std::shared_ptr<kernel> compile_reduction(const kernel_ir& ir, const reduce_spec& r) = 0;
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
  // Why a kernel using these dtypes cannot run here ("" if it can).
  virtual std::string cannot_run(const std::array<bool, 9>& dtypes_used) const = 0;
};

} // namespace kiln::jit
