#pragma once
// What a contraction kernel computes, for the code generators, and how its tiles are laid
// over the launch (kernels/kiln/kernels/contract_template.hpp): the lowered IR's two results
// are the operands' values in the accumulator type over the dims (batch..., m, n, k); the
// kernel stores the product in the result's dtype.
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/launch_grid.hpp"
#include "kiln/kernels/contract_template.hpp"

namespace kiln::jit {

// Index fields after n in a contraction kernel's parameters: M, N, K, tiles per row of
// tiles, tiles per batch element, tiles in all (P.x0 .. P.x5).
inline constexpr int contract_extras = 6;

struct contract_spec {
  dtype acc;      // accumulator dtype (the operands' values arrive in it)
  dtype result;   // the product's dtype
  int batch_rank; // the IR's leading batch dims
  kernels::contraction_tile tile;
  // With an epilogue (the IR has more than two results): the input whose loads are the
  // product (-1: none).
  int product = -1;
  bool epilogue(const kernel_ir& ir) const { return ir.results.size() > 2; }
};

// The IR of the kernel: the operands' values (results 0 and 1) over the inputs, then the
// epilogue's outputs (results 2...), or else one output, the product.
inline kernel_ir contract_ir(kernel_ir operands, const contract_spec& s) {
  if (!s.epilogue(operands))
    operands.outputs = {s.result};
  else // (lowered with the operands' values as outputs 0 and 1)
    operands.outputs.erase(operands.outputs.begin(), operands.outputs.begin() + 2);
  return operands;
}

struct contract_plan {
  std::int64_t tiles_n = 0, per_batch = 0, units = 0;
  launch_work work;
  bool fits = false; // one tile's K walk stays within the loop budget
};

inline contract_plan plan_contraction(std::int64_t batch, std::int64_t m, std::int64_t n,
                                      std::int64_t k, const kernels::contraction_tile& t) {
  contract_plan p;
  p.tiles_n = (n + t.tn - 1) / t.tn;
  p.per_batch = (m + t.tm - 1) / t.tm * p.tiles_n;
  p.units = batch * p.per_batch;
  // The tile walk's trip and the K walk's (the kernel's only loops).
  p.work = {p.units, true, 1 + (k + t.tk - 1) / t.tk};
  p.fits = p.work.cost <= loop_budget;
  return p;
}

} // namespace kiln::jit
