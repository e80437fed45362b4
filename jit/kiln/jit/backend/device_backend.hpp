#pragma once
// The body every JIT backend shares, written once: memory forwarded to the device's
// context, kernels compiled through the caches (in memory, single-flight by source; on
// disk, by the kernel cache key), and devices opened once. A backend (one folder: vulkan/,
// cuda/) derives from device_backend<Self, Context, Block> and provides:
//   Context: allocate(bytes) -> Block, release(block&), write/read/copy, synchronize(),
//     stats() -> {in_use, reserved, peak}, empty_cache();
//   using kernel_type (a jit::kernel with what its launch needs);
//   std::string generate(const kernel_ir&, const param_layout&, const pass_shape&) and
//     generate_reduction(ir, layout, const reduce_spec&) and
//     generate_contraction(ir, layout, const contract_spec&): the dialect's source;
//   hash128 cache_key(source) (cache_key.hpp's kernel_cache_key of the source, compiler,
//     options, device, driver) and std::string cache_identity();
//   compiled_binary compile_source(source): the compiler's output;
//   bool load(kernel_type&, std::span<const std::byte> binary, bool from_disk, source):
//     make the kernel launchable; false rejects a binary from the disk cache (then it is
//     compiled), a bad compiled one is a kiln::error;
//   workgroup_size() of elementwise kernels, source_extension (for KILN_DUMP_KERNELS),
//   dialect_name ("GLSL", "CUDA C++": compile errors);
//   plus jit_backend's device(), describe(), cannot_run(), limits and launch().
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/backend/launch_list.hpp"
#include "kiln/jit/cache/cache_key.hpp"
#include "kiln/jit/cache/disk_cache.hpp"
#include "kiln/jit/cache/kernel_cache.hpp"
#include "kiln/jit/codegen/raw.hpp"
#include "kiln/kernels/reduce_template.hpp"

#include <chrono>
#include <map>
#include <mutex>

namespace kiln::jit {

// A compiler's output: the binary the disk cache keeps, and how long compiling took.
struct compiled_binary {
  std::vector<std::byte> bytes;
  double compile_ms = 0;
  std::string compiler; // for the log: "glslc", "NVRTC 12.4", ...
};

template <class Self, class Context, class Block>
class device_backend : public jit_backend {
public:
  using block = Block;

  device_backend(int index, std::shared_ptr<Context> ctx) : index_(index), ctx_(std::move(ctx)) {}

  std::string unsupported(dtype d) const override {
    std::array<bool, 9> used{};
    used[static_cast<int>(d)] = true;
    return cannot_run(used);
  }

  // --- memory: a handle is a heap-held block of the context's allocator
  void* allocate(std::size_t bytes) override { return new block(ctx_->allocate(bytes)); }
  void release(void* h) noexcept override {
    auto* b = static_cast<block*>(h);
    ctx_->release(*b);
    delete b;
  }
  void write(void* h, std::size_t off, const void* src, std::size_t n) override {
    ctx_->write(*static_cast<block*>(h), off, src, n);
  }
  void read(void* h, std::size_t off, void* dst, std::size_t n) override {
    ctx_->read(*static_cast<block*>(h), off, dst, n);
  }
  void copy(void* s, std::size_t so, void* d, std::size_t doff, std::size_t n) override {
    ctx_->copy(*static_cast<block*>(s), so, *static_cast<block*>(d), doff, n);
  }
  void synchronize() override { ctx_->synchronize(); }
  memory_info stats() const override {
    const auto s = ctx_->stats();
    return {s.in_use, s.reserved, s.peak};
  }
  void empty_cache() override { ctx_->empty_cache(); }

