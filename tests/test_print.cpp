// Printing like numpy, summarised when large, and printing an expression evaluates it.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <sstream>

namespace {
template <class E>
std::string str(const E& e) {
  std::ostringstream os;
  os << e;
  return os.str();
}
} // namespace

TEST_CASE("small tensors print every value, aligned", "[print]") {
  CHECK(str(kiln::arange<float>(0, 6).reshape({2, 3})) ==
        "tensor([[0., 1., 2.],\n        [3., 4., 5.]], dtype=f32)");
  CHECK(str(kiln::from<std::int32_t>({-1, 20, 3})) == "tensor([-1, 20,  3], dtype=i32)");
  CHECK(str(kiln::from<double>({0.5, -1.25})) == "tensor([  0.5, -1.25], dtype=f64)");
  CHECK(str(kiln::full<float>({}, 2.5f)) == "tensor(2.5, dtype=f32)");
  CHECK(str(kiln::zeros<float>({0, 2})) == "tensor([], shape=[0, 2], dtype=f32)");
  CHECK(str(kiln::arange<std::int32_t>(0, 4) > 1) ==
        "tensor([false, false,  true,  true], dtype=bool)");
  CHECK(str(kiln::from<float>({NAN, INFINITY, 1})) == "tensor([nan, inf,  1.], dtype=f32)");
  CHECK(str(kiln::tensor<float>()) == "tensor(empty)");
}

TEST_CASE("a 3-d tensor separates blocks by a blank line", "[print]") {
  CHECK(str(kiln::arange<std::int32_t>(0, 8).reshape({2, 2, 2})) ==
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]], dtype=i32)");
}

TEST_CASE("large tensors are summarised with the first and last three entries", "[print]") {
  const std::string s = str(kiln::arange<std::int32_t>(0, 2000).reshape({40, 50}));
  CHECK(s.find("[   0,    1,    2, ...,   47,   48,   49]") != std::string::npos);
  CHECK(s.find("...,\n") != std::string::npos);
  CHECK(s.find("[1950, 1951, 1952, ..., 1997, 1998, 1999]") != std::string::npos);
  CHECK(s.find("shape=[40, 50]") != std::string::npos);
  CHECK(s.find(" 100,") != std::string::npos);
  CHECK(s.find(" 150,") == std::string::npos); // row 3 is elided
}

TEST_CASE("views print their own elements", "[print]") {
  const auto m = kiln::arange<std::int32_t>(0, 6).reshape({2, 3});
  CHECK(str(m.transpose()) == "tensor([[0, 3],\n        [1, 4],\n        [2, 5]], dtype=i32)");
}
