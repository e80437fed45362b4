#pragma once
// The numbers an optimizer computes on the host for each step (its learning rate, Adam's bias
// corrections), kept in cells its update expressions read as plan parameters (kiln::param),
// so that a captured training step (kiln::capture) replays them as they evolve: the host
// code that advances them is recorded as a step of the plan, and the plan shares the cells.
// Without a capture they are plain scalars of the update.
#include "kiln/plan/recording.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>

namespace kiln::optim::detail {

template <element T, std::size_t N>
class step_values {
public:
  long steps = 0;
  void set(std::size_t i, double v) {
    const T x = T(v);
    std::memcpy(&cells_[i], &x, sizeof x);
  }
  // Value i as an operand of an update: read from its cell at every replay.
  scalar_expr<T> operator[](std::size_t i) const {
    T x;
    std::memcpy(&x, &cells_[i], sizeof x);
    return scalar_expr<T>(x, reinterpret_cast<const T*>(&cells_[i]));
  }

private:
  std::array<std::uint64_t, N> cells_{}; // (bits, as a plan's parameter cells hold them)
};

// Runs `advance` on values now and, where this thread captures a plan, at every replay; the
// plan's step shares the values (an optimizer copied or gone leaves the plan's own).
template <class V, class F>
void advance_step(const std::shared_ptr<V>& values, F advance) {
  advance(*values);
  if (kiln::detail::recording_now() != nullptr)
    kiln::detail::record_host_call([values, advance] { advance(*values); });
}

// A captured plan may use what an optimizer owns and updates (its parameters and state).
template <element T>
void adopt_all(const std::vector<tensor<T>>& ts) {
  for (const tensor<T>& t : ts)
    kiln::detail::adopt_for_plan(t);
}

} // namespace kiln::optim::detail
