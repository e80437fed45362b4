#pragma once
// The contraction shape rule's definitions (declared in form.hpp; kiln/linkage.hpp says where
// they are compiled).
#include "kiln/contractions/form.hpp"
#include "kiln/error.hpp"

#include <string>

namespace kiln {

KILN_CORE_INLINE operand_dims operand_matrix(const kiln::shape& s, matrix_form f) {
  operand_dims d;
  const int r = s.size(), md = matrix_dims(f);
  d.batch_rank = r - md;
  switch (f) {
  case matrix_form::full:
    d.row_dim = r - 2;
    d.col_dim = r - 1;
    break;
  case matrix_form::transposed:
    d.row_dim = r - 1;
    d.col_dim = r - 2;
    break;
  case matrix_form::row:
    d.col_dim = r - 1;
    break;
  case matrix_form::column:
    d.row_dim = r - 1;
    break;
  case matrix_form::scalar:
    break;
  }
  if (d.row_dim >= 0) d.rows = s[d.row_dim];
  if (d.col_dim >= 0) d.cols = s[d.col_dim];
  return d;
}

KILN_CORE_INLINE contraction make_contraction(const char* op, const kiln::shape& a, matrix_form fa,
                                              const kiln::shape& b, matrix_form fb, bool out_t) {
  if (has_cols(fa) != has_rows(fb))
    throw error(op, "the contracted dim is inserted in one operand only (an internal error)",
                "shapes " + a.str() + " and " + b.str());
  auto shapes = [&] { return "shapes " + a.str() + " and " + b.str(); };
  if (a.size() < matrix_dims(fa) || b.size() < matrix_dims(fb))
    throw error(op, "an operand has too few dims for a product",
                shapes() + (a.size() == 0 || b.size() == 0
                                ? " (a rank-0 operand: multiply it with *)"
                                : ""));
  const operand_dims da = operand_matrix(a, fa), db = operand_matrix(b, fb);
  if (da.cols != db.rows) {
    auto dim = [](const char* which, int d, int r) {
      return std::string(which) +
             (d < 0 ? " (a vector's inserted dim of 1)"
                    : " dim " + std::to_string(d - r) + " (of " + std::to_string(r) + ")");
    };
    throw error(op, "the contracted dims differ",
                shapes() + ": " + std::to_string(da.cols) + " from a's " +
                    dim("", da.col_dim, a.size()).substr(1) + " vs " + std::to_string(db.rows) +
                    " from b's " + dim("", db.row_dim, b.size()).substr(1));
  }
  contraction c;
  c.fa = fa;
  c.fb = fb;
  c.out_t = out_t;
  c.m = da.rows;
  c.n = db.cols;
  c.k = da.cols;
  const kiln::shape ba(a.begin(), a.begin() + da.batch_rank),
      bb(b.begin(), b.begin() + db.batch_rank);
  c.batch = ba;
  if (!broadcast_into(c.batch, bb))
    throw error(op, "the batch dims do not broadcast",
                shapes() + ": batch " + ba.str() + " vs " + bb.str());
  c.out = c.batch;
  if (c.out.size() + has_rows(fa) + has_cols(fb) > max_rank)
    throw error(op, "the result has more dims than kiln supports",
                shapes() + " give rank " + std::to_string(c.out.size()) + " > " +
                    std::to_string(max_rank));
  if (out_t) {
    if (has_cols(fb)) c.out.push_back(c.n);
    if (has_rows(fa)) c.out.push_back(c.m);
  } else {
    if (has_rows(fa)) c.out.push_back(c.m);
    if (has_cols(fb)) c.out.push_back(c.n);
  }
  checked_numel(c.out, op);
  return c;
}

} // namespace kiln
