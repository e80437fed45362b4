#pragma once
// The Vulkan backend as kiln sees it: kiln::backend (memory, copies, waiting) and
// jit_backend (limits, compile, launch) over the runtime in vulkan/, with GLSL from
// glsl.hpp compiled by shaderc. Compiled SPIR-V is kept in memory (single-flight) and on
// disk (KILN_CACHE_DIR); the backend registers itself as the provider of "vulkan:N".
#include "kiln/jit/cache_key.hpp"
#include "kiln/jit/disk_cache.hpp"
#include "kiln/jit/glsl_reduce.hpp"
#include "kiln/jit/jit_backend.hpp"
#include "kiln/jit/kernel_cache.hpp"
#include "kiln/jit/shaderc.hpp"
#include "kiln/jit/vk/context.hpp"

#include <chrono>
#include <cstring>
#include <map>

namespace kiln::jit::vk {

inline bool validate_spirv_enabled() {
  static const bool on = settings::flag("KILN_VALIDATE_SPIRV");
  return on;
}

// An integer setting in [lo, hi], else `fallback`; a bad value is a kiln::error named after
// the variable (not "device", which backend_for would report as the allocating op).
inline std::uint32_t env_number(const char* name, std::uint32_t fallback, std::uint32_t lo,
                                std::uint32_t hi) {
  return static_cast<std::uint32_t>(settings::integer(name, fallback, lo, hi));
}

// Why a device with these features cannot run a kernel using these dtypes ("" if it can).
inline std::string missing_feature(const device_features& f, const std::array<bool, 9>& used) {
  auto u = [&](dtype d) { return used[static_cast<int>(d)]; };
  if (u(dtype::f64) && !f.f64) return "f64 needs shaderFloat64, which this device lacks";
  if (u(dtype::i64) && !f.i64) return "i64 needs shaderInt64, which this device lacks";
  if ((u(dtype::f16) || u(dtype::bf16)) && !f.storage_buffer_16bit)
    return "16-bit floats need storageBuffer16BitAccess, which this device lacks";
  if ((u(dtype::b8) || u(dtype::u8)) && !(f.storage_buffer_8bit && f.i8))
    return "bool and u8 need storageBuffer8BitAccess and shaderInt8, which this device lacks";
  return {};
}

struct vulkan_kernel : kernel {
  vulkan_kernel(const kernel_ir& ir, param_layout l) : kernel(ir, std::move(l)) {}
  std::shared_ptr<pipeline> pipe;
  std::uint32_t workgroup = 64;
};

class vulkan_backend final : public jit_backend {
public:
  vulkan_backend(int index, std::shared_ptr<context> ctx)
      : index_(index), ctx_(std::move(ctx)), max_push_(ctx_->max_push_bytes()),
        max_buffers_(static_cast<int>(ctx_->max_buffers_per_kernel())) {
    const auto& info = ctx_->info();
    // Launch shape of elementwise kernels, tunable: KILN_VK_WORKGROUP (invocations per
    // workgroup), KILN_VK_MAX_GROUPS (past it, invocations loop over several elements).
    // The driver's pipeline cache, from kiln's disk cache where an earlier run saved one.
    if (auto blob = shared_disk_cache().load(pipeline_cache_key(), pipeline_cache_identity()))
      ctx_->seed_pipeline_cache(*blob);
    workgroup_ = env_number("KILN_VK_WORKGROUP", 64, 1,
                            std::min<std::uint32_t>(info.limits.max_workgroup_size_x,
                                                    static_cast<std::uint32_t>(max_workgroup)));
    // A CPU implementation runs workgroups on a few threads, each with a fixed cost: a few
    // hundred groups that loop over elements were ~1.6x faster on lavapipe than one
    // element per invocation (bench/RESULTS.md).
    const std::uint32_t groups = info.identity.cpu ? 256u : 65535u;
    groups_cap_ = env_number("KILN_VK_MAX_GROUPS",
                             std::min<std::uint32_t>(info.limits.max_workgroup_count_x, groups), 1,
                             info.limits.max_workgroup_count_x);
  }

