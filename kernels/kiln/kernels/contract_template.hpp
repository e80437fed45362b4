#pragma once
// The contraction kernel template, written once for every dialect (grid_spelling.hpp):
// C[bt, i, j] = sum over k of A(bt, i, k) * B(bt, k, j), one workgroup per output tile.
// The JIT splices in the fused prologues — `kiln_a(bt, i, k)` and `kiln_b(bt, k, j)`, the
// operand expressions' values in the accumulator type at a batch index and a matrix
// position (any layout, any expression) — and the store of a result.
//   A workgroup of (tm / rm) x (tn / rn) invocations takes a tm x tn tile of one batch
//   element; per step of tk along K it loads the A and B tiles into shared memory (each
//   invocation ceil(tm * tk / G) and ceil(tn * tk / G) elements, zero past the edges), then each
//   invocation accumulates an rm x rn register tile: rows ty + r * (tm / rm), cols
//   tx + s * (tn / rn), so that neighbouring invocations read neighbouring shared words
//   and store neighbouring outputs.
// Every loop but the tile walk and the K walk is unrolled in the text: an invocation runs
// ceil(K / tk) + 1 loop iterations per tile (launch_grid.hpp's budget counts them).
// Parameters: P.x0 = M, P.x1 = N, P.x2 = K, P.x3 = tiles per row of tiles, P.x4 = tiles per
// batch element, P.x5 = tiles in all.
#include "kiln/kernels/grid_spelling.hpp"

#include <functional>
#include <string>

