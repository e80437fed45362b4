#pragma once
// What the rest of the library asks of a capture (kiln::capture, plan/capture.hpp): whether
// this thread is recording a plan, and the two things a statement tells it that are not a
// step (recording.hpp): a storage it made, and that it cannot be replayed.
#include "kiln/linkage.hpp"

#include <memory>

namespace kiln {
class storage;
}

namespace kiln::detail {

class plan_recording;

// The recording this thread is making, or null (one load: every allocation asks).
inline plan_recording*& recording_now() noexcept {
  thread_local plan_recording* r = nullptr;
  return r;
}

// A storage made while this thread captures: the plan keeps it where a step uses it (the
// plan's arena of temporaries).
KILN_CORE_INLINE void note_made_storage(const std::shared_ptr<storage>& s);

// A storage kiln makes once and never writes again (autodiff's shared zero): a captured
// function's steps may read it, though neither an argument nor made by the function.
KILN_CORE_INLINE void note_constant_storage(std::shared_ptr<storage> s);

// No recording for a scope: what kiln makes once for the whole program (a constant) is not
// part of the statement that first needed it.
class recording_pause {
public:
  recording_pause() noexcept : saved_(recording_now()) { recording_now() = nullptr; }
  ~recording_pause() { recording_now() = saved_; }
  recording_pause(const recording_pause&) = delete;
  recording_pause& operator=(const recording_pause&) = delete;

private:
  plan_recording* saved_;
};

// What a statement a plan cannot replay (it reads values on the host, or writes host data
// a replay would not write again) says when it runs inside a captured function.
[[noreturn]] KILN_CORE_INLINE void refuse_in_capture(const char* op, const char* why);
inline void refuse_if_capturing(const char* op, const char* why) {
  if (recording_now() != nullptr) [[unlikely]]
    refuse_in_capture(op, why);
}

} // namespace kiln::detail
