#pragma once
// The CUDA backend as kiln sees it: kiln::backend (memory, copies, waiting) and jit_backend
// (limits, compile, launch) over the runtime in cuda/, with CUDA C++ from cuda_codegen.hpp
// compiled by NVRTC. Images are kept in memory (single-flight, the same kernel_cache as
// Vulkan) and on disk (the same disk_cache, KILN_CACHE_DIR), keyed with NVRTC's version and
// the target architecture; the backend registers itself as the provider of "cuda:N".
#include "kiln/jit/backend/device_backend.hpp"
#include "kiln/jit/backend/launch_list.hpp"
#include "kiln/jit/cuda/codegen.hpp"
#include "kiln/jit/cuda/context.hpp"
#include "kiln/jit/cuda/cublas.hpp"
#include "kiln/jit/cuda/nvrtc.hpp"

#include <cstring>

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
};

class cuda_backend final : public device_backend<cuda_backend, context, block> {
public:
  using kernel_type = cuda_kernel;
  static constexpr const char* source_extension = "cu";
  static constexpr const char* dialect_name = "CUDA C++";

  explicit cuda_backend(int index)
      : device_backend(index, context::get(index)),
        target_(target_for(ctx_->properties().cc, nvrtc().archs)),
        limits_(launch_limits_for(ctx_->properties().multiprocessors)),
        param_limit_(
            param_limit(ctx_->properties().cc, ctx_->api().version, nvrtc().major, nvrtc().minor)) {
    const auto& p = ctx_->properties();
    tuning_identity_ = "cuda sm_" + std::to_string(p.cc) + " driver " +
                       std::to_string(ctx_->api().version) + " " + nvrtc().version() + " " + p.name;
  }

  kiln::device device() const override { return {device_kind::cuda, index_}; }
  std::string describe() const override {
    const auto& p = ctx_->properties();
    return p.name + " (CUDA, sm_" + std::to_string(p.cc) + ", " + nvrtc().version() + ")";
  }
  std::string cannot_run(const std::array<bool, 9>& used) const override {
    return missing_headers(used, cuda_home_from_environment());
  }
  // The device in the tuning database: name, architecture, driver and NVRTC versions.
  const std::string& tuning_identity() const override { return tuning_identity_; }
  tune::device_limits tuning_limits() const override {
    tune::device_limits l;
    l.max_workgroup = 1024;
    l.max_groups = limits_.max_x;
    l.shared_bytes = 48 * 1024; // static __shared__ per block on every architecture
    l.subgroup = 32;            // warps, and __shfl_down_sync on every architecture kiln runs
    return l;
  }
  std::uint32_t max_inline_params() const override { return param_limit_; }
  int max_buffers() const override { return cuda::max_buffers; }
  grid_limits launch_limits() const override { return limits_; }
  bool provider_gemm(const device_gemm& g, bool ask) override {
    return cublas_gemm(*ctx_, index_, g, ask);
  }
  bool has_gemm_provider() const override { return !cublas().path.empty(); }
  bool device_timer() const override { return true; }
  void timer_begin() override { ctx_->timer_begin(); }
  double timer_end_ns() override { return ctx_->timer_end_ns(); }

  void launch(const kernel& k, std::span<const buffer_arg> buffers,
              std::span<const std::byte> params, const launch_work& w) override {
    thread_local std::vector<std::byte> blob;
    blob.clear();
    pack(k, buffers, params, blob);
    const launch_grid g = grid_for(k, w);
    ctx_->launch(static_cast<const cuda_kernel&>(k).fn, static_cast<unsigned>(g.x),
                 static_cast<unsigned>(g.y), static_cast<unsigned>(k.workgroup), blob);
  }
  // The kernel's one by-value argument, appended to `blob`: the buffers' device pointers,
  // then the parameter block.
  static void pack(const kernel& k, std::span<const buffer_arg> buffers,
                   std::span<const std::byte> params, std::vector<std::byte>& blob) {
    const std::size_t ptr_bytes = 8 * buffers.size(), at = blob.size();
    blob.resize(at + struct_bytes(k.layout), std::byte{0});
    if (ptr_bytes + params.size() > blob.size() - at)
      throw error("launch", "parameters do not match the kernel",
                  std::to_string(buffers.size()) + " buffers, " + std::to_string(params.size()) +
                      " parameter bytes");
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const CUdeviceptr p = static_cast<const block*>(buffers[i].handle)->handle;
      std::memcpy(blob.data() + at + 8 * i, &p, 8);
    }
    std::memcpy(blob.data() + at + ptr_bytes, params.data(), params.size());
  }
  std::unique_ptr<launch_batch> make_batch() override;
  // CUDA graphs made, launched, and nodes set for captured plans so far (tests).
  context::graph_counts graphs() const { return ctx_->graphs(); }

  const nvrtc_target& target() const { return target_; }

private:
  std::string tuning_identity_;

