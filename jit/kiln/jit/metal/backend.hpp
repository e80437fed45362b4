#pragma once
// The Metal backend as kiln sees it: kiln::backend (memory, copies, waiting) and jit_backend
// (limits, compile, launch) over a Metal runtime (runtime.hpp: Apple's Metal framework, or a
// stand-in), with MSL from codegen.hpp. Libraries are kept in memory (single-flight, the
// same kernel_cache as Vulkan and CUDA) and on disk (the same disk_cache under
// KILN_CACHE_DIR), keyed with the compiler's version and the device's identity.
// Metal has no 64-bit floats: f64 storage and f64 arithmetic are a clear error here
// (cannot_run), so reductions of f32 accumulate in f32 (run_reduction.hpp picks the
// accumulator from what the device supports).
#include "kiln/jit/backend/device_backend.hpp"
#include "kiln/jit/metal/codegen.hpp"
#include "kiln/jit/metal/runtime.hpp"

#include <cstring>

namespace kiln::jit::metal {

struct metal_kernel : kernel {
  metal_kernel(const kernel_ir& ir, param_layout l) : kernel(ir, std::move(l)) {}
  void* pipeline = nullptr; // the runtime's; lives as long as the process, as its kernel
};

// The disk-cache key of a library: source, the MSL compiler's version, the device's identity.
inline hash128 kernel_key(std::string_view source, const device_properties& p) {
  kernel_key_inputs in;
  in.source = source;
  in.options = p.identity; // the device's name and registry id: binaries are per device
  in.compiler_version = p.compiler;
  in.vendor_id = p.vendor_id;
  in.kiln_version = kiln_version;
  return kernel_cache_key(in);
}

class metal_backend final : public device_backend<metal_backend, context, block> {
public:
  using kernel_type = metal_kernel;
  static constexpr const char* source_extension = "metal";
  static constexpr const char* dialect_name = "MSL";
  // Parameter bytes: one constant buffer argument whatever its size (setBytes up to 4 KiB,
  // a buffer beyond; the source is the same), so no block goes "in a buffer" of its own.
  static constexpr std::uint32_t max_param_bytes = 32768;

  metal_backend(int index, std::shared_ptr<runtime> rt)
      : device_backend(index, std::make_shared<context>(std::move(rt))) {
    const auto& p = props();
    tuning_identity_ = "metal " + p.identity + " " + p.compiler;
  }

  kiln::device device() const override { return {device_kind::metal, index_}; }
  std::string describe() const override {
    return props().name + " (Metal, " + props().compiler + ")";
  }
  std::string cannot_run(const std::array<bool, 9>& used) const override {
    if (used[static_cast<int>(dtype::f64)]) return "Metal has no 64-bit floats (f64)";
    return {};
  }
  const std::string& tuning_identity() const override { return tuning_identity_; }
  tune::device_limits tuning_limits() const override {
    tune::device_limits l;
    l.max_workgroup = props().max_group;
    l.max_groups = launch_limits().max_x;
    l.shared_bytes = static_cast<std::int64_t>(props().threadgroup_bytes);
    l.subgroup = props().simd_width; // simd_shuffle_down in every compute kernel
    return l;
  }
  std::uint32_t max_inline_params() const override { return max_param_bytes; }
  int max_buffers() const override { return metal::max_buffers; }
  // dispatchThreadgroups takes 2^32 - 1 groups per dimension; y stays small, as elsewhere.
  grid_limits launch_limits() const override {
    return {2147483647, 65535, std::max<std::int64_t>(1, props().preferred_groups)};
  }
  bool device_timer() const override { return props().timer; }
  void timer_begin() override { ctx_->rt().timer_begin(); }
  double timer_end_ns() override { return ctx_->rt().timer_end_ns(); }

  void launch(const kernel& k, std::span<const buffer_arg> buffers,
              std::span<const std::byte> params, const launch_work& w) override {
    const auto& mk = static_cast<const metal_kernel&>(k);
    if (static_cast<int>(buffers.size()) != k.layout.buffers || params.size() > k.layout.bytes)
      throw error("launch", "parameters do not match the kernel",
                  std::to_string(buffers.size()) + " buffers, " + std::to_string(params.size()) +
                      " parameter bytes");
    thread_local std::vector<void*> handles;
    thread_local std::vector<std::byte> blob;
    handles.clear();
    for (const auto& b : buffers)
      handles.push_back(static_cast<const block*>(b.handle)->handle);
    blob.assign(struct_bytes(k.layout), std::byte{0}); // the MSL struct's size, rounded up
    std::memcpy(blob.data(), params.data(), params.size());
    const launch_grid g = grid_for(k, w);
    ctx_->rt().dispatch(mk.pipeline, handles, blob, static_cast<unsigned>(g.x),
                        static_cast<unsigned>(g.y), static_cast<unsigned>(k.workgroup));
  }

  // --- what device_backend asks of a backend
  std::string generate(const kernel_ir& ir, const param_layout& l, const pass_shape& s) const {
    return metal::generate(ir, l, s);
  }
  std::string generate_reduction(const kernel_ir& ir, const param_layout& l,
                                 const reduce_spec& r) const {
    return metal::generate_reduction(ir, l, r);
  }
  std::string generate_contraction(const kernel_ir& ir, const param_layout& l,
                                   const contract_spec& c) const {
    return metal::generate_contraction(ir, l, c);
  }
  std::int64_t workgroup_size() const { return 256; }
  hash128 cache_key(std::string_view source) const { return kernel_key(source, props()); }
  std::string cache_identity() const { return "metal " + props().identity; }
  compiled_binary compile_source(const std::string& source) const {
    const auto t0 = std::chrono::steady_clock::now();
    auto bytes = ctx_->rt().compile(source, "kiln_kernel");
    return {std::move(bytes), ms_since(t0), props().compiler};
  }
  bool load(metal_kernel& k, std::span<const std::byte> binary, bool from_disk,
            const std::string&) {
    k.pipeline = ctx_->rt().pipeline(binary, "kiln_kernel");
    if (k.pipeline) return true;
    if (from_disk) return false;
    throw error("jit", "the Metal runtime cannot make a pipeline of a library it compiled",
                props().name);
  }

private:
  const device_properties& props() const { return ctx_->rt().properties(); }
  std::string tuning_identity_;
};

} // namespace kiln::jit::metal
