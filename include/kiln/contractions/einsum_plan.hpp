#pragma once
// einsum's index algebra, untyped and compiled once (kiln/linkage.hpp): the subscripts parsed
// into labels, each label's extent checked across the operands, and the views a
// contraction is lowered through. The node (einsum.hpp) turns this plan into a batched
// product over views of its operands, or into an elementwise product where nothing is
// contracted; the adjoints are plans again (adjoint_plan).
//
// Labels: 'a'..'z' are 0..25, 'A'..'Z' 26..51, and the dims an ellipsis stands for 52 on
// (right-aligned across the operands, numpy's broadcasting). Internally an output may repeat
// a label (written on a diagonal, zero elsewhere) or name a label no operand has (broadcast
// along it): what an operand's adjoint needs, where that operand had a diagonal or summed a
// dim away.
#include "kiln/layout.hpp"
#include "kiln/linkage.hpp"
#include "kiln/shape.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

using einsum_labels = std::vector<std::int8_t>;

struct einsum_plan {
  static constexpr int label_count = 52 + max_rank;
  int operands = 2;
  einsum_labels in[2], out;
  kiln::shape in_shape[2], out_shape;
  std::array<std::int64_t, label_count> extent{}; // 0 where no dim has the label
  std::string spec;                               // as written, for messages
  bool in_output(int label) const { return has(out, label); }
  bool in_operand(int i, int label) const { return i < operands && has(in[i], label); }
  static bool has(const einsum_labels& l, int label) {
    for (const std::int8_t x : l)
      if (x == label) return true;
    return false;
  }
};

// Parses "ij,jk->ik" (or the implicit "ij,jk": the labels used once, sorted) for operands of
// shapes a and, when b is not null, b; a kiln::error from `op` naming the subscripts, the
// shapes and the offending label otherwise.
KILN_CORE_INLINE einsum_plan parse_einsum(const char* op, std::string_view spec,
                                          const kiln::shape& a, const kiln::shape* b);

// numpy's tensordot as a plan: a's dims `ax` contracted with b's dims `ay` pairwise; the
// result has a's other dims, then b's. A kiln::error names both shapes and the dims.
KILN_CORE_INLINE einsum_plan tensordot_plan(const kiln::shape& a, const kiln::shape& b,
                                            const std::vector<std::int64_t>& ax,
                                            const std::vector<std::int64_t>& ay);

// A plan from labels (b null: one operand). Output labels no operand has take their extent
// from `extents`.
KILN_CORE_INLINE einsum_plan make_einsum_plan(
    const char* op, einsum_labels la, const kiln::shape& a, const einsum_labels* lb,
    const kiln::shape* b, einsum_labels out,
    const std::array<std::int64_t, einsum_plan::label_count>* extents, std::string spec);

// The plan of operand i's adjoint: the output's adjoint (and the other operand) contracted
// back onto operand i's labels, with the plan's extents (a dim operand i broadcast from 1 is
// summed down where the adjoint reaches the operand).
KILN_CORE_INLINE einsum_plan adjoint_plan(const einsum_plan& p, int i);

// An operand's (or the output's) layout with one dim per distinct label, in the order the
// labels first appear: a repeated label's strides summed (a diagonal), a dim of 1 broadcast
// to the label's extent.
struct label_view {
  layout l;
  einsum_labels labels;
};
KILN_CORE_INLINE label_view distinct_view(const einsum_plan& p, const einsum_labels& labels,
                                          const layout& l);

// The view of `v` over `order` (labels of v, or ones it lacks: stride 0 at the plan's extent).
KILN_CORE_INLINE layout arranged(const einsum_plan& p, const label_view& v,
                                 const einsum_labels& order);

// The lowering of a plan once its operands' labels are distinct and each summed-away label
// folded: batch labels (both operands and the output), the free labels of each (one
// operand and the output), and the contracted ones (both operands, not the output). The
// batch and free labels are in the output's order, the contracted in a's.
struct einsum_roles {
  einsum_labels batch, free_a, free_b, contracted;
};
KILN_CORE_INLINE einsum_roles roles_of(const einsum_plan& p, const einsum_labels& a,
                                       const einsum_labels& b);

// Whether operand i of a two-operand plan is its batched product's matrix as it is: its
// labels distinct, none broadcast from a dim of 1 or summed away first, in the order batch
// (the output's order), then a's free label and the contracted one (b: the contracted, then
// its free one), at most one free and one contracted. Such an operand, an expression, is read
// by the product's kernel while it packs (no temporary for it).
KILN_CORE_INLINE bool einsum_reads_in_order(const einsum_plan& p, int i);

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/einsum_plan_impl.hpp"
#endif