namespace kiln::kernels {

// A tile configuration (the matmul family's tunables, jit/tune/families.hpp).
struct contraction_tile {
  int tm = 64, tn = 64, tk = 8; // the workgroup's output tile and K step
  int rm = 4, rn = 4;           // each invocation's register tile
  int threads() const { return (tm / rm) * (tn / rn); }
  // Why the tile cannot be spelled ("" when it can).
  std::string why_not() const {
    if (tm % rm || tn % rn) return "the register tile must divide the workgroup tile";
    return {};
  }
};

// What the JIT splices into the template.
struct contraction_parts {
  std::string acc;     // accumulator register type
  std::string value_a; // opening of a call of A's prologue: value_a + "bt, i, k)"
  std::string value_b; // opening of a call of B's prologue: value_b + "bt, k, j)"
  std::string out;     // the output's first element, an index expression
  // A statement storing accumulator value `v` (an expression) at output element `at`.
  std::function<std::string(const std::string& at, const std::string& v)> store;
};

namespace detail {
inline std::string cat(std::initializer_list<std::string> parts) {
  std::string s;
  for (const auto& p : parts)
    s += p;
  return s;
}
} // namespace detail

inline std::string contract_tile_kernel(const grid_spelling& g, const std::string& I,
                                        const contraction_parts& p, const contraction_tile& t) {
  using std::to_string;
  const int G = t.threads(), nx = t.tn / t.rn, ny = t.tm / t.rm;
  const std::string zero = p.acc + "(0)";
  // Shared tiles, [kk][ii] and [kk][jj]; A's rows padded by one word so that the loads,
  // which run along K, store to distinct banks.
  const int sa = t.tm + 1;
  const std::string arrays = g.shared + p.acc + " kiln_ta[" + to_string(t.tk * sa) + "];\n" +
                             g.shared + p.acc + " kiln_tb[" + to_string(t.tk * t.tn) + "];\n";
  std::string open = g.entry;
  if (const auto at = open.find("$G"); at != std::string::npos) open.replace(at, 2, to_string(G));
  // (MSL declares threadgroup arrays in the kernel's scope.)
  std::string s = g.shared_in_entry ? open + "\n  " + arrays.substr(0, arrays.find('\n') + 1) +
                                          "  " + arrays.substr(arrays.find('\n') + 1)
                                    : arrays + open + "\n";
  s += "  const uint lid = " + g.local + ";\n" + flat_groups(g, I, "  ");
  s += "  const uint tx = lid % " + to_string(nx) + "u;\n";
  s += "  const uint ty = lid / " + to_string(nx) + "u;\n";
  s += "  for (" + I + " w = kiln_group; w < P.x5; w += kiln_groups) {\n";
  s += "    const " + I + " bt = w / P.x4;\n";
  s += "    const " + I + " tr = (w - bt * P.x4) / P.x3;\n";
  s += "    const " + I + " i0 = tr * " + I + "(" + to_string(t.tm) + ");\n";
  s += "    const " + I + " j0 = (w - bt * P.x4 - tr * P.x3) * " + I + "(" + to_string(t.tn) +
       ");\n";
  for (int r = 0; r < t.rm; ++r)
    for (int c = 0; c < t.rn; ++c)
      s += "    " + p.acc + " c" + to_string(r) + "_" + to_string(c) + " = " + zero + ";\n";
  s += "    for (" + I + " k0 = " + I + "(0); k0 < P.x2; k0 += " + I + "(" + to_string(t.tk) +
       ")) {\n";
  // The A tile along K first (consecutive invocations, consecutive k), then the B tile
  // along N (consecutive j).
  // (A tile smaller than the workgroup is loaded by its first invocations.)
  auto guard = [&](int q, int count) {
    return (q + 1) * G <= count
               ? std::string()
               : "if (lid + " + to_string(q * G) + "u < " + to_string(count) + "u) ";
  };
  for (int q = 0; q * G < t.tm * t.tk; ++q) {
    const std::string e = "(lid + " + to_string(q * G) + "u)";
    s += "      " + guard(q, t.tm * t.tk);
    s += detail::cat({"{\n        const uint kk = ", e, " % ", to_string(t.tk),
                      "u;\n        const uint ii = ", e, " / ", to_string(t.tk), "u;\n"});
    s += "        const " + I + " gi = i0 + " + I + "(ii);\n";
    s += "        const " + I + " gk = k0 + " + I + "(kk);\n";
    s += "        " + p.acc + " v = " + zero + ";\n";
    s += "        if (gi < P.x0 && gk < P.x2) v = " + p.value_a + "bt, gi, gk);\n";
    s += "        kiln_ta[kk * " + to_string(sa) + "u + ii] = v;\n      }\n";
  }
  for (int q = 0; q * G < t.tn * t.tk; ++q) {
    const std::string e = "(lid + " + to_string(q * G) + "u)";
    s += "      " + guard(q, t.tn * t.tk);
    s += detail::cat({"{\n        const uint jj = ", e, " % ", to_string(t.tn),
                      "u;\n        const uint kk = ", e, " / ", to_string(t.tn), "u;\n"});
    s += "        const " + I + " gj = j0 + " + I + "(jj);\n";
    s += "        const " + I + " gk = k0 + " + I + "(kk);\n";
    s += "        " + p.acc + " v = " + zero + ";\n";
    s += "        if (gj < P.x1 && gk < P.x2) v = " + p.value_b + "bt, gk, gj);\n";
    s += "        kiln_tb[kk * " + to_string(t.tn) + "u + jj] = v;\n      }\n";
  }
  s += "      " + g.barrier + "\n";
  for (int kk = 0; kk < t.tk; ++kk) {
    s += "      {\n";
    for (int r = 0; r < t.rm; ++r)
      s += "        const " + p.acc + " a" + to_string(r) + " = kiln_ta[" +
           to_string(kk * sa + r * ny) + "u + ty];\n";
    for (int c = 0; c < t.rn; ++c)
      s += "        const " + p.acc + " b" + to_string(c) + " = kiln_tb[" +
           to_string(kk * t.tn + c * nx) + "u + tx];\n";
    for (int r = 0; r < t.rm; ++r)
      for (int c = 0; c < t.rn; ++c) {
        const std::string rc = to_string(r) + "_" + to_string(c);
        s += "        c" + rc + " += a" + to_string(r) + " * b" + to_string(c) + ";\n";
      }
    s += "      }\n";
  }
  s += "      " + g.barrier + "\n    }\n";
  for (int r = 0; r < t.rm; ++r)
    for (int c = 0; c < t.rn; ++c) {
      s += "    {\n      const " + I + " gi = i0 + " + I + "(ty + " + to_string(r * ny) + "u);\n";
      s += "      const " + I + " gj = j0 + " + I + "(tx + " + to_string(c * nx) + "u);\n";
      s += "      if (gi < P.x0 && gj < P.x1) " +
           p.store(p.out + " + (bt * P.x0 + gi) * P.x1 + gj",
                   "c" + to_string(r) + "_" + to_string(c)) +
           "\n    }\n";
    }
  return s + "  }\n}\n";
}

} // namespace kiln::kernels
