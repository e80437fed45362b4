#pragma once
// The kernel IR: what an elementwise kernel computes, independent of the device dialect.
// A kernel walks the n elements of its outputs' shape; per element it runs `code`, a list
// of SSA instructions (each names earlier ones by index), then stores each output's value.
// The builder hash-conses instructions, so an identical subtree (the same op on the same
// operands) is computed once, and a tensor used twice is one buffer and one load.
#include "kiln/dtype.hpp"
#include "kiln/expr.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ir {

enum class ir_code : std::uint8_t {
  load,    // element of input buffer `slot`, of dtype `type`
  param,   // scalar parameter `slot`, of dtype `type`
  apply,   // op `op` on args (values of the compute dtype `compute`), giving `type`
  convert, // arg 0 converted to `type` with kiln::convert's rules
};

// What the code generators need of an op, taken from its one definition.
struct ir_op {
  const char* name;
  const spelling* glsl;
  const spelling* cuda;
  const spelling* msl;
  const spelling* device = nullptr;  // the body shared by the C-family dialects, else none
  const tunable* tunables = nullptr; // the values of ${NAME} in the spellings
  std::size_t tunable_count = 0;
  const raw_source* raw = nullptr; // a raw op's body (called, not spelled), else none
};

struct ir_instr {
  ir_code code;
  dtype type;    // the value's dtype (16-bit floats are held in float, already rounded)
  dtype compute; // apply: the operands' compute dtype (picks the spelling and $T)
  std::uint8_t nargs = 0;
  std::array<std::int32_t, 3> args{-1, -1, -1};
  std::int32_t slot = -1;
  const ir_op* op = nullptr;
  friend bool operator==(const ir_instr&, const ir_instr&) = default;
};

struct kernel_ir {
  std::vector<dtype> inputs;  // element dtype of each input buffer
  std::vector<dtype> outputs; // element dtype of each output buffer
  std::vector<dtype> scalars; // dtype of each scalar parameter
  std::vector<ir_instr> code;
  std::vector<std::int32_t> results; // the value stored to each output
  // The access pattern (part of the specialization key): contiguous walk or strided over
  // `rank` merged dims, 32- or 64-bit indexing.
  bool strided = false;
  int rank = 1;
  bool wide_index = false;

  // Index of an equal instruction, or of the new one (hash-consing by linear search: the
  // kernels are small, and this runs once per specialization).
  std::int32_t add(const ir_instr& in) {
    for (std::size_t i = 0; i < code.size(); ++i)
      if (code[i] == in) return static_cast<std::int32_t>(i);
    code.push_back(in);
    return static_cast<std::int32_t>(code.size() - 1);
  }
  std::int32_t convert(std::int32_t v, dtype to) {
    if (code[v].type == to) return v;
    ir_instr c{ir_code::convert, to, to};
    c.nargs = 1;
    c.args[0] = v;
    return add(c);
  }
  // Which dtypes appear anywhere (buffers, values, compute types): the code generators
  // enable extensions and include helpers for exactly these.
  std::array<bool, 9> dtypes_used() const {
    std::array<bool, 9> u{};
    for (dtype d : inputs)
      u[static_cast<int>(d)] = true;
    for (dtype d : outputs)
      u[static_cast<int>(d)] = true;
    for (dtype d : scalars)
      u[static_cast<int>(d)] = true;
    for (const auto& i : code) {
      u[static_cast<int>(i.type)] = true;
      u[static_cast<int>(i.compute)] = true;
    }
    return u;
  }
};

// The dtype host code computes a value of dtype d in (16-bit floats compute in float).
constexpr dtype compute_dtype(dtype d) {
  return d == dtype::f16 || d == dtype::bf16 ? dtype::f32 : d;
}

} // namespace kiln::ir
