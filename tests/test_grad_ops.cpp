// Every differentiable op of the catalog against central finite differences in f64, at
// random points of its domain (drawn per run; Catch prints the seed). Math functions here;
// arithmetic, pow, atan2, where, cast and the zero-gradient ops in test_grad_ops_binary.cpp
// (two files so that they build in parallel).
#include "grad_ops_support.hpp"

using grad_ops::unary;

TEST_CASE("grad of exp and log ops against finite differences", "[grad]") {
  unary(
      "exp", -3, 3, [](auto x) { return kiln::exp(x); }, [](double v) { return std::exp(v); });
  unary(
      "exp2", -3, 3, [](auto x) { return kiln::exp2(x); }, [](double v) { return std::exp2(v); });
  unary(
      "expm1", -3, 3, [](auto x) { return kiln::expm1(x); },
      [](double v) { return std::expm1(v); });
  unary(
      "log", 0.2, 5, [](auto x) { return kiln::log(x); }, [](double v) { return std::log(v); });
  unary(
      "log2", 0.2, 5, [](auto x) { return kiln::log2(x); }, [](double v) { return std::log2(v); });
  unary(
      "log10", 0.2, 5, [](auto x) { return kiln::log10(x); },
      [](double v) { return std::log10(v); });
  unary(
      "log1p", -0.7, 5, [](auto x) { return kiln::log1p(x); },
      [](double v) { return std::log1p(v); });
  unary(
      "sqrt", 0.2, 5, [](auto x) { return kiln::sqrt(x); }, [](double v) { return std::sqrt(v); });
  unary(
      "rsqrt", 0.2, 5, [](auto x) { return kiln::rsqrt(x); },
      [](double v) { return 1 / std::sqrt(v); });
  unary(
      "cbrt", 0.2, 5, [](auto x) { return kiln::cbrt(x); }, [](double v) { return std::cbrt(v); });
  unary(
      "cbrt of negatives", -5, -0.2, [](auto x) { return kiln::cbrt(x); },
      [](double v) { return std::cbrt(v); });
}

TEST_CASE("grad of trigonometric and hyperbolic ops against finite differences", "[grad]") {
  unary(
      "sin", -4, 4, [](auto x) { return kiln::sin(x); }, [](double v) { return std::sin(v); });
  unary(
      "cos", -4, 4, [](auto x) { return kiln::cos(x); }, [](double v) { return std::cos(v); });
  unary(
      "tan", -1.2, 1.2, [](auto x) { return kiln::tan(x); }, [](double v) { return std::tan(v); });
  unary(
      "asin", -0.9, 0.9, [](auto x) { return kiln::asin(x); },
      [](double v) { return std::asin(v); });
  unary(
      "acos", -0.9, 0.9, [](auto x) { return kiln::acos(x); },
      [](double v) { return std::acos(v); });
  unary(
      "atan", -3, 3, [](auto x) { return kiln::atan(x); }, [](double v) { return std::atan(v); });
  unary(
      "sinh", -3, 3, [](auto x) { return kiln::sinh(x); }, [](double v) { return std::sinh(v); });
  unary(
      "cosh", -3, 3, [](auto x) { return kiln::cosh(x); }, [](double v) { return std::cosh(v); });
  unary(
      "tanh", -3, 3, [](auto x) { return kiln::tanh(x); }, [](double v) { return std::tanh(v); });
  unary(
      "asinh", -3, 3, [](auto x) { return kiln::asinh(x); },
      [](double v) { return std::asinh(v); });
  unary(
      "acosh", 1.2, 5, [](auto x) { return kiln::acosh(x); },
      [](double v) { return std::acosh(v); });
  unary(
      "atanh", -0.9, 0.9, [](auto x) { return kiln::atanh(x); },
      [](double v) { return std::atanh(v); });
  unary(
      "sigmoid", -6, 6, [](auto x) { return kiln::sigmoid(x); },
      [](double v) { return 1 / (1 + std::exp(-v)); });
  unary(
      "erf", -2.5, 2.5, [](auto x) { return kiln::erf(x); }, [](double v) { return std::erf(v); });
  unary(
      "erfc", -2.5, 2.5, [](auto x) { return kiln::erfc(x); },
      [](double v) { return std::erfc(v); });
}
