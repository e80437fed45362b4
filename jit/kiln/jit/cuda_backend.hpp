#pragma once
// The CUDA backend as kiln sees it: kiln::backend (memory, copies, waiting) and jit_backend
// (limits, compile, launch) over the runtime in cuda/, with CUDA C++ from cuda_codegen.hpp
// compiled by NVRTC. Images are kept in memory (single-flight, the same kernel_cache as
// Vulkan) and on disk (the same disk_cache, KILN_CACHE_DIR), keyed with NVRTC's version and
// the target architecture; the backend registers itself as the provider of "cuda:N".
#include "kiln/jit/cache_key.hpp"
#include "kiln/jit/cuda/context.hpp"
#include "kiln/jit/cuda_codegen.hpp"
#include "kiln/jit/disk_cache.hpp"
#include "kiln/jit/jit_backend.hpp"
#include "kiln/jit/kernel_cache.hpp"
#include "kiln/jit/nvrtc.hpp"

#include <chrono>
#include <cstring>
#include <map>

namespace kiln::jit::cuda {

// The disk-cache key of a kernel: source, options (with -arch), NVRTC's version, the
// device's architecture and driver version, kiln's version.
inline hash128 kernel_key(std::string_view source, std::string_view options,
                          std::string_view nvrtc_version, int cc, int driver_version) {
  kernel_key_inputs in;
  in.source = source;
  in.options = options;
  in.compiler_version = nvrtc_version;
  in.vendor_id = 0x10de; // NVIDIA
  in.device_id = static_cast<std::uint32_t>(cc);
  in.driver_version = static_cast<std::uint32_t>(driver_version);
  in.kiln_version = kiln_version;
  return kernel_cache_key(in);
}

// Is this (from the disk cache) plausibly an image of the kind asked for?
inline bool looks_like(std::span<const std::byte> b, bool ptx) {
  if (ptx) return !b.empty() && b.back() == std::byte{0};
  return b.size() > 4 && std::memcmp(b.data(),
                                     "\x7f"
                                     "ELF",
                                     4) == 0;
}

// Every dtype runs on every architecture; 16-bit floats need the toolkit's cuda_fp16.h and
// cuda_bf16.h, which NVRTC does not have built in: why a kernel using `used` cannot be
// compiled without a CUDA home ("" when it can).
inline std::string missing_headers(const std::array<bool, 9>& used, const cuda_home& home) {
  if ((used[static_cast<int>(dtype::f16)] || used[static_cast<int>(dtype::bf16)]) &&
      home.path.empty())
    return "f16 and bf16 kernels include cuda_fp16.h/cuda_bf16.h: " + home.why_not;
  return {};
}

struct cuda_kernel : kernel {
  cuda_kernel(const kernel_ir& ir, param_layout l) : kernel(ir, std::move(l)) {}
  CUfunction fn = nullptr;
  unsigned block = 256;
};

class cuda_backend final : public jit_backend {
public:
  cuda_backend(int index, std::shared_ptr<context> ctx)
      : index_(index), ctx_(std::move(ctx)),
        target_(target_for(ctx_->properties().cc, nvrtc().archs)),
        limits_(launch_limits_for(ctx_->properties().multiprocessors)) {}

  kiln::device device() const override { return {device_kind::cuda, index_}; }
  std::string describe() const override {
    const auto& p = ctx_->properties();
    return p.name + " (CUDA, sm_" + std::to_string(p.cc) + ", " + nvrtc().version() + ")";
  }
  std::string unsupported(dtype d) const override {
    std::array<bool, 9> used{};
    used[static_cast<int>(d)] = true;
    return cannot_run(used);
  }
  std::string cannot_run(const std::array<bool, 9>& used) const override {
    return missing_headers(used, cuda_home_from_environment());
  }

  // --- memory: a handle is a heap-held block
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
  std::uint32_t max_inline_params() const override { return max_param_bytes; }
  int max_buffers() const override { return cuda::max_buffers; }

  std::shared_ptr<kernel> compile(const kernel_ir& ir) override {
    param_layout layout(ir, max_param_bytes);
    const std::string source = generate(ir, layout);
    return kernels_.get(source, [&] { return make_kernel(ir, layout, source, 256); });
  }
  std::shared_ptr<kernel> compile_reduction(const kernel_ir& ir, const reduce_spec& r) override {
    param_layout layout(ir, max_param_bytes, reduce_extras);
    const std::string source = generate_reduction(ir, layout, r);
    return kernels_.get(
        source, [&] { return make_kernel(ir, layout, source, kernels::reduce_group_size); });
  }

  grid_limits launch_limits() const override { return limits_; }
  std::int64_t workgroup(const kernel& k) const override {
    return static_cast<const cuda_kernel&>(k).block;
  }

