#pragma once
// The reduction kernel templates, written once for every dialect (grid_spelling.hpp). The
// JIT splices in the fused prologue — `kiln_value(i)`, element i of the reduced expression,
// iterating over (kept dims..., reduced dims...) so element o * count + r is output o's r-th
// input — and the reduction's parts (reduction_parts.hpp).
//   group:  a workgroup of G per work unit (output o, chunk c): a strided partial per
//           invocation over the chunk, then a tree over shared memory (no subgroup size
//           assumed), or with `subgroup`, shuffles within each subgroup first and the tree
//           over the subgroups' totals (fewer barriers; needs G >= the subgroup size).
//           With one chunk per output it stores the result (`store`), else the chunk's
//           state (`partial`), which `merge` then combines: long reductions take
//           two passes, so no loop runs longer than a chunk.
//   merge:  a workgroup per output over its chunks' partials (`load` defines b, bi, b2 of
//           partial k), the same tree, then the result.
// The state is (a, ai), and a2 where the reduction has one (reduction_parts::init2).
//   thread: an invocation per output, a sequential loop; for short reductions.
// G, the workgroup size, is a power of two (64 unless tuned, jit/tune/families.hpp); the
// entry point's `$G` (CUDA's launch bounds) is spelled with it.
// Parameters: P.x0 = count (inputs per output), P.x1 = outputs, P.x2 = chunks per output,
// P.x3 = inputs per chunk. Every loop's trip count is bounded by the launch (launch_grid.hpp).
#include "kiln/kernels/grid_spelling.hpp"
#include "kiln/kernels/reduction_parts.hpp"

#include <cctype>

