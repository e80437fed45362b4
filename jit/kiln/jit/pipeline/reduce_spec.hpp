#pragma once
// What a reduction kernel computes, for the code generators: which reduction, the dtypes
// of its values, accumulator and result, and which kernel template (see kernels/).
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::jit {

// The kernel templates of kernels/kiln/kernels/reduce_template.hpp.
enum class reduce_stage : std::uint8_t {
  thread,  // an invocation per output (short reductions)
  group,   // a workgroup per output, one chunk: stores the results
  partial, // a workgroup per chunk of an output: stores each chunk's accumulator (pass 1)
  merge,   // a workgroup per output over its chunks' accumulators (pass 2)
};

// Index fields after n in a reduction kernel's parameters: count, outputs, chunks per
// output, inputs per chunk (P.x0 .. P.x3).
inline constexpr int reduce_extras = 4;

struct reduce_spec {
  const reduction_info* info; // which reduction (its definition's device parts)
  reduce_stage stage;
  dtype value;                   // the reduced expression's dtype
  dtype acc;                     // accumulator dtype
  dtype result;                  // the output's dtype
  dtype param_type = dtype::f64; // the run-time parameters' (f32 where the device has no f64)
  int group = kernels::reduce_group_size; // workgroup size of the group, partial, merge stages
                                          // and invocations per group of the thread stage
  // Whether the group, partial and merge stages fold each subgroup by shuffles before their
  // shared-memory tree (the reduction family's tuned `subgroup`; the device must allow it).
  bool subgroup = false;
  // The values of the reduction's tunables in this kernel, where a tuner sets them
  // (empty: the definition's).
  std::vector<tunable> tunables = {};
  int params() const { return info->params; }
  // Whether `ai` carries state between passes (argmax's index, a float product's exponent).
  bool carries_index() const { return info->carries_index(acc); }
};

// The buffers between the two passes of a reduction: the accumulators, the carried index
// (carries_index) in the kernel's index type, and the second accumulator (info->second).
inline std::vector<dtype> partial_dtypes(const reduce_spec& s, bool wide_index) {
  std::vector<dtype> d{s.acc};
  if (s.carries_index()) d.push_back(wide_index ? dtype::i64 : dtype::i32);
  if (s.info->second) d.push_back(s.acc);
  return d;
}

// The IR of a stage's kernel from the reduced expression's IR (`value`): its buffers are
// the expression's inputs, then the result; a partial pass writes the partials instead; a
// merge pass reads those and has no expression.
// The reduction's run-time parameters follow the expression's scalars in every stage (the
// merge pass's only scalars).
inline kernel_ir stage_ir(kernel_ir value, const reduce_spec& s) {
  value.outputs = {s.result};
  if (s.stage == reduce_stage::partial) {
    value.outputs = partial_dtypes(s, value.wide_index);
  } else if (s.stage == reduce_stage::merge) {
    kernel_ir m;
    m.inputs = partial_dtypes(s, value.wide_index);
    m.outputs = {s.result};
    m.wide_index = value.wide_index;
    m.scalars.assign(std::size_t(s.params()), s.param_type);
    return m;
  }
  value.scalars.insert(value.scalars.end(), std::size_t(s.params()), s.param_type);
  return value;
}

} // namespace kiln::jit