  kiln::device device() const override { return {device_kind::vulkan, index_}; }
  std::string describe() const override { return ctx_->describe(); }
  std::string unsupported(dtype d) const override {
    std::array<bool, 9> used{};
    used[static_cast<int>(d)] = true;
    return cannot_run(used);
  }
  std::string cannot_run(const std::array<bool, 9>& used) const override {
    return missing_feature(ctx_->info().features, used);
  }

  // --- memory: a handle is a heap-held block of the context's arena
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
  std::uint32_t max_inline_params() const override { return max_push_; }
  int max_buffers() const override { return max_buffers_; }

  std::shared_ptr<kernel> compile(const kernel_ir& ir) override {
    param_layout layout(ir, max_push_);
    const std::string source = glsl::generate(ir, layout);
    return kernels_.get(source, [&] { return make_kernel(ir, layout, source, workgroup_); });
  }

  std::shared_ptr<kernel> compile_reduction(const kernel_ir& ir, const reduce_spec& r) override {
    param_layout layout(ir, max_push_, reduce_extras);
    const std::string source = glsl::generate_reduction(ir, layout, r);
    return kernels_.get(
        source, [&] { return make_kernel(ir, layout, source, kernels::reduce_group_size); });
  }

  grid_limits launch_limits() const override {
    const auto& l = ctx_->info().limits;
    return {l.max_workgroup_count_x, std::max<std::uint32_t>(l.max_workgroup_count_y, 1),
            groups_cap_};
  }
  std::int64_t workgroup(const kernel& k) const override {
    return static_cast<const vulkan_kernel&>(k).workgroup;
  }

  void launch(const kernel& k, std::span<const buffer_arg> buffers,
              std::span<const std::byte> params, const launch_work& w) override {
    const auto& vk = static_cast<const vulkan_kernel&>(k);
    std::array<buffer_ref, 64> refs;
    if (buffers.size() > refs.size())
      throw error("launch", "too many buffers", std::to_string(buffers.size()));
    for (std::size_t i = 0; i < buffers.size(); ++i)
      refs[i] = buffer_ref{static_cast<const block*>(buffers[i].handle)};
    const launch_grid g = grid_for(k, w);
    ctx_->dispatch(*vk.pipe, std::span(refs.data(), buffers.size()), params,
                   static_cast<std::uint32_t>(g.x), static_cast<std::uint32_t>(g.y));
  }

