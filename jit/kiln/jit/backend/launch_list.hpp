#pragma once
// A captured plan's launches on a JIT device (executor.hpp's launch_record and launch_batch).
// While a step is captured, each launch it queues is noted with its buffers named by the
// step's storages (or by memory the launches made for themselves, which the record keeps);
// a replay appends them, buffers and scalars renewed, to the plan's batch, which queues them
// one by one (a recorded launch list: CUDA, Metal) or, on Vulkan, as one pre-recorded
// command buffer (vulkan/backend.hpp).
#include "kiln/jit/backend/jit_backend.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::jit {

// Launches appended by a replay, not yet queued.
class jit_batch : public launch_batch {
public:
  struct pending {
    const kernel* k;
    std::uint32_t buffers, nbuffers, params, nparams; // into the vectors below
    launch_work work;
  };
  explicit jit_batch(jit_backend& be) : be_(be) {}
  void finish() override {
    if (launches.empty()) return;
    try {
      flush();
    } catch (...) {
      clear();
      throw;
    }
    clear();
  }
  void clear() noexcept override {
    launches.clear();
    buffers.clear();
    params.clear();
  }
  std::vector<pending> launches;
  std::vector<buffer_arg> buffers;
  std::vector<std::byte> params;

protected:
  virtual void flush() {
    for (const pending& l : launches)
      be_.launch(*l.k, {buffers.data() + l.buffers, l.nbuffers},
                 {params.data() + l.params, l.nparams}, l.work);
  }
  jit_backend& be_;
};

class jit_record final : public launch_record {
public:
  jit_record(jit_backend& be, std::span<const storage* const> bound, bool buffer_params)
      : be_(be), bound_(bound), buffer_params_(buffer_params) {}
  jit_record(const jit_record&) = delete;
  jit_record& operator=(const jit_record&) = delete;
  ~jit_record() override {
    for (void* t : owned_)
      be_.release(t);
  }

  void replay(launch_batch& b, std::span<const storage* const> bound,
              std::span<const std::uint64_t> scalars) const override {
    auto& jb = static_cast<jit_batch&>(b);
    for (const noted& l : launches_) {
      const auto at = static_cast<std::uint32_t>(jb.params.size());
      jb.launches.push_back(
          {l.k, static_cast<std::uint32_t>(jb.buffers.size()), l.nbuffers, at, l.nparams, l.work});
      for (std::uint32_t i = 0; i < l.nbuffers; ++i) {
        const buffer& x = buffers_[l.buffers + i];
        jb.buffers.push_back({x.bound >= 0 ? bound[std::size_t(x.bound)]->handle() : x.fixed});
      }
      jb.params.insert(jb.params.end(), params_.begin() + l.params,
                       params_.begin() + l.params + l.nparams);
      const param_layout& pl = l.k->layout;
      const std::size_t n =
          std::min<std::size_t>({std::size_t(l.scalars), pl.scalars.size(), scalars.size()});
      for (std::size_t k = 0; k < n; ++k)
        std::memcpy(jb.params.data() + at + pl.scalar_offset[k], &scalars[k],
                    param_layout::scalar_size(pl.scalars[k]));
    }
  }

  // --- while capturing (jit_backend::queue, temp, drop_temp)
  void note(const jit_backend& be, const kernel& k, std::span<const buffer_arg> bufs,
            std::span<const std::byte> params, const launch_work& w, std::uint32_t scalars) {
    if (&be != &be_) {
      failed_ = true; // another device's work: not this step's to replay
      return;
    }
    launches_.push_back({&k, static_cast<std::uint32_t>(buffers_.size()),
                         static_cast<std::uint32_t>(bufs.size()),
                         static_cast<std::uint32_t>(params_.size()),
                         static_cast<std::uint32_t>(params.size()), scalars, w});
    for (const buffer_arg& a : bufs) {
      buffer x{-1, a.handle};
      for (std::size_t i = 0; i < bound_.size() && x.bound < 0; ++i)
        if (bound_[i]->handle() == a.handle) x.bound = static_cast<std::int32_t>(i);
      if (x.bound < 0 && std::find(owned_.begin(), owned_.end(), a.handle) == owned_.end())
        failed_ = true; // memory the plan does not know stays alive
      buffers_.push_back(x);
    }
    params_.insert(params_.end(), params.begin(), params.end());
  }
  bool owns(const jit_backend& be, void* p) const {
    return &be == &be_ && std::find(owned_.begin(), owned_.end(), p) != owned_.end();
  }
  bool of(const jit_backend& be) const { return &be == &be_; }
  bool buffer_params(const jit_backend& be) const { return buffer_params_ && of(be); }
  void own(void* p) { owned_.push_back(p); }
  bool failed() const { return failed_; }

private:
  struct buffer {
    std::int32_t bound; // >= 0: bound[bound]'s memory at the replay
    void* fixed;        // else this memory (the record's own)
  };
  struct noted {
    const kernel* k; // (kept by its lowering, for the program's life)
    std::uint32_t buffers, nbuffers, params, nparams;
    std::uint32_t scalars; // leading kernel scalars that are the pass's (leaf table order)
    launch_work work;
  };
  jit_backend& be_;
  std::span<const storage* const> bound_; // (the capture's; not kept past it)
  std::vector<noted> launches_;
  std::vector<buffer> buffers_;
  std::vector<std::byte> params_;
  std::vector<void*> owned_;
  bool buffer_params_; // its kernels read their parameters from a buffer
  bool failed_ = false;
};

// The record of the step this thread is capturing, if any.
inline jit_record*& recording_launches() {
  thread_local jit_record* r = nullptr;
  return r;
}

inline void jit_backend::queue(const kernel& k, std::span<const buffer_arg> buffers,
                               std::span<const std::byte> params, const launch_work& w,
                               std::uint32_t pass_scalars) {
  if (jit_record* r = recording_launches()) [[unlikely]]
    r->note(*this, k, buffers, params, w, pass_scalars);
  launch(k, buffers, params, w);
}

inline void* jit_backend::temp(std::size_t bytes) {
  void* p = allocate(bytes);
  if (jit_record* r = recording_launches(); r && r->of(*this)) [[unlikely]]
    r->own(p);
  return p;
}

inline void jit_backend::drop_temp(void* p) noexcept {
  if (jit_record* r = recording_launches(); r && r->owns(*this, p)) [[unlikely]]
    return; // the record keeps it: its replays write it again
  release(p);
}

inline std::uint32_t jit_backend::inline_param_limit() const {
  const jit_record* r = recording_launches();
  return r && r->buffer_params(*this) ? 0 : max_inline_params();
}

inline const void* jit_backend::state_owner() const {
  const jit_record* r = recording_launches();
  // (one byte into the backend: an address no other owner has)
  return r && r->buffer_params(*this)
             ? static_cast<const void*>(reinterpret_cast<const char*>(this) + 1)
             : static_cast<const void*>(this);
}

inline std::unique_ptr<launch_record>
jit_backend::record_launches(void (*run)(void*), void* data, std::span<const storage* const> bound,
                             bool parameters) {
  jit_record*& now = recording_launches();
  if (now) { // (inside another step's capture: that one records)
    run(data);
    return nullptr;
  }
  auto rec = std::make_unique<jit_record>(*this, bound, parameters && records_inline_params());
  now = rec.get();
  try {
    run(data);
  } catch (...) {
    now = nullptr;
    throw;
  }
  now = nullptr;
  if (rec->failed()) return nullptr;
  return rec;
}

inline std::unique_ptr<launch_batch> jit_backend::make_batch() {
  return std::make_unique<jit_batch>(*this);
}

} // namespace kiln::jit
