#pragma once
// How an elementwise kernel walks its elements: the elementwise family's parameters that
// change the generated code or its launch (jit/tune/families.hpp). Each invocation takes
// `per_invocation` units per trip of its grid-stride loop, a grid's sweep apart (more
// independent work in flight), and a unit is `vector` adjacent elements (loaded as one
// vector where the dialect has aligned loads and the operands allow). 1 and 1 are the
// plain loop, one element per trip.
#include <compare>
#include <cstdint>
#include <string>

namespace kiln::jit {

struct pass_shape {
  std::int64_t workgroup = 0; // invocations per workgroup; 0: the backend's default
  int per_invocation = 1;     // units per trip of the loop
  int vector = 1;             // adjacent elements per unit
  friend auto operator<=>(const pass_shape&, const pass_shape&) = default;
  bool plain() const { return per_invocation == 1 && vector == 1; }

  // Units of work the launch spreads over invocations, and loop iterations each costs
  // (the inner loops' included: llvmpipe counts them against its limit, launch_grid.hpp).
  std::int64_t units(std::int64_t n) const {
    const std::int64_t vectors = (n + vector - 1) / vector;
    return (vectors + per_invocation - 1) / per_invocation;
  }
  std::int64_t cost() const { return plain() ? 1 : 1 + per_invocation * (1 + vector); }
  // What the kernel caches add to a source's key (the workgroup is not in the source).
  std::string key() const { return std::to_string(workgroup); }
};

} // namespace kiln::jit
