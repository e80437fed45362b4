#pragma once
// A product on a GPU device, as the device's fused reduction: C[.., i, j] is the sum over k
// of A[.., i, k] * B[.., k, j], read through broadcast views of both operands (stride 0
// along the dim each does not have), so every device that runs reductions runs products,
// with the reductions' bounded loops, edges of any size and accumulators (f32 sums in f64
// where the device has it). Operand expressions are evaluated into a tensor first.
// A tiled kernel of its own (shared-memory tiles, register tiles) is the template still to
// come in kernels/; this is what it is checked against.
#include "kiln/contractions/form.hpp"
#include "kiln/reduce.hpp"

namespace kiln::detail {

// The layout of operand t (form f; `left`: it is A) over the dims (batch..., m, n, k).
inline layout product_view(const layout& l, const contraction& c, matrix_form f, bool left) {
  const int nb = c.batch.size();
  const operand_walk w = strides_of(l.shape, l.strides.data(), f, nb);
  layout v;
  v.offset = l.offset;
  for (int i = 0; i < nb; ++i) {
    v.shape.push_back(c.batch[i]);
    v.strides.push_back(w.batch[i]);
  }
  v.shape.push_back(c.m);
  v.strides.push_back(left ? w.rows : 0);
  v.shape.push_back(c.n);
  v.strides.push_back(left ? 0 : w.cols);
  v.shape.push_back(c.k);
  v.strides.push_back(left ? w.cols : w.rows);
  return v;
}

template <class R, class A, class B>
void device_matmul(const tensor<R>& out, const A& a, const B& b, const contraction& c) {
  using Acc = matmul_acc_t<R>;
  const tensor<value_t<A>> ta = evaluate(a);
  const tensor<value_t<B>> tb = evaluate(b);
  // A result stored transposed is the product of the operands' transposes, swapped.
  const contraction s = c.out_t ? swapped(c) : c;
  const tensor<value_t<A>> va(ta.storage(),
                              product_view(ta.layout(), s, c.out_t ? s.fb : s.fa, !c.out_t));
  const tensor<value_t<B>> vb(tb.storage(),
                              product_view(tb.layout(), s, c.out_t ? s.fa : s.fb, c.out_t));
  kiln::shape mn = s.batch;
  mn.push_back(s.m);
  mn.push_back(s.n);
  const tensor<R> o(out.storage(), layout::contiguous(mn, out.offset()));
  assign(o, kiln::cast<R>(kiln::sum(kiln::cast<Acc>(va) * kiln::cast<Acc>(vb), kiln::axes(-1))));
}

} // namespace kiln::detail
