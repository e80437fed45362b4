// Views: no copies, the right elements (checked by index arithmetic written here), and
// writes through a view land in the viewed storage.
#include "support.hpp"

namespace {
// Element (i, j, k) of a row-major [a, b, c] array holding 0, 1, 2, ...
double at3(std::int64_t b, std::int64_t c, std::int64_t i, std::int64_t j, std::int64_t k) {
  return double((i * b + j) * c + k);
}
} // namespace

TEST_CASE("reshape is a view when the layout allows, an error otherwise", "[views]") {
  const auto t = kiln::arange<double>(0, 24).reshape({2, 3, 4});
  REQUIRE(t.shape() == kiln::shape{2, 3, 4});
  const auto r = t.reshape({4, -1});
  CHECK(r.shape() == kiln::shape{4, 6});
  CHECK(r.data() == t.data());
  CHECK(r.at({3, 5}) == 23);
  // A transposed matrix regroups only along contiguous runs.
  const auto tt = t.permute({0, 2, 1}); // [2, 4, 3]
  CHECK(tt.reshape({2, 4, 3, 1}).data() == t.data());
  CHECK_THROWS_WITH(tt.reshape({2, 12}), Catch::Contains("contiguous()"));
  CHECK(tt.contiguous().reshape({2, 12}).at({1, 4}) == at3(3, 4, 1, 1, 1)); // (1, k=1, j=1)
  // Every other column: the elements are evenly spaced, so even a flat view exists.
  const auto s = t.slice(2, 0, 4, 2); // [2, 3, 2], strides [12, 4, 2]
  CHECK(s.reshape({6, 2}).at({5, 1}) == at3(3, 4, 1, 2, 2));
  CHECK(s.reshape({12}).at({11}) == 22);
  CHECK(s.reshape({12}).strides() == kiln::strides{2});
  // Dropping the first column leaves gaps between rows: rows can merge, not flatten.
  const auto g = t.slice(2, 1, 4); // [2, 3, 3], strides [12, 4, 1]
  CHECK_THROWS_WITH(g.reshape({18}), Catch::Contains("contiguous()"));
  CHECK(g.reshape({2, 3, 3, 1}).data() == g.data());
}

TEST_CASE("transpose, permute, narrow, slice and select pick the right elements", "[views]") {
  for (int rep = 0; rep < 20; ++rep) {
    const std::int64_t A = test::draw(1, 5), B = test::draw(1, 6), C = test::draw(1, 7);
    const auto t = kiln::arange<double>(0, double(A * B * C)).reshape({A, B, C});
    const auto p = t.permute({2, 0, 1});
    const auto tr = t.transpose();
    const std::int64_t st = test::draw(-3, 3) | 1; // odd, non-zero step
    const std::int64_t start = test::draw(-int(C), int(C)), stop = test::draw(-int(C), int(C) + 2);
    const auto sl = t.slice(2, start, stop, st);
    // numpy's slice length rule, written independently.
    auto norm = [&](std::int64_t v, bool is_stop) {
      if (v < 0) v += C;
      if (st > 0) return std::clamp<std::int64_t>(v, 0, C);
      return std::clamp<std::int64_t>(v, -1, C - 1) + (is_stop ? 0 : 0);
    };
    const std::int64_t s0 = norm(start, false), s1 = norm(stop, true);
    std::vector<std::int64_t> ks;
    for (std::int64_t k = s0; st > 0 ? k < s1 : k > s1; k += st)
      ks.push_back(k);
    REQUIRE(sl.shape() == kiln::shape{A, B, std::int64_t(ks.size())});
    const std::int64_t n0 = test::draw(0, int(B) - 1), len = test::draw(0, int(B - n0));
    const auto nr = t.narrow(1, n0, len);
    REQUIRE(nr.shape() == kiln::shape{A, len, C});
    for (std::int64_t i = 0; i < A; ++i)
      for (std::int64_t j = 0; j < B; ++j)
        for (std::int64_t k = 0; k < C; ++k) {
          REQUIRE(p.at({k, i, j}) == at3(B, C, i, j, k));
          REQUIRE(tr.at({k, j, i}) == at3(B, C, i, j, k));
          if (j < len) REQUIRE(nr.at({i, j, k}) == at3(B, C, i, n0 + j, k));
        }
    for (std::int64_t i = 0; i < A; ++i)
      for (std::int64_t j = 0; j < B; ++j)
        for (std::size_t q = 0; q < ks.size(); ++q)
          REQUIRE(sl.at({i, j, std::int64_t(q)}) == at3(B, C, i, j, ks[q]));
    // Values through an expression over the view match too.
    const auto v = kiln::tensor<double>(sl * 2.0).to_vector();
    for (std::size_t q = 0; q < v.size(); ++q) {
      const std::int64_t i = q / (B * ks.size()), j = (q / ks.size()) % B;
      REQUIRE(v[q] == 2 * at3(B, C, i, j, ks[q % ks.size()]));
    }
  }
}