public:
  // --- what device_backend asks of a backend
  std::string generate(const kernel_ir& ir, const param_layout& l, const pass_shape& s) const {
    return cuda::generate(ir, l, s);
  }
  std::string generate_reduction(const kernel_ir& ir, const param_layout& l,
                                 const reduce_spec& r) const {
    return cuda::generate_reduction(ir, l, r);
  }
  std::string generate_contraction(const kernel_ir& ir, const param_layout& l,
                                   const contract_spec& c) const {
    return cuda::generate_contraction(ir, l, c);
  }
  std::int64_t workgroup_size() const { return 256; }
  // Four adjacent elements per unit, one 16-byte load or store of f32 where aligned: measured
  // on an H200 (bench_cuda_jit), a fused chain over 2^26 f32 moved 94% of the device's copy
  // bandwidth this way against 73% one element at a time (2 elements: 90%, 8: 74%).
  std::int64_t default_vector() const override { return 4; }
  hash128 cache_key(std::string_view source) const {
    const auto options = nvrtc_options(target_, cuda_home_from_environment().include_dir());
    return kernel_key(source, joined(options), nvrtc().version(), ctx_->properties().cc,
                      ctx_->api().version);
  }
  std::string cache_identity() const {
    return "cuda " + target_.option() + " " + ctx_->properties().name;
  }
  compiled_binary compile_source(const std::string& source) const {
    const auto options = nvrtc_options(target_, cuda_home_from_environment().include_dir());
    module_image m = compile_cuda(nvrtc(), source, options, target_.ptx);
    return {std::move(m.bytes), m.compile_ms, "NVRTC " + joined(options)};
  }
  // A cubin or PTX image into a loaded function; an image the driver rejects from the disk
  // cache is a miss.
  bool load(cuda_kernel& k, std::span<const std::byte> binary, bool from_disk, const std::string&) {
    if (from_disk) {
      if (!looks_like(binary, target_.ptx)) return false;
      k.fn = ctx_->try_load(binary, "kiln_kernel");
      return k.fn != nullptr;
    }
    k.fn = ctx_->load(binary, "kiln_kernel");
    return true;
  }

private:
  nvrtc_target target_;
  grid_limits limits_;
  std::uint32_t param_limit_;
};

// cuda:N for each device the driver reports, or cuda:0 unavailable with the reason (no
// driver, no GPU, no NVRTC).
// A captured plan's run of launches on CUDA, launched as one CUDA graph: the last few
// graphs (by their kernels and grids) are kept, and a replay whose buffers or scalars
// differ sets only the nodes whose argument changed, so a time loop or a training step
// launches one graph per replay and makes none after its first. A single launch goes as it
// is; a driver without graphs, or KILN_CUDA_GRAPHS=0, issues the launches one by one.
class graph_batch final : public jit_batch {
public:
  graph_batch(jit_backend& be, std::shared_ptr<context> ctx)
      : jit_batch(be), ctx_(std::move(ctx)) {}
  graph_batch(const graph_batch&) = delete;
  graph_batch& operator=(const graph_batch&) = delete;
  ~graph_batch() override {
    for (kept& k : kept_)
      ctx_->destroy(k.g);
  }

private:
  struct kept {
    std::vector<std::uint64_t> key; // kernels, grids, argument sizes
    context::graph g;
    std::vector<std::byte> args; // the nodes' arguments as last set
  };
  static constexpr std::size_t keep = 4;

  void flush() override {
    static const bool enabled = settings::flag("KILN_CUDA_GRAPHS", true);
    if (launches.size() < 2 || !enabled || !ctx_->has_graphs()) return jit_batch::flush();
    key_.clear();
    args_.clear();
    at_.clear();
    nodes_.clear();
    for (const pending& l : launches) {
      const auto& k = static_cast<const cuda_kernel&>(*l.k);
      const launch_grid g = be_.grid_for(k, l.work);
      at_.push_back(args_.size());
      cuda_backend::pack(k, {buffers.data() + l.buffers, l.nbuffers},
                         {params.data() + l.params, l.nparams}, args_);
      nodes_.push_back({k.fn,
                        static_cast<unsigned>(g.x),
                        static_cast<unsigned>(g.y),
                        static_cast<unsigned>(k.workgroup),
                        {}});
      key_.push_back(reinterpret_cast<std::uintptr_t>(k.fn));
      key_.push_back(std::uint64_t(g.x) << 32 | std::uint64_t(g.y));
      key_.push_back(std::uint64_t(k.workgroup) << 32 | (args_.size() - at_.back()));
    }
    at_.push_back(args_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      nodes_[i].params = {args_.data() + at_[i], at_[i + 1] - at_[i]};
    for (std::size_t i = 0; i < kept_.size(); ++i)
      if (kept_[i].key == key_) {
        std::rotate(kept_.begin(), kept_.begin() + std::ptrdiff_t(i),
                    kept_.begin() + std::ptrdiff_t(i) + 1); // (most recent first)
        kept& k = kept_.front();
        k.key.clear(); // (not a match while half-set)
        for (std::size_t n = 0; n < nodes_.size(); ++n)
          if (std::memcmp(k.args.data() + at_[n], nodes_[n].params.data(),
                          nodes_[n].params.size()) != 0)
            ctx_->set_node(k.g, n, nodes_[n]);
        k.key = key_;
        k.args = args_;
        ctx_->launch(k.g);
        return;
      }
    if (kept_.size() < keep) kept_.emplace_back();
    std::rotate(kept_.begin(), kept_.end() - 1, kept_.end()); // the oldest, made again
    kept& k = kept_.front();
    ctx_->destroy(k.g);
    k.key.clear();
    k.g = ctx_->make_graph(nodes_);
    k.key = key_;
    k.args = args_;
    ctx_->launch(k.g);
  }

  std::shared_ptr<context> ctx_;
  std::vector<kept> kept_;
  std::vector<std::uint64_t> key_;
  std::vector<std::byte> args_;
  std::vector<std::size_t> at_;
  std::vector<context::graph_launch> nodes_;
};

inline std::unique_ptr<launch_batch> cuda_backend::make_batch() {
  return std::make_unique<graph_batch>(*this, ctx_);
}

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
  if (!nvrtc().ok())
    throw error("device", "device is not available",
                "cuda:" + std::to_string(index) + ": " + nvrtc().why_not);
  return cuda_backend::open(index);
}

} // namespace kiln::jit::cuda
