#pragma once
// The Vulkan backend: the shared body (backend/device_backend.hpp) over the runtime in
// context.hpp, with GLSL from glsl.hpp compiled to SPIR-V by shaderc (shaderc.hpp) and
// made into pipelines; src.hpp registers it as the provider of "vulkan:N".
#include "kiln/jit/backend/device_backend.hpp"
#include "kiln/jit/backend/launch_list.hpp"
#include "kiln/jit/vulkan/context.hpp"
#include "kiln/jit/vulkan/glsl_contract.hpp"
#include "kiln/jit/vulkan/glsl_reduce.hpp"
#include "kiln/jit/vulkan/shaderc.hpp"

#include <cstring>

namespace kiln::jit::vk {

inline bool validate_spirv_enabled() {
  static const bool on = settings::flag("KILN_VALIDATE_SPIRV");
  return on;
}

// An integer setting in [lo, hi], else `fallback`; a bad value is a kiln::error named after
// the variable (not "device", which backend_for would report as the allocating op).
inline std::uint32_t env_number(settings::key_of<settings::kind::integer> name,
                                std::uint32_t fallback, std::uint32_t lo, std::uint32_t hi) {
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
};

// A captured plan's run of launches, queued as one pre-recorded command buffer: the last
// few sets of launches (buffers, grids, inline parameters) are kept recorded, so a replay
// over the same memory (or alternating between a few, as a ping-pong time loop does)
// records nothing; anything else is recorded once more. Kernels that read their parameters
// from a buffer (a step with plan parameters runs such kernels: jit_backend::queue) take
// new values without a new recording: the queue writes them before the buffer executes.
class plan_batch final : public jit_batch {
public:
  plan_batch(jit_backend& be, std::shared_ptr<context> ctx) : jit_batch(be), ctx_(std::move(ctx)) {}
  plan_batch(const plan_batch&) = delete;
  plan_batch& operator=(const plan_batch&) = delete;
  ~plan_batch() override {
    for (variant& v : kept_)
      ctx_->drop(std::move(v.commands));
  }

private:
  struct variant {
    std::vector<std::uint64_t> key;
    context::recorded_commands commands;
  };
  static constexpr std::size_t keep = 4;
  static constexpr std::size_t max_update_bytes = 65536; // (vkCmdUpdateBuffer's limit)

  void flush() override {
    key_.clear();
    refs_.clear();
    grids_.clear();
    values_.clear();
    for (const pending& l : launches) {
      const launch_grid g = be_.grid_for(*l.k, l.work);
      grids_.emplace_back(static_cast<std::uint32_t>(g.x), static_cast<std::uint32_t>(g.y));
      key_.push_back(
          reinterpret_cast<std::uintptr_t>(static_cast<const vulkan_kernel&>(*l.k).pipe.get()));
      key_.push_back(std::uint64_t{grids_.back().first} << 32 | grids_.back().second);
      key_.push_back(std::uint64_t{l.nbuffers} << 32 | l.nparams);
      for (std::uint32_t i = 0; i < l.nbuffers; ++i) {
        const auto* b = static_cast<const block*>(buffers[l.buffers + i].handle);
        refs_.push_back({b});
        key_.push_back(reinterpret_cast<std::uintptr_t>(b->owner->buffer));
        key_.push_back(b->offset);
        key_.push_back(b->bytes);
      }
      const std::span<const std::byte> p(params.data() + l.params, l.nparams);
      if (l.k->layout.in_buffer) {
        values_.push_back(p);
        if (p.size() <= max_update_bytes) continue; // (written by the queue: not in the key)
      }
      const std::size_t at = key_.size();
      key_.resize(at + (l.nparams + 7) / 8, 0);
      std::memcpy(key_.data() + at, p.data(), p.size());
    }
    for (std::size_t i = 0; i < kept_.size(); ++i)
      if (kept_[i].key == key_ && ctx_->current(kept_[i].commands)) {
        std::rotate(kept_.begin(), kept_.begin() + std::ptrdiff_t(i),
                    kept_.begin() + std::ptrdiff_t(i) + 1); // (most recent first)
        ctx_->execute(kept_.front().commands, values_);
        return;
      }
    cmds_.clear();
    for (std::size_t k = 0, r = 0; k < launches.size(); ++k) {
      const pending& l = launches[k];
      cmds_.push_back({static_cast<const vulkan_kernel&>(*l.k).pipe.get(),
                       {refs_.data() + r, l.nbuffers},
                       {params.data() + l.params, l.nparams},
                       grids_[k].first,
                       grids_[k].second});
      r += l.nbuffers;
    }
    if (kept_.size() < keep) kept_.emplace_back();
    std::rotate(kept_.begin(), kept_.end() - 1, kept_.end()); // the oldest, re-recorded
    variant& v = kept_.front();
    v.key.clear(); // (not a match while half-recorded)
    ctx_->record_commands(v.commands, cmds_);
    v.key = key_;
    ctx_->execute(v.commands);
  }

