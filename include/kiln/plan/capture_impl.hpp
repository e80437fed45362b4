#pragma once
// A plan's untyped part (declared in capture.hpp; see kiln/linkage.hpp for where it is
// compiled).
#include "kiln/plan/capture.hpp"
#include "kiln/plan/recording_impl.hpp"

#include <algorithm>

namespace kiln::detail {

KILN_CORE_INLINE plan_core::~plan_core() = default;

KILN_CORE_INLINE plan_recording* plan_core::find(std::span<const bound_argument> args,
                                                 const void* sig) {
  if (last_ && last_->signature() == sig && last_->replays(args)) return last_;
  for (std::size_t i = 0; i < recordings_.size(); ++i)
    if (recordings_[i]->signature() == sig && recordings_[i]->replays(args)) {
      std::rotate(recordings_.begin() + std::ptrdiff_t(i),
                  recordings_.begin() + std::ptrdiff_t(i) + 1,
                  recordings_.end()); // most recently used last
      return last_ = recordings_.back().get();
    }
  return nullptr;
}

KILN_CORE_INLINE void plan_core::may_capture(std::span<const bound_argument> args,
                                             const void* sig) const {
  if (recordings_.empty()) return;
  const plan_recording& r = *recordings_.back();
  std::string why = "the call's argument types differ from the capture's";
  int d = 2;
  if (r.signature() == sig) d = r.matches(args, &why);
  if (d == 1 && options_.shapeless) return;
  throw error("plan " + name(), "the call does not match the captured plan",
              why + (d == 1 ? "; a plan captured with kiln::capture_options{.shapeless = "
                              "true} replays other extents"
                            : ""));
}

KILN_CORE_INLINE plan_recording& plan_core::keep(recording_ptr r) {
  if (recordings_.size() == 8) recordings_.erase(recordings_.begin());
  recordings_.push_back(std::move(r));
  return *(last_ = recordings_.back().get());
}

KILN_CORE_INLINE void plan_core::refuse_running() const {
  throw error("plan " + name(), "the plan is already running",
              "a plan runs one call at a time: called from another thread while it runs, "
              "or from inside its own function; capture one plan per thread");
}

} // namespace kiln::detail
