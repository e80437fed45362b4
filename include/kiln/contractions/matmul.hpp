#pragma once
// Products as lazy nodes: kiln::matmul (numpy's semantics), kiln::dot and kiln::outer. A
// product is a node like a reduction: used inside a larger expression it is computed first
// (materialize) and the rest is fused as usual; its operands may be any expressions, which
// the host kernel evaluates while it packs their tiles (no temporary for them).
//
// Type rule: the operands' usual promotion (bool operands are refused: cast them); the
// products accumulate in f32 for f16, bf16 and f32, in f64 for f64, and in i64 for integers,
// whose result is then converted to the promoted type (wrapping, as C++ converts).
#include "kiln/contractions/device_matmul.hpp"
#include "kiln/contractions/form.hpp"
#include "kiln/contractions/host_matmul.hpp"

#include <type_traits>
#include <utility>

namespace kiln {

template <class A, class B>
struct matmul_node : expression_base<matmul_node<A, B>> {
  using value_type = promote_t<value_t<A>, value_t<B>>;
  static_assert(!std::is_same_v<value_type, bool>,
                "kiln: a product of bool tensors is not defined; cast them to an integer type");
  A a;
  B b;
  contraction c; // forms, extents and the result's shape, checked when the node is built
  matmul_node(A a_, B b_, matrix_form fa, matrix_form fb, const char* op, bool out_t = false)
      : a(std::move(a_)), b(std::move(b_)), c(make(op, fa, fb, out_t)) {}
  matmul_node(const matmul_node&) = default;
  matmul_node(matmul_node&&) = default;
  matmul_node& operator=(const matmul_node&) = default;
  matmul_node& operator=(matmul_node&&) = default;
  KILN_STATEMENT ~matmul_node() {}

private:
  contraction make(const char* op, matrix_form fa, matrix_form fb, bool out_t) const {
    detail::require_operand(a, op);
    detail::require_operand(b, op);
    return make_contraction(op, shape_of(a), fa, shape_of(b), fb, out_t);
  }
};
template <class A, class B>
struct is_expression_type<matmul_node<A, B>> : std::true_type {};

template <class A, class B>
const kiln::shape& shape_of(const matmul_node<A, B>& n) {
  return n.c.out;
}
template <class A, class B, class F>
void visit_devices(const matmul_node<A, B>& n, F&& f) {
  visit_devices(n.a, f);
  visit_devices(n.b, f);
}

// The product, computed where its operands live: materialize (defined in epilogue.hpp, with
// how products are shared within a statement and fused with it).
template <class A, class B>
KILN_STATEMENT auto materialize(const matmul_node<A, B>& n);

namespace detail {
template <class X>
constexpr matrix_form numpy_form(bool left, const X& x) {
  if (shape_of(x).size() == 1) return left ? matrix_form::row : matrix_form::column;
  return matrix_form::full;
}
template <class X>
void require_expression_operand() {
  static_assert(expression<X>, "kiln: a product's operands are kiln tensors or expressions "
                               "(multiply a scalar with *)");
}
} // namespace detail

// numpy's matmul: the last two dims of each operand are its matrix, the leading dims are
// batch dims that broadcast; a 1-D left operand is a row and a 1-D right operand a column,
// whose inserted dim is not in the result. A transposed or strided view is read as it is.
template <class X, class Y>
KILN_STATEMENT auto matmul(X&& x, Y&& y) {
  detail::require_expression_operand<std::remove_cvref_t<X>>();
  detail::require_expression_operand<std::remove_cvref_t<Y>>();
  const matrix_form fa = detail::numpy_form(true, x), fb = detail::numpy_form(false, y);
  return matmul_node<std::remove_cvref_t<X>, std::remove_cvref_t<Y>>(
      std::forward<X>(x), std::forward<Y>(y), fa, fb, "matmul");
}

// dot(a, b) for vectors and matrices (numpy's dot for operands of rank 1 and 2: the inner
// product of two vectors is rank 0). For more dims use matmul (batches) or tensordot.
template <class X, class Y>
KILN_STATEMENT auto dot(X&& x, Y&& y) {
  detail::require_expression_operand<std::remove_cvref_t<X>>();
  detail::require_expression_operand<std::remove_cvref_t<Y>>();
  const int rx = shape_of(x).size(), ry = shape_of(y).size();
  if (rx < 1 || rx > 2 || ry < 1 || ry > 2)
    throw error("dot", "operands of rank 1 or 2 only (matmul for batches, tensordot otherwise)",
                "shapes " + shape_of(x).str() + " and " + shape_of(y).str());
  const matrix_form fa = detail::numpy_form(true, x), fb = detail::numpy_form(false, y);
  return matmul_node<std::remove_cvref_t<X>, std::remove_cvref_t<Y>>(
      std::forward<X>(x), std::forward<Y>(y), fa, fb, "dot");
}

// outer(a, b)[i, j] = a[i] * b[j] for vectors a and b (a product over a contracted dim of 1).
template <class X, class Y>
KILN_STATEMENT auto outer(X&& x, Y&& y) {
  detail::require_expression_operand<std::remove_cvref_t<X>>();
  detail::require_expression_operand<std::remove_cvref_t<Y>>();
  if (shape_of(x).size() != 1 || shape_of(y).size() != 1)
    throw error("outer", "operands must be vectors (rank 1)",
                "shapes " + shape_of(x).str() + " and " + shape_of(y).str());
  return matmul_node<std::remove_cvref_t<X>, std::remove_cvref_t<Y>>(
      std::forward<X>(x), std::forward<Y>(y), matrix_form::column, matrix_form::row, "outer");
}

} // namespace kiln

#include "kiln/contractions/epilogue.hpp"