  std::shared_ptr<context> ctx_;
  std::vector<variant> kept_;
  std::vector<std::uint64_t> key_;
  std::vector<buffer_ref> refs_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> grids_;
  std::vector<std::span<const std::byte>> values_; // buffer parameters, in launch order
  std::vector<context::dispatch_cmd> cmds_;
};

class vulkan_backend final : public device_backend<vulkan_backend, context, block> {
public:
  using kernel_type = vulkan_kernel;
  static constexpr const char* source_extension = "comp";
  static constexpr const char* dialect_name = "GLSL";

  vulkan_backend(int index)
      : device_backend(index, context::get(index)), max_push_(ctx_->max_push_bytes()),
        max_buffers_(static_cast<int>(ctx_->max_buffers_per_kernel())) {
    const auto& info = ctx_->info();
    // The driver's pipeline cache, from kiln's disk cache where an earlier run saved one.
    if (auto blob = shared_disk_cache().load(pipeline_cache_key(), pipeline_cache_identity()))
      ctx_->seed_pipeline_cache(*blob);
    // Launch shape of elementwise kernels, tunable: KILN_VK_WORKGROUP (invocations per
    // workgroup), KILN_VK_MAX_GROUPS (past it, invocations loop over several elements).
    workgroup_ = env_number("KILN_VK_WORKGROUP", 64, 1,
                            std::min<std::uint32_t>(info.limits.max_workgroup_size_x,
                                                    static_cast<std::uint32_t>(max_workgroup)));
    // A CPU implementation runs workgroups on a few threads, each with a fixed cost: a few
    // hundred groups that loop over elements were ~1.6x faster on lavapipe than one
    // element per invocation (bench/RESULTS.md).
    const std::uint32_t groups = info.identity.cpu ? 256u : 65535u;
    // The device in the tuning database: vendor, device, driver, pipeline-cache UUID, name.
    char ids[64];
    std::snprintf(ids, sizeof ids, "vulkan %04x:%04x driver %u uuid ", info.identity.vendor_id,
                  info.identity.device_id, info.identity.driver_version);
    tuning_identity_ = ids;
    for (auto b : info.identity.pipeline_cache_uuid) {
      std::snprintf(ids, sizeof ids, "%02x", b);
      tuning_identity_ += ids;
    }
    tuning_identity_ += " " + info.name;
    groups_cap_ = env_number("KILN_VK_MAX_GROUPS",
                             std::min<std::uint32_t>(info.limits.max_workgroup_count_x, groups), 1,
                             info.limits.max_workgroup_count_x);
  }

  kiln::device device() const override { return {device_kind::vulkan, index_}; }
  std::string describe() const override { return ctx_->describe(); }
  const std::string& tuning_identity() const override { return tuning_identity_; }
  tune::device_limits tuning_limits() const override {
    const auto& info = ctx_->info();
    tune::device_limits l;
    l.max_workgroup = std::min(info.limits.max_workgroup_size_x,
                               std::max<std::uint32_t>(info.limits.max_workgroup_invocations, 1));
    l.max_groups = info.limits.max_workgroup_count_x;
    l.shared_bytes = 16384; // the least every Vulkan device has (maxComputeSharedMemorySize)
    l.cpu = info.identity.cpu;
    if (info.limits.subgroup_shuffle) l.subgroup = info.limits.subgroup_size;
    return l;
  }
  std::string cannot_run(const std::array<bool, 9>& used) const override {
    return missing_feature(ctx_->info().features, used);
  }
  std::uint32_t max_inline_params() const override { return max_push_; }
  bool records_inline_params() const override { return true; }
  int max_buffers() const override { return max_buffers_; }
  grid_limits launch_limits() const override {
    const auto& l = ctx_->info().limits;
    return {l.max_workgroup_count_x, std::max<std::uint32_t>(l.max_workgroup_count_y, 1),
            groups_cap_};
  }
  bool device_timer() const override { return ctx_->has_timer(); }
  void timer_begin() override { ctx_->timer_begin(); }
  double timer_end_ns() override { return ctx_->timer_end_ns(); }

