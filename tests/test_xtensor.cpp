// xtensor interop: a zero-copy kiln view of xtensor memory, and a copy out to xtensor
// (xtensor is also the independent reference here).
#include <kiln/xtensor.hpp>

#include <catch2/catch.hpp>

#include <xtensor/xmath.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

TEST_CASE("view_of shares the xtensor container's memory", "[xtensor]") {
  xt::random::seed(Catch::rngSeed());
  xt::xarray<double> a = xt::random::rand<double>({5, 7});
  const xt::xarray<double> before = a;
  auto v = kiln::view_of(a);
  REQUIRE(v.data() == a.data());
  REQUIRE(v.shape() == kiln::shape{5, 7});
  v = kiln::exp(v) * 2.0 - 1.0; // writes a in place
  const xt::xarray<double> expect = xt::exp(before) * 2.0 - 1.0;
  CHECK(xt::allclose(a, expect, 1e-15, 0));

  xt::xtensor<float, 3> b = xt::random::randn<float>({2, 3, 4});
  auto vb = kiln::view_of(b);
  kiln::tensor<float> s = kiln::sum(vb, 1);
  const xt::xtensor<float, 2> ref = xt::sum(b, {1});
  const auto sv = s.to_vector();
  // xtensor sums in float, kiln in double: near cancellation they differ in the last
  // float bits of the terms (|terms| < ~5), so the margin is absolute.
  for (std::size_t i = 0; i < 8; ++i)
    CHECK(sv[i] == Approx(ref.data()[i]).epsilon(1e-6).margin(4e-6));
}

TEST_CASE("to_xtensor copies an expression out", "[xtensor]") {
  const auto t = kiln::random::uniform<float>({6, 4}, Catch::rngSeed());
  const auto x = kiln::to_xtensor(t.transpose() * 3.0f);
  REQUIRE(x.shape().size() == 2);
  CHECK(x.shape()[0] == 4);
  CHECK(x.shape()[1] == 6);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      CHECK(x(i, j) == t.at({j, i}) * 3.0f);
  // A column-major xtensor container is viewed through its own strides.
  xt::xarray<int, xt::layout_type::column_major> cm = {{1, 2, 3}, {4, 5, 6}};
  auto vc = kiln::view_of(cm);
  CHECK(vc.at({0, 2}) == 3);
  CHECK(vc.at({1, 0}) == 4);
  CHECK(kiln::to_xtensor(vc + 1)(1, 2) == 7);
}
