#pragma once
// A product as a captured plan's step holds it (plan/): its result and copies of its operand
// trees over the plan's memory, for the host's and the devices' product steps
// (host_matmul.hpp, device_matmul.hpp).
#include "kiln/contractions/form.hpp"
#include "kiln/plan/recording.hpp"
#include "kiln/tensor.hpp"

namespace kiln::detail {

template <class R, class A, class B>
struct product_operands {
  tensor<R> out;
  A a;
  B b;
  contraction c;
  void refresh() { // (a plan parameter's current value)
    refresh_parameters(a);
    refresh_parameters(b);
  }
};

// A step's data D (a product_operands) over r's memory; deleted where that fails.
template <class D, class R, class A, class B>
D* adopted_product(plan_recording& r, const tensor<R>& out, const A& a, const B& b,
                   const contraction& c) {
  D* d = new D{{out, a, b, c}};
  try {
    adopt_leaves(d->out, r, "matmul");
    adopt_leaves(d->a, r, "matmul");
    adopt_leaves(d->b, r, "matmul");
  } catch (...) {
    delete d;
    throw;
  }
  return d;
}

} // namespace kiln::detail