  std::unique_ptr<launch_batch> make_batch() override {
    return std::make_unique<plan_batch>(*this, ctx_);
  }
  // Pre-recorded command buffers executed, and recorded, so far (tests).
  std::pair<std::uint64_t, std::uint64_t> prerecorded() const { return ctx_->prerecorded(); }

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

  // --- what device_backend asks of a backend
  std::string generate(const kernel_ir& ir, const param_layout& l, const pass_shape& s) const {
    return glsl::generate(ir, l, s);
  }
  std::string generate_reduction(const kernel_ir& ir, const param_layout& l,
                                 const reduce_spec& r) const {
    return glsl::generate_reduction(ir, l, r);
  }
  std::string generate_contraction(const kernel_ir& ir, const param_layout& l,
                                   const contract_spec& c) const {
    return glsl::generate_contraction(ir, l, c);
  }
  std::int64_t workgroup_size() const { return workgroup_; }
  hash128 cache_key(std::string_view source) const {
    const glsl_compiler& cc = glsl_compiler::instance();
    const auto& id = ctx_->info().identity;
    kernel_key_inputs in;
    in.source = source;
    in.options = cc.options();
    in.compiler_version = cc.version();
    in.vendor_id = id.vendor_id;
    in.device_id = id.device_id;
    in.driver_version = id.driver_version;
    std::memcpy(in.pipeline_cache_uuid.data(), id.pipeline_cache_uuid.data(), 16);
    in.kiln_version = kiln_version;
    return kernel_cache_key(in);
  }
  std::string cache_identity() const { return "spirv " + ctx_->info().name; }
  compiled_binary compile_source(const std::string& source) const {
    glsl_compiler& cc = glsl_compiler::instance();
    auto m = cc.compile(source);
    const auto bytes = std::as_bytes(std::span(m.words));
    return {{bytes.begin(), bytes.end()}, m.compile_ms, cc.path_name()};
  }
  // SPIR-V words (checked with spirv-val under KILN_VALIDATE_SPIRV=1) into a pipeline.
  bool load(vulkan_kernel& k, std::span<const std::byte> binary, bool from_disk,
            const std::string& source) {
    std::vector<std::uint32_t> words(binary.size() / 4);
    if (!words.empty()) std::memcpy(words.data(), binary.data(), words.size() * 4);
    if (binary.size() % 4 != 0 || words.empty() || words[0] != 0x07230203u) {
      if (from_disk) return false;
      throw error("jit", "the GLSL compiler returned no SPIR-V module",
                  std::to_string(binary.size()) + " bytes");
    }
    if (validate_spirv_enabled()) {
      const auto [ok, message] = validate_spirv(words);
      if (!ok)
        throw error("jit", "generated SPIR-V fails spirv-val",
                    message + "\n" + glsl::numbered(source));
    }
    const param_layout& layout = k.layout;
    k.pipe =
        ctx_->make_pipeline(words,
                            kernel_layout{static_cast<std::uint32_t>(layout.buffers),
                                          layout.in_buffer ? 0u : layout.bytes, layout.in_buffer},
                            static_cast<std::uint32_t>(k.workgroup),
                            source.find(kernels::glsl::subgroup_extensions) != std::string::npos);
    save_pipeline_cache();
    return true;
  }

private:
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

  std::size_t saved_pipeline_cache_ = 0;
  std::string tuning_identity_;
  std::uint32_t max_push_;
  int max_buffers_;
  std::uint32_t groups_cap_ = 65535;
  std::uint32_t workgroup_ = 64;
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

inline std::shared_ptr<backend> open_vulkan(int index) { return vulkan_backend::open(index); }

} // namespace kiln::jit::vk
