// Creation functions against values computed here.
#include "support.hpp"

#include <span>

TEST_CASE("from a vector, a span and an initializer list", "[creation]") {
  const auto v = test::uniform<double>(24, -5, 5);
  const auto a = kiln::from(v, kiln::shape{2, 3, 4});
  CHECK(a.shape() == kiln::shape{2, 3, 4});
  CHECK(a.is_contiguous());
  CHECK(a.to_vector() == v);
  const auto s = kiln::from(std::span<const double>(v).subspan(4, 6), kiln::shape{6});
  CHECK(s.to_vector() == std::vector<double>(v.begin() + 4, v.begin() + 10));
  const auto i = kiln::from<std::int32_t>({3, 1, 4, 1, 5, 9}, kiln::shape{3, 2});
  CHECK(i.at({2, 1}) == 9);
  CHECK(kiln::from<float>({1, 2}).shape() == kiln::shape{2});
  // The tensor owns a copy: changing the source afterwards does not change it.
  auto w = v;
  const auto c = kiln::from(w, kiln::shape{24});
  w[0] = 1e9;
  CHECK(c.at({0}) == v[0]);
}

TEST_CASE("zeros, ones, full, empty", "[creation]") {
  const auto z = kiln::zeros<std::int64_t>({3, 0});
  CHECK(z.size() == 0);
  CHECK(kiln::zeros<float>({4}).to_vector() == std::vector<float>(4, 0.0f));
  CHECK(kiln::ones<kiln::half>({2, 2}).to_vector()[3] == kiln::half(1.0f));
  const auto f = kiln::full<double>({2, 3}, -2.5);
  CHECK(f.to_vector() == std::vector<double>(6, -2.5));
  CHECK(kiln::full<float>({}, 7.0f).item() == 7.0f); // rank 0: one element
  CHECK(kiln::empty<float>({5, 5}).size() == 25);
}

TEST_CASE("arange and linspace", "[creation]") {
  const double start = test::draw(-10, 10),
               step = test::draw(1, 4) * (test::draw(0, 1) ? 0.5 : -0.25);
  const double stop = start + step * test::draw(0, 40) + step / 3;
  const auto a = kiln::arange<double>(start, stop, step).to_vector();
  std::vector<double> ref;
  for (int k = 0; step > 0 ? start + k * step < stop : start + k * step > stop; ++k)
    ref.push_back(start + k * step);
  CHECK(a == ref);
  CHECK(kiln::arange<std::int32_t>(5).to_vector() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(kiln::arange<float>(3, 1).size() == 0);
  const auto l = kiln::linspace<double>(-1, 2, 7).to_vector();
  REQUIRE(l.size() == 7);
  for (int k = 0; k < 7; ++k)
    CHECK(l[k] == Approx(-1 + 0.5 * k).margin(1e-15));
  CHECK(l.back() == 2.0); // the end point is exact
  CHECK(kiln::linspace<float>(3, 9, 1).to_vector() == std::vector<float>{3});
  CHECK(kiln::linspace<float>(3, 9, 0).size() == 0);
}

TEST_CASE("eye", "[creation]") {
  const std::int64_t n = test::draw(1, 9), m = test::draw(1, 9);
  const auto e = kiln::eye<float>(n, m);
  REQUIRE(e.shape() == kiln::shape{n, m});
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      REQUIRE(e.at({i, j}) == (i == j ? 1.0f : 0.0f));
  CHECK(kiln::sum(kiln::eye<std::int32_t>(5)).item() == 5);
}