  void launch(const kernel& k, std::span<const buffer_arg> buffers,
              std::span<const std::byte> params, const launch_work& w) override {
    const auto& ck = static_cast<const cuda_kernel&>(k);
    const std::size_t ptr_bytes = 8 * buffers.size();
    thread_local std::vector<std::byte> blob;
    blob.assign(struct_bytes(k.layout), std::byte{0});
    if (ptr_bytes + params.size() > blob.size())
      throw error("launch", "parameters do not match the kernel",
                  std::to_string(buffers.size()) + " buffers, " + std::to_string(params.size()) +
                      " parameter bytes");
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const CUdeviceptr p = static_cast<const block*>(buffers[i].handle)->ptr;
      std::memcpy(blob.data() + 8 * i, &p, 8);
    }
    std::memcpy(blob.data() + ptr_bytes, params.data(), params.size());
    const launch_grid g = grid_for(k, w);
    ctx_->launch(ck.fn, static_cast<unsigned>(g.x), static_cast<unsigned>(g.y), ck.block, blob);
  }

  const std::shared_ptr<context>& ctx() const { return ctx_; }
  const nvrtc_target& target() const { return target_; }

private:
  std::shared_ptr<kernel> make_kernel(const kernel_ir& ir, const param_layout& layout,
                                      const std::string& source, unsigned block_size) {
    const auto t0 = std::chrono::steady_clock::now();
    dump_kernel(source, "cu");
    const auto& nv = nvrtc();
    const auto options = nvrtc_options(target_, cuda_home_from_environment().include_dir());
    const std::string opts = joined(options);
    const hash128 key =
        kernel_key(source, opts, nv.version(), ctx_->properties().cc, ctx_->api().version);
    const std::string identity = "cuda " + target_.option() + " " + ctx_->properties().name;
    auto k = std::make_shared<cuda_kernel>(ir, layout);
    k->block = block_size;
    if (auto bytes = shared_disk_cache().load(key, identity);
        bytes && looks_like(*bytes, target_.ptx)) {
      k->fn = ctx_->try_load(*bytes, "kiln_kernel"); // a rejected image is a miss
      if (k->fn) ++disk_hit_count();
    }
    k->from_cache = k->fn != nullptr;
    double nvrtc_ms = 0;
    if (!k->fn) {
      const module_image m = compile_cuda(nv, source, options, target_.ptx);
      nvrtc_ms = m.compile_ms;
      k->fn = ctx_->load(m.bytes, "kiln_kernel");
      shared_disk_cache().store(key, identity, m.bytes);
      ++compile_count();
    }
    k->compile_ms = ms_since(t0);
    log(std::string(k->from_cache ? "disk cache hit " : "compiled ") + key.hex() + " in " +
        std::to_string(k->compile_ms) + " ms" +
        (k->from_cache ? "" : " (NVRTC " + std::to_string(nvrtc_ms) + " ms, " + opts + ")") + ", " +
        std::to_string(ir.code.size()) + " instructions, " + std::to_string(layout.buffers) +
        " buffers, params " + std::to_string(struct_bytes(layout)) + " B");
    return k;
  }

  int index_;
  std::shared_ptr<context> ctx_;
  nvrtc_target target_;
  grid_limits limits_;
  single_flight<std::shared_ptr<kernel>> kernels_;
};

// cuda:N for each device the driver reports, or cuda:0 unavailable with the reason (no
// driver, no GPU, no NVRTC).
inline std::vector<device_info> list_cuda_devices() {
  const auto& d = driver();
  if (!d.ok()) return {{kiln::device(device_kind::cuda, 0), false, d.why_not}};
  const auto& nv = nvrtc();
  if (!nv.ok()) return {{kiln::device(device_kind::cuda, 0), false, nv.why_not}};
  std::vector<device_info> out;
  for (int i = 0; i < d.devices; ++i) {
    CUdevice dev = 0;
    char name[256] = {};
    if (d.cuDeviceGet(&dev, i) == 0) d.cuDeviceGetName(name, sizeof name, dev);
    out.push_back({kiln::device(device_kind::cuda, i), true, std::string(name) + " (CUDA)"});
  }
  return out;
}

inline std::shared_ptr<backend> open_cuda(int index) {
  static std::mutex m;
  static std::map<int, std::shared_ptr<cuda_backend>> open;
  std::lock_guard lock(m);
  auto& b = open[index];
  if (!b) {
    if (!nvrtc().ok())
      throw error("device", "device is not available",
                  "cuda:" + std::to_string(index) + ": " + nvrtc().why_not);
    b = std::make_shared<cuda_backend>(index, context::get(index));
  }
  return b;
}

inline const bool cuda_registered =
    register_backend({device_kind::cuda, list_cuda_devices, open_cuda});

} // namespace kiln::jit::cuda