  const std::shared_ptr<context>& ctx() const { return ctx_; }

private:
  std::shared_ptr<kernel> make_kernel(const kernel_ir& ir, const param_layout& layout,
                                      const std::string& source, std::uint32_t workgroup) {
    const auto t0 = std::chrono::steady_clock::now();
    dump_kernel(source, "comp");
    glsl_compiler& cc = glsl_compiler::instance();
    const auto& info = ctx_->info();
    kernel_key_inputs in;
    in.source = source;
    in.options = cc.options();
    in.compiler_version = cc.version();
    in.vendor_id = info.identity.vendor_id;
    in.device_id = info.identity.device_id;
    in.driver_version = info.identity.driver_version;
    std::memcpy(in.pipeline_cache_uuid.data(), info.identity.pipeline_cache_uuid.data(), 16);
    in.kiln_version = kiln_version;
    const hash128 key = kernel_cache_key(in);
    const std::string identity = "spirv " + info.name;
    std::vector<std::uint32_t> words;
    bool hit = false;
    if (auto bytes = shared_disk_cache().load(key, identity);
        bytes && bytes->size() % 4 == 0 && !bytes->empty()) {
      words.resize(bytes->size() / 4);
      std::memcpy(words.data(), bytes->data(), bytes->size());
      hit = words[0] == 0x07230203u;
      if (hit) ++disk_hit_count();
    }
    double compile_ms = 0;
    if (!hit) {
      auto m = cc.compile(source);
      words = std::move(m.words);
      compile_ms = m.compile_ms;
      shared_disk_cache().store(key, identity, std::as_bytes(std::span(words)));
      ++compile_count();
    }
    if (validate_spirv_enabled()) { // KILN_VALIDATE_SPIRV=1: every module through spirv-val
      const auto [ok, message] = validate_spirv(words);
      if (!ok)
        throw error("jit", "generated SPIR-V fails spirv-val",
                    message + "\n" + glsl::numbered(source));
    }
    auto k = std::make_shared<vulkan_kernel>(ir, layout);
    k->workgroup = workgroup;
    k->pipe =
        ctx_->make_pipeline(words,
                            kernel_layout{static_cast<std::uint32_t>(layout.buffers),
                                          layout.in_buffer ? 0u : layout.bytes, layout.in_buffer},
                            k->workgroup);
    k->from_cache = hit;
    save_pipeline_cache();
    k->compile_ms = ms_since(t0);
    log(std::string(hit ? "disk cache hit " : "compiled ") + key.hex() + " in " +
        std::to_string(k->compile_ms) + " ms" +
        (hit ? "" : " (" + cc.path_name() + " " + std::to_string(compile_ms) + " ms)") + ", " +
        std::to_string(ir.code.size()) + " instructions, " + std::to_string(layout.buffers) +
        " buffers, params " + std::to_string(layout.bytes) + " B in " +
        (layout.in_buffer ? "a buffer" : "push constants"));
    return k;
  }

  std::string pipeline_cache_identity() const { return "VkPipelineCache " + ctx_->info().name; }
  hash128 pipeline_cache_key() const {
    const auto& id = ctx_->info().identity;
    hasher h;
    h.add(std::string_view("kiln VkPipelineCache")).add(kiln_version);
    h.add(id.vendor_id).add(id.device_id).add(id.driver_version);
    for (auto b : id.pipeline_cache_uuid)
      h.add(b);
    return h.digest();
  }
  // Saved when the driver filled it with more than its header (not on lavapipe).
  void save_pipeline_cache() {
    const auto blob = ctx_->pipeline_cache_data();
    if (blob.size() <= 32 || blob.size() == saved_pipeline_cache_) return;
    shared_disk_cache().store(pipeline_cache_key(), pipeline_cache_identity(), blob);
    saved_pipeline_cache_ = blob.size();
    log("saved the driver's pipeline cache, " + std::to_string(blob.size()) + " bytes");
  }

  int index_;
  std::size_t saved_pipeline_cache_ = 0;
  std::shared_ptr<context> ctx_;
  std::uint32_t max_push_;
  int max_buffers_;
  std::uint32_t groups_cap_ = 65535;
  std::uint32_t workgroup_ = 64;
  single_flight<std::shared_ptr<kernel>> kernels_;
};

inline std::vector<device_info> list_vulkan_devices() {
  std::string why;
  const auto devs = enumerate_devices(&why);
  std::vector<device_info> out;
  for (std::size_t i = 0; i < devs.size(); ++i)
    out.push_back(
        {kiln::device(device_kind::vulkan, static_cast<int>(i)), true, devs[i].name + " (Vulkan)"});
  if (out.empty())
    out.push_back({kiln::device(device_kind::vulkan, 0), false,
                   why.empty() ? "no Vulkan device with compute found" : why});
  return out;
}

inline std::shared_ptr<backend> open_vulkan(int index) {
  static std::mutex m;
  static std::map<int, std::shared_ptr<vulkan_backend>> open;
  std::lock_guard lock(m);
  auto& b = open[index];
  if (!b) b = std::make_shared<vulkan_backend>(index, context::get(index));
  return b;
}

inline const bool vulkan_registered =
    register_backend({device_kind::vulkan, list_vulkan_devices, open_vulkan});

} // namespace kiln::jit::vk
