// kiln in one page: make tensors, write an expression (nothing runs yet), assign it
// (one fused pass), take a view, reduce, print.
#include <kiln/kiln.hpp>

#include <iostream>

int main() {
  const kiln::device dev = kiln::default_device();
  std::cout << "device: " << dev.str() << "\n";

  // Creation.
  kiln::tensor<float> x = kiln::random::normal<float>({4, 5}, /*seed=*/1, 0.0, 1.0, dev);
  kiln::tensor<float> w = kiln::linspace<float>(0.0, 1.0, 5, dev);
  std::cout << "x =\n" << x << "\nw = " << w << "\n";

  // An expression: a compile-time tree; w (shape [5]) broadcasts against x ([4, 5]).
  auto y = kiln::sin(x) * 2.0f + kiln::exp(-x * x) * w;
  kiln::tensor<float> z = y; // one fused pass, no temporaries
  std::cout << "z = sin(x)*2 + exp(-x*x)*w =\n" << z << "\n";

  // Views share storage: writing through one writes z.
  auto row = z(1, kiln::all);
  row = 0.0f;
  std::cout << "z after zeroing row 1 through a view =\n" << z << "\n";

  // Reductions, with the reduced expression fused in.
  kiln::tensor<float> col_sums = kiln::sum(z * z, 0);
  std::cout << "sum(z*z, axis 0) = " << col_sums << "\n";
  std::cout << "max |x| = " << kiln::max(kiln::abs(x)).item()
            << ", argmax = " << kiln::argmax(kiln::abs(x)).item() << "\n";

  // Softmax over rows: the row max is computed first, the rest fuses.
  kiln::tensor<float> e = kiln::exp(x - kiln::max(x, 1, /*keepdims=*/true));
  kiln::tensor<float> softmax = e / kiln::sum(e, 1, true);
  std::cout << "softmax rows sum to " << kiln::sum(softmax, 1) << "\n";
  return 0;
}
