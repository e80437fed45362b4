#pragma once
// The contraction kernel template, written once for every dialect (grid_spelling.hpp):
// C[bt, i, j] = sum over k of A(bt, i, k) * B(bt, k, j), one workgroup per output tile.
// The JIT splices in the fused prologues — `kiln_a(bt, i, k)` and `kiln_b(bt, k, j)`, the
// operand expressions' values in the accumulator type at a batch index and a matrix
// position (any layout, any expression) — and the store of a result.
//   A workgroup of (tm / rm) x (tn / rn) invocations takes a tm x tn tile of one batch
//   element; per step of tk along K it loads the A and B tiles into shared memory (each
//   invocation ceil(tm * tk / G) and ceil(tn * tk / G) elements, zero past the edges), then each
//   invocation accumulates an rm x rn register tile: rows ty + r * (tm / rm) (or ty * rm + r,
//   rows_adjacent), cols tx + s * (tn / rn), so that neighbouring invocations read
//   neighbouring shared words and store neighbouring outputs. With two stages the loads of
//   step k + 1 go to the other buffer before the products of step k.
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
  // 1: an invocation's rm rows are adjacent (rows ty * rm + r), so that its reads of the A
  // tile are rm adjacent words, which a compiler may load as vectors (every invocation of a
  // row of the workgroup reads the same words: a broadcast); 0: rows ty + r * (tm / rm).
  // Columns are strided either way (neighbouring invocations, neighbouring words and outputs).
  int rows_adjacent = 0;
  // Shared-memory buffers: 1, loads then products with a barrier after each; 2, the next K
  // step's tiles are loaded into the other buffer before this step's products, one barrier
  // per step.
  int stages = 1;
  int threads() const { return (tm / rm) * (tn / rn); }
  // Words of shared memory per row of the A tile (padded: the loads run along K, and the
  // padding spreads them over the banks; by 4 when rows are adjacent, to keep vectors aligned).
  int a_row() const { return tm + (rows_adjacent ? 4 : 1); }
  int shared_words() const { return stages * tk * (a_row() + tn); }
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
  // Shared tiles, [kk][ii] and [kk][jj], `stages` of each; A's rows padded (a_row()).
  const int sa = t.a_row(), size_a = t.tk * sa, size_b = t.tk * t.tn;
  const std::string arrays = g.shared + p.acc + " kiln_ta[" + to_string(t.stages * size_a) +
                             "];\n" + g.shared + p.acc + " kiln_tb[" +
                             to_string(t.stages * size_b) + "];\n";
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
  // The A and B tiles of the K step at `k0`, in two halves: `fetch` reads this invocation's
  // share into registers kiln_va<q> and kiln_vb<q> (zero past the edges), `put` stores them
  // into the buffer at word offsets `oa`, `ob`. The A tile is walked along K (consecutive
  // invocations, consecutive k), the B tile along N (consecutive j); a tile smaller than the
  // workgroup is loaded by its first invocations.
  const int qa = (t.tm * t.tk + G - 1) / G, qb = (t.tn * t.tk + G - 1) / G;
  auto guard = [&](int q, int count) {
    return (q + 1) * G <= count
               ? std::string()
               : "if (lid + " + to_string(q * G) + "u < " + to_string(count) + "u) ";
  };
  auto index = [&](int q) { return "(lid + " + to_string(q * G) + "u)"; };
  auto declare = [&](const std::string& in) {
    std::string d;
    for (int q = 0; q < qa; ++q)
      d += in + p.acc + " kiln_va" + to_string(q) + " = " + zero + ";\n";
    for (int q = 0; q < qb; ++q)
      d += in + p.acc + " kiln_vb" + to_string(q) + " = " + zero + ";\n";
    return d;
  };
  auto fetch = [&](const std::string& in, const std::string& k0) {
    std::string l;
    for (int q = 0; q < qa; ++q) {
      const std::string e = index(q), v = "kiln_va" + to_string(q);
      l += in + guard(q, t.tm * t.tk) + "{\n";
      l += in + "  const " + I + " gi = i0 + " + I + "(" + e + " / " + to_string(t.tk) + "u);\n";
      l += in + "  const " + I + " gk = " + k0 + " + " + I + "(" + e + " % " + to_string(t.tk) +
           "u);\n";
      l += in + "  " + v + " = " + zero + ";\n";
      l += in + "  if (gi < P.x0 && gk < P.x2) " + v + " = " + p.value_a + "bt, gi, gk);\n";
      l += in + "}\n";
    }
    for (int q = 0; q < qb; ++q) {
      const std::string e = index(q), v = "kiln_vb" + to_string(q);
      l += in + guard(q, t.tn * t.tk) + "{\n";
      l += in + "  const " + I + " gj = j0 + " + I + "(" + e + " % " + to_string(t.tn) + "u);\n";
      l += in + "  const " + I + " gk = " + k0 + " + " + I + "(" + e + " / " + to_string(t.tn) +
           "u);\n";
      l += in + "  " + v + " = " + zero + ";\n";
      l += in + "  if (gj < P.x1 && gk < P.x2) " + v + " = " + p.value_b + "bt, gk, gj);\n";
      l += in + "}\n";
    }
    return l;
  };
  auto put = [&](const std::string& in, const std::string& oa, const std::string& ob) {
    std::string l;
    for (int q = 0; q < qa; ++q) {
      const std::string e = index(q);
      l += in + guard(q, t.tm * t.tk) + "kiln_ta[" + oa + "(" + e + " % " + to_string(t.tk) +
           "u) * " + to_string(sa) + "u + " + e + " / " + to_string(t.tk) + "u] = kiln_va" +
           to_string(q) + ";\n";
    }
    for (int q = 0; q < qb; ++q) {
      const std::string e = index(q);
      l += in + guard(q, t.tn * t.tk) + "kiln_tb[" + ob + "(" + e + " / " + to_string(t.tn) +
           "u) * " + to_string(t.tn) + "u + " + e + " % " + to_string(t.tn) + "u] = kiln_vb" +
           to_string(q) + ";\n";
    }
    return l;
  };
  // The products of the K step in the buffer at `oa`, `ob`.
  auto multiply = [&](const std::string& oa, const std::string& ob) {
    std::string m;
    for (int kk = 0; kk < t.tk; ++kk) {
      m += "      {\n";
      for (int r = 0; r < t.rm; ++r)
        m += "        const " + p.acc + " a" + to_string(r) + " = kiln_ta[" + oa +
             to_string(kk * sa) +
             (t.rows_adjacent ? "u + ty * " + to_string(t.rm) + "u + " + to_string(r) + "u];\n"
                              : "u + " + to_string(r * ny) + "u + ty];\n");
      for (int c = 0; c < t.rn; ++c)
        m += "        const " + p.acc + " b" + to_string(c) + " = kiln_tb[" + ob +
             to_string(kk * t.tn + c * nx) + "u + tx];\n";
      for (int r = 0; r < t.rm; ++r)
        for (int c = 0; c < t.rn; ++c) {
          const std::string rc = to_string(r) + "_" + to_string(c);
          m += "        c" + rc + " += a" + to_string(r) + " * b" + to_string(c) + ";\n";
        }
      m += "      }\n";
    }
    return m;
  };
  const std::string step = I + "(" + to_string(t.tk) + ")";
  s += declare("    ");
  if (t.stages == 1) {
    s += "    for (" + I + " k0 = " + I + "(0); k0 < P.x2; k0 += " + step + ") {\n";
    s += fetch("      ", "k0") + put("      ", "", "");
    s += "      " + g.barrier + "\n";
    s += multiply("", "");
    s += "      " + g.barrier + "\n    }\n";
  } else {
    // Step 0 into buffer 0. Then each step reads the next step's share into registers,
    // multiplies its own buffer, stores the share into the other buffer, and waits once:
    // that barrier also tells that no invocation still reads the buffer the next step's
    // stores go to.
    s += fetch("    ", I + "(0)") + put("    ", "", "");
    s += "    " + g.barrier + "\n";
    s += "    uint kiln_s = 0u;\n";
    s += "    for (" + I + " k0 = " + I + "(0); k0 < P.x2; k0 += " + step + ") {\n";
    s += "      const bool kiln_next = k0 + " + step + " < P.x2;\n";
    s += "      if (kiln_next) {\n" + fetch("        ", "k0 + " + step) + "      }\n";
    s += "      const uint kiln_oa = kiln_s * " + to_string(size_a) + "u;\n";
    s += "      const uint kiln_ob = kiln_s * " + to_string(size_b) + "u;\n";
    s += multiply("kiln_oa + ", "kiln_ob + ");
    s += "      if (kiln_next) {\n";
    s +=
        put("        ", to_string(size_a) + "u - kiln_oa + ", to_string(size_b) + "u - kiln_ob + ");
    s += "      }\n";
    s += "      " + g.barrier + "\n";
    s += "      kiln_s = 1u - kiln_s;\n    }\n";
  }
  for (int r = 0; r < t.rm; ++r)
    for (int c = 0; c < t.rn; ++c) {
      const std::string row = t.rows_adjacent
                                  ? "ty * " + to_string(t.rm) + "u + " + to_string(r) + "u"
                                  : "ty + " + to_string(r * ny) + "u";
      s += "    {\n      const " + I + " gi = i0 + " + I + "(" + row + ");\n";
      s += "      const " + I + " gj = j0 + " + I + "(tx + " + to_string(c * nx) + "u);\n";
      s += "      if (gi < P.x0 && gj < P.x1) " +
           p.store(p.out + " + (bt * P.x0 + gi) * P.x1 + gj",
                   "c" + to_string(r) + "_" + to_string(c)) +
           "\n    }\n";
    }
  return s + "  }\n}\n";
}

} // namespace kiln::kernels