namespace kiln::kernels {

inline constexpr int reduce_group_size = 64;

namespace detail {

inline std::string shared_arrays(const grid_spelling& g, const std::string& I,
                                 const reduction_parts& p, int G) {
  const std::string n = "[" + std::to_string(G) + "];\n";
  std::string s = g.shared + p.acc + " kiln_sa" + n + g.shared + I + " kiln_si" + n;
  if (!p.init2.empty()) s += g.shared + p.acc + " kiln_sa2" + n;
  return s;
}

inline std::string entry(const grid_spelling& g, int G) {
  std::string e = g.entry;
  if (const auto at = e.find("$G"); at != std::string::npos) e.replace(at, 2, std::to_string(G));
  return e;
}

// The state's declarations with their identities.
inline std::string state(const std::string& I, const reduction_parts& p) {
  std::string s = "    " + p.acc + " a = " + p.init + ";\n    " + I + " ai = " + I + "(" +
                  p.index_init + ");\n";
  if (!p.init2.empty()) s += "    " + p.acc + " a2 = " + p.init2 + ";\n";
  return s;
}

// Whether statements s name identifier `name` (not as part of a longer one).
inline bool names(const std::string& s, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (auto at = s.find(name); at != std::string::npos; at = s.find(name, at + 1))
    if ((at == 0 || !ident(s[at - 1])) &&
        (at + name.size() == s.size() || !ident(s[at + name.size()])))
      return true;
  return false;
}

// The definitions of kiln_shfl for the state's types (subgroup kernels), each once.
inline std::string shuffles(const grid_spelling& g, const std::string& I,
                            const reduction_parts& p) {
  const std::string a = g.shuffle(p.acc), i = g.shuffle(I);
  return a == i || !names(p.merge, "bi") ? a : a + i;
}

// The state of each subgroup folded into its lane 0 by shuffles down, with the reduction's
// merge (any order). Every lane runs the shuffles (uniform control flow): a lane whose
// source lane + h is past the subgroup still shuffles, and discards what it read. `ai` is
// shuffled only where the merge reads `bi` (a sum's is never read: a shuffle saved).
inline std::string subgroup_fold(const grid_spelling& g, const std::string& I,
                                 const reduction_parts& p) {
  std::string s = "    for (uint h = " + g.subgroup_size + " / 2u; h > 0u; h >>= 1) {\n";
  s += "      const " + p.acc + " b = kiln_shfl(a, h);\n      const " + I +
       " bi = " + (names(p.merge, "bi") ? "kiln_shfl(ai, h)" : "ai") + ";\n";
  if (!p.init2.empty()) s += "      const " + p.acc + " b2 = kiln_shfl(a2, h);\n";
  return s + "      if (" + g.lane + " + h < " + g.subgroup_size + ") {\n" + p.merge +
         "      }\n    }\n";
}

// The tree over the G partials in shared memory; invocation 0 is left with the total in
// (a, ai) and runs `last`. A barrier closes it: the next unit reuses the arrays.
// With `subgroup`, each subgroup's lane 0 puts its subgroup's total (subgroup_fold) at the
// subgroup's index, and the tree starts at half the subgroup count instead of G / 2.
inline std::string tree(const grid_spelling& g, const std::string& I, const reduction_parts& p,
                        const std::string& last, int G, bool subgroup = false) {
  const bool two = !p.init2.empty();
  auto put = [&](const std::string& pad, const std::string& at) {
    return pad + "kiln_sa[" + at + "] = a;\n" + pad + "kiln_si[" + at + "] = ai;\n" +
           (two ? pad + "kiln_sa2[" + at + "] = a2;\n" : "");
  };
  auto get = [&](const std::string& pad, const std::string& at) {
    return pad + "a = kiln_sa[" + at + "];\n" + pad + "ai = kiln_si[" + at + "];\n" +
           (two ? pad + "a2 = kiln_sa2[" + at + "];\n" : "");
  };
  std::string s;
  if (subgroup)
    s = subgroup_fold(g, I, p) + "    if (" + g.lane + " == 0u) {\n" + put("      ", g.subgroup) +
        "    }\n";
  else
    s = put("    ", "lid");
  s += "    " + g.barrier + "\n";
  s += "    for (uint h = " + (subgroup ? g.subgroups + " / 2u" : std::to_string(G / 2) + "u") +
       "; h > 0u; h >>= 1) {\n      if (lid < h) {\n" + get("        ", "lid");
  s += "        const " + p.acc + " b = kiln_sa[lid + h];\n        const " + I +
       " bi = kiln_si[lid + h];\n";
  if (two) s += "        const " + p.acc + " b2 = kiln_sa2[lid + h];\n";
  s += p.merge + put("        ", "lid") + "      }\n      " + g.barrier + "\n    }\n";
  s += "    if (lid == 0u) {\n" + get("      ", "0") + last + "    }\n";
  return s + "    " + g.barrier + "\n";
}

inline std::string finish(const reduction_parts& p) {
  return "      const " + p.result + " res = " + p.finish + ";\n" + p.store;
}

// Up to the kernel's first statement: the shared arrays (at file scope, or in the entry
// where the dialect keeps them there), the shuffles of subgroup kernels, the entry point.
inline std::string opening(const grid_spelling& g, const std::string& I, const reduction_parts& p,
                           int G, bool subgroup) {
  const std::string arrays = shared_arrays(g, I, p, G);
  std::string s =
      (g.shared_in_entry ? "" : arrays) + (subgroup ? shuffles(g, I, p) : "") + entry(g, G) + "\n";
  if (g.shared_in_entry)
    for (std::size_t at = 0; at < arrays.size();) {
      const std::size_t end = arrays.find('\n', at);
      s += "  " + arrays.substr(at, end + 1 - at);
      at = end + 1;
    }
  return s;
}

} // namespace detail

// partial: store each chunk's state at unit w instead of the result of output o.
// subgroup: fold each subgroup by shuffles before the tree (detail::tree).
inline std::string reduce_group(const grid_spelling& g, const std::string& I,
                                const reduction_parts& p, bool partial, int G,
                                bool subgroup = false) {
  std::string s = detail::opening(g, I, p, G, subgroup);
  s += "  const uint lid = " + g.local + ";\n" + flat_groups(g, I, "  ");
  s += "  const " + I + " units = P.x1 * P.x2;\n";
  s += "  for (" + I + " w = kiln_group; w < units; w += kiln_groups) {\n";
  s += "    const " + I + " o = w / P.x2;\n";
  s += "    const " + I + " r0 = (w - o * P.x2) * P.x3;\n";
  s += "    const " + I + " r1 = P.x0 - r0 < P.x3 ? P.x0 : r0 + P.x3;\n";
  s += detail::state(I, p);
  s += "    for (" + I + " r = r0 + " + I + "(lid); r < r1; r += " + I + "(" + std::to_string(G) +
       ")) {\n";
  s += "      const " + p.value + " v = " + g.value_call + "o * P.x0 + r);\n" + p.combine;
  s += "    }\n";
  s += detail::tree(g, I, p, partial ? p.partial : detail::finish(p), G, subgroup);
  return s + "  }\n}\n";
}

inline std::string reduce_merge(const grid_spelling& g, const std::string& I,
                                const reduction_parts& p, int G, bool subgroup = false) {
  std::string s = detail::opening(g, I, p, G, subgroup);
  s += "  const uint lid = " + g.local + ";\n" + flat_groups(g, I, "  ");
  s += "  for (" + I + " o = kiln_group; o < P.x1; o += kiln_groups) {\n";
  s += detail::state(I, p);
  s += "    for (" + I + " c = " + I + "(lid); c < P.x2; c += " + I + "(" + std::to_string(G) +
       ")) {\n";
  s += "      const " + I + " k = o * P.x2 + c;\n" + p.load + p.merge + "    }\n";
  s += detail::tree(g, I, p, detail::finish(p), G, subgroup);
  return s + "  }\n}\n";
}

inline std::string reduce_thread(const grid_spelling& g, const std::string& I,
                                 const reduction_parts& p, int G) {
  const std::string n = I + "(" + std::to_string(G) + ")";
  std::string s = detail::entry(g, G) + "\n" + flat_groups(g, I, "  ");
  s += "  const " + I + " step = kiln_groups * " + n + ";\n";
  s += "  for (" + I + " o = kiln_group * " + n + " + " + I + "(" + g.local +
       "); o < P.x1; o += step) {\n";
  s += detail::state(I, p);
  s += "    for (" + I + " r = " + I + "(0); r < P.x0; ++r) {\n";
  s += "      const " + p.value + " v = " + g.value_call + "o * P.x0 + r);\n" + p.combine;
  s += "    }\n" + detail::finish(p) + "  }\n}\n";
  return s;
}

} // namespace kiln::kernels