TEST_CASE("indexing with integers, ranges, all and newaxis", "[views]") {
  const auto t = kiln::arange<std::int32_t>(0, 60).reshape({3, 4, 5});
  const auto a = t(1, kiln::all, kiln::range{1, 5, 2}); // [4, 2]
  REQUIRE(a.shape() == kiln::shape{4, 2});
  for (int j = 0; j < 4; ++j)
    for (int q = 0; q < 2; ++q)
      CHECK(a.at({j, q}) == (1 * 4 + j) * 5 + 1 + 2 * q);
  const auto b = t(-1, kiln::newaxis, 2); // last block, new axis, row 2: [1, 5]
  REQUIRE(b.shape() == kiln::shape{1, 5});
  CHECK(b.at({0, 4}) == (2 * 4 + 2) * 5 + 4);
  const auto c = t(kiln::range{}, kiln::range{-1, -5, -1}); // reversed dim 1
  REQUIRE(c.shape() == kiln::shape{3, 4, 5});
  CHECK(c.at({0, 0, 0}) == 15);
  const auto d = t(2, 3, 4);
  CHECK(d.rank() == 0);
  CHECK(d.item() == 59);
  CHECK_THROWS_AS(t(0, 0, 0, 0), kiln::error);
  CHECK_THROWS_AS(t(3), kiln::error);
  CHECK_THROWS_AS(t(0, -5), kiln::error);
}

TEST_CASE("squeeze, unsqueeze, broadcast_to", "[views]") {
  const auto t = kiln::arange<float>(0, 6).reshape({1, 2, 1, 3});
  CHECK(t.squeeze().shape() == kiln::shape{2, 3});
  CHECK(t.squeeze(2).shape() == kiln::shape{1, 2, 3});
  CHECK(t.squeeze(-4).shape() == kiln::shape{2, 1, 3});
  const auto u = t.squeeze().unsqueeze(1).unsqueeze(-1);
  CHECK(u.shape() == kiln::shape{2, 1, 3, 1});
  CHECK(u.at({1, 0, 2, 0}) == 5);
  const auto row = kiln::arange<float>(0, 3);
  const auto bc = row.broadcast_to({4, 3});
  CHECK(bc.strides() == kiln::strides{0, 1});
  CHECK(bc.data() == row.data());
  CHECK(bc.at({3, 2}) == 2);
  CHECK_THROWS_AS(row.broadcast_to({4, 2}), kiln::error);
  CHECK_THROWS_AS(t.squeeze(1), kiln::error);
}

TEST_CASE("contiguous and clone", "[views]") {
  const auto t = kiln::arange<float>(0, 12).reshape({3, 4});
  CHECK(t.contiguous().data() == t.data());
  const auto tt = t.transpose();
  CHECK_FALSE(tt.is_contiguous());
  const auto c = tt.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.data() != t.data());
  CHECK(c.to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  auto k = t.clone();
  k = 1.0f;
  CHECK(t.at({0, 0}) == 0);
}

TEST_CASE("writing through a view writes the underlying storage", "[views]") {
  auto t = kiln::zeros<double>({4, 5});
  const auto src = test::uniform<double>(10, -1, 1);
  const auto s = kiln::from(src, kiln::shape{2, 5});
  t.narrow(0, 1, 2) = s * 2.0;                   // rows 1..2
  t(kiln::all, 0) = 7.0;                         // column 0 (a scalar fill)
  t.transpose()(4, kiln::range{0, 4, 3}) = -1.0; // t[0, 4] and t[3, 4]
  auto v = t(3, kiln::range{1, 3});
  v = v + 5.0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      double e = 0;
      if (i >= 1 && i <= 2) e = 2 * src[(i - 1) * 5 + j];
      if (j == 0) e = 7;
      if (j == 4 && (i == 0 || i == 3)) e = -1;
      if (i == 3 && (j == 1 || j == 2)) e = 5;
      INFO(i << "," << j);
      CHECK(t.at({i, j}) == e);
    }
  // A view of a view of a view still writes the original.
  auto w = t.reshape({20}).slice(0, 19, -21, -4)(kiln::range{0, 2}); // elements 19, 15
  w = 100.0;
  CHECK(t.at({3, 4}) == 100.0);
  CHECK(t.at({3, 0}) == 100.0);
}
