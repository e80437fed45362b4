#pragma once
// How a contraction reads its operands: every product kiln computes is C = opA(A) · opB(B)
// over broadcast batch dims, each operand's trailing dims read as a matrix in one of a few
// forms (numpy's vector promotions, a transposed operand, an outer product's unit K). The
// shape rule and its errors live here, untyped and compiled once (kiln/linkage.hpp); the
// node (matmul.hpp), the host kernel (gemm.hpp), the device lowering and the adjoints all
// read this one description.
#include "kiln/dtype.hpp"
#include "kiln/linkage.hpp"
#include "kiln/shape.hpp"

#include <cstdint>
#include <type_traits>
#include <utility>

namespace kiln {

// The matrix an operand's trailing dims are read as (rows x cols):
//   full        its last two dims;
//   transposed  its last two dims swapped (a stored [.., cols, rows]);
//   row         its last dim as the cols of one row (numpy's 1-D left operand);
//   column      its last dim as the rows of one column (numpy's 1-D right operand);
//   scalar      no dims: a 1 x 1 matrix per batch element (an adjoint of a dot).
// A row's or scalar's inserted rows, a column's or scalar's inserted cols, are not dims of
// the result: matmul of two vectors is rank 0.
enum class matrix_form : std::uint8_t { full, transposed, row, column, scalar };

// The operand's matrix dims count (2, 1 or 0) and the form of its transpose.
constexpr int matrix_dims(matrix_form f) {
  return f == matrix_form::full || f == matrix_form::transposed ? 2
         : f == matrix_form::scalar                             ? 0
                                                                : 1;
}
constexpr matrix_form transposed(matrix_form f) {
  switch (f) {
  case matrix_form::full:
    return matrix_form::transposed;
  case matrix_form::transposed:
    return matrix_form::full;
  case matrix_form::row:
    return matrix_form::column;
  case matrix_form::column:
    return matrix_form::row;
  default:
    return matrix_form::scalar;
  }
}
constexpr bool has_rows(matrix_form f) { return f != matrix_form::row && f != matrix_form::scalar; }
constexpr bool has_cols(matrix_form f) {
  return f != matrix_form::column && f != matrix_form::scalar;
}

// One contraction, resolved: batch x (m x k) · (k x n). `out` is the result's shape: the
// batch, then m unless A's rows are inserted, then n unless B's cols are. The contracted dim
// is inserted in both operands or in neither (an outer product's, or none), so that each
// operand's adjoint, a product again, has exactly that operand's dims.
struct contraction {
  matrix_form fa = matrix_form::full, fb = matrix_form::full;
  // The result is stored transposed (its last two dims swapped): an adjoint of an operand
  // read transposed, which must have that operand's own dims.
  bool out_t = false;
  kiln::shape batch; // broadcast batch dims
  std::int64_t m = 1, n = 1, k = 1;
  kiln::shape out;
  std::int64_t batch_count() const { return numel(batch); }
};

// The contraction of operands of shapes `a` and `b` read in forms fa and fb, or a
// kiln::error from `op` naming both shapes and the contracted dims (K differs, an operand
// has too few dims for its form, batch dims that do not broadcast, more than max_rank dims).
KILN_CORE_INLINE contraction make_contraction(const char* op, const kiln::shape& a, matrix_form fa,
                                              const kiln::shape& b, matrix_form fb,
                                              bool out_t = false);

// The same product with its operands' roles swapped, C^T = opB(B)^T opA(A)^T, stored as it
// is: how a result stored transposed is computed.
inline contraction swapped(contraction c) {
  std::swap(c.m, c.n);
  const matrix_form fa = c.fa;
  c.fa = transposed(c.fb);
  c.fb = transposed(fa);
  c.out_t = false;
  return c;
}

// An operand's matrix extents (rows, cols) under its form (1 where inserted), and the dims
// of its shape they come from (-1 where inserted).
struct operand_dims {
  std::int64_t rows = 1, cols = 1;
  int row_dim = -1, col_dim = -1;
  int batch_rank = 0; // its leading dims that are batch dims
};
KILN_CORE_INLINE operand_dims operand_matrix(const kiln::shape& s, matrix_form f);

// An operand's strides along a contraction's dims, from its strides `st` over its shape `s`
// (read in form f): one per batch dim of the contraction's `batch_rank` (0 where the operand
// lacks or broadcasts it), then its matrix's rows and cols (0 where the form inserts them).
// What the host packers and the device's broadcast views both walk.
struct operand_walk {
  std::int64_t batch[max_rank] = {};
  std::int64_t rows = 0, cols = 0;
};
inline operand_walk strides_of(const kiln::shape& s, const std::int64_t* st, matrix_form f,
                               int batch_rank) {
  const operand_dims d = operand_matrix(s, f);
  operand_walk r;
  for (int i = 0; i < batch_rank; ++i) {
    const int k = i - (batch_rank - d.batch_rank);
    r.batch[i] = k >= 0 && s[k] != 1 ? st[k] : 0;
  }
  r.rows = d.row_dim >= 0 ? st[d.row_dim] : 0;
  r.cols = d.col_dim >= 0 ? st[d.col_dim] : 0;
  return r;
}

namespace detail {
// The accumulator of a product of values of type T: f32 for 16-bit floats and f32, f64, and
// i64 for integers.
template <class T>
using matmul_acc_t =
    std::conditional_t<std::is_same_v<T, double>, double,
                       std::conditional_t<is_floating(dtype_of<T>()), float, std::int64_t>>;
} // namespace detail

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/form_impl.hpp"
#endif