  // --- kernels
  // Kernels are kept by source and workgroup size (a Vulkan specialization constant: the
  // same binary, another launchable kernel; CUDA's launch bounds are in the source).
  std::shared_ptr<kernel> compile(const kernel_ir& ir, const pass_shape& shape) override {
    param_layout layout(ir, inline_param_limit());
    pass_shape s = shape;
    if (s.workgroup <= 0) s.workgroup = self().workgroup_size();
    const std::string source = generate([&] { return self().generate(ir, layout, s); });
    return kernels_.get(s.key() + "\n" + source,
                        [&] { return make_kernel(ir, layout, source, s.workgroup); });
  }
  std::shared_ptr<kernel> compile_reduction(const kernel_ir& ir, const reduce_spec& r) override {
    param_layout layout(ir, inline_param_limit(), reduce_extras);
    const std::string source = generate([&] { return self().generate_reduction(ir, layout, r); });
    return kernels_.get(std::to_string(r.group) + "\n" + source,
                        [&] { return make_kernel(ir, layout, source, r.group); });
  }
  std::shared_ptr<kernel> compile_contraction(const kernel_ir& ir,
                                              const contract_spec& c) override {
    param_layout layout(ir, inline_param_limit(), contract_extras);
    const std::string source = generate([&] { return self().generate_contraction(ir, layout, c); });
    const int g = c.tile.threads();
    return kernels_.get(std::to_string(g) + "\n" + source,
                        [&] { return make_kernel(ir, layout, source, g); });
  }
  std::int64_t default_workgroup() const override { return self().workgroup_size(); }

  const std::shared_ptr<Context>& ctx() const { return ctx_; }

  // The backend of device `index`, opened once and shared (opening may throw kiln::error).
  template <class... Args>
  static std::shared_ptr<backend> open(int index, Args&&... args) {
    static std::mutex m;
    static std::map<int, std::shared_ptr<Self>> opened;
    std::lock_guard lock(m);
    auto& b = opened[index];
    if (!b) b = std::make_shared<Self>(index, std::forward<Args>(args)...);
    return b;
  }

protected:
  int index_;
  std::shared_ptr<Context> ctx_;

private:
  Self& self() { return static_cast<Self&>(*this); }
  const Self& self() const { return static_cast<const Self&>(*this); }

  // Code generation, its errors (an op without this dialect's spelling) naming the device.
  template <class F>
  std::string generate(F&& f) {
    try {
      return f();
    } catch (const error& e) {
      const std::string on = "on " + device().str();
      throw error(e.op(), e.reason(), e.details().empty() ? on : e.details() + ", " + on);
    }
  }

  // Codegen done; the binary from the disk cache or the compiler, then made launchable.
  std::shared_ptr<kernel> make_kernel(const kernel_ir& ir, const param_layout& layout,
                                      const std::string& source, std::int64_t workgroup) {
    const auto t0 = std::chrono::steady_clock::now();
    dump_kernel(source, Self::source_extension);
    const hash128 key = self().cache_key(source);
    const std::string identity = self().cache_identity();
    auto k = std::make_shared<typename Self::kernel_type>(ir, layout);
    k->workgroup = workgroup;
    if (auto bytes = shared_disk_cache().load(key, identity);
        bytes && !bytes->empty() && self().load(*k, *bytes, true, source)) {
      k->from_cache = true;
      ++disk_hit_count();
    }
    compiled_binary c;
    if (!k->from_cache) {
      try {
        c = self().compile_source(source);
      } catch (const error& e) { // an error in a raw op's body is said against the body
        codegen::rethrow_raw_body_error(e, source, Self::dialect_name);
      }
      self().load(*k, c.bytes, false, source);
      shared_disk_cache().store(key, identity, c.bytes);
      ++compile_count();
    }
    k->compile_ms = ms_since(t0);
    log(std::string(k->from_cache ? "disk cache hit " : "compiled ") + key.hex() + " in " +
        std::to_string(k->compile_ms) + " ms" +
        (k->from_cache ? "" : " (" + c.compiler + " " + std::to_string(c.compile_ms) + " ms)") +
        ", " + std::to_string(ir.code.size()) + " instructions, " + std::to_string(layout.buffers) +
        " buffers, params " + std::to_string(layout.bytes) + " B" +
        (layout.in_buffer ? " in a buffer" : ""));
    return k;
  }

  single_flight<std::shared_ptr<kernel>> kernels_;
};

} // namespace kiln::jit
