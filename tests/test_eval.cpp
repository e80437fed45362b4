// The fused host evaluator: random shapes with numpy broadcasting, strided inputs and
// outputs, laziness, returned expressions, multi-output passes and aliasing, all against
// double-precision loops written here.
#include "support.hpp"

namespace {

// A random shape of rank 0..4 and a second one that broadcasts with it.
std::pair<kiln::shape, kiln::shape> broadcast_pair() {
  kiln::shape a, b;
  const int ra = test::draw(0, 4), rb = test::draw(0, 4);
  const int r = std::max(ra, rb);
  for (int d = 0; d < r; ++d) {
    const std::int64_t n = test::draw(1, 7);
    const int pick = test::draw(0, 3); // 0: both n, 1: a is 1, 2: b is 1, 3: both n
    if (d >= r - ra) a.push_back(pick == 1 ? 1 : n);
    if (d >= r - rb) b.push_back(pick == 2 ? 1 : n);
  }
  return {a, b};
}

// Index into a row-major tensor of shape s for the broadcast multi-index idx (of rank r).
std::int64_t bindex(const kiln::shape& s, const std::vector<std::int64_t>& idx) {
  std::int64_t off = 0;
  const int lead = int(idx.size()) - s.size();
  for (int d = 0; d < s.size(); ++d)
    off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

kiln::tensor<float> make_local_expression_result(std::vector<float>& ref) {
  auto local = [](std::vector<float>& out) {
    const auto a = kiln::random::uniform<float>({1000}, 7); // local handles
    const auto b = kiln::random::uniform<float>({1000}, 8);
    const auto av = a.to_vector(), bv = b.to_vector();
    out.resize(1000);
    for (int i = 0; i < 1000; ++i)
      out[i] = float(double(av[i]) * 3 + std::exp(double(bv[i])));
    return a * 3.0f + kiln::exp(b); // an expression that outlives a and b's names
  };
  auto e = local(ref);
  return e;
}

} // namespace

TEST_CASE("random broadcast shapes and dtypes match a double loop", "[eval]") {
  for (int iter = 0; iter < 200; ++iter) {
    const auto [sa, sb] = broadcast_pair();
    const kiln::shape out = kiln::broadcast_shapes(sa, sb);
    const auto va = test::uniform<float>(kiln::numel(sa), -3, 3);
    const auto vb = test::integers<std::int32_t>(kiln::numel(sb), -5, 5);
    const auto a = kiln::from(va, sa);
    const auto b = kiln::from(vb, sb);
    INFO("shapes " << sa.str() << " and " << sb.str());
    kiln::tensor<float> r = a * b + kiln::sin(a) - 0.5f;
    kiln::tensor<double> r2 =
        kiln::where(b > 0, kiln::cast<double>(a), kiln::cast<double>(b) * 2.0);
    REQUIRE(r.shape() == out);
    const auto rv = r.to_vector();
    const auto r2v = r2.to_vector();
    std::vector<std::int64_t> idx(out.size(), 0);
    for (std::int64_t i = 0; i < kiln::numel(out); ++i) {
      const double x = va[bindex(sa, idx)], y = vb[bindex(sb, idx)];
      REQUIRE(rv[i] == Approx(x * y + std::sin(x) - 0.5).margin(2e-6).epsilon(2e-6));
      REQUIRE(r2v[i] == (y > 0 ? x : y * 2.0));
      for (int d = out.size() - 1; d >= 0; --d) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  }
}

TEST_CASE("strided inputs and strided outputs", "[eval]") {
  for (int iter = 0; iter < 30; ++iter) {
    const std::int64_t R = test::draw(1, 40), C = test::draw(1, 300);
    const auto v = test::uniform<double>(R * C * 2, -1, 1);
    const auto base = kiln::from(v, kiln::shape{R, C * 2});
    const auto odd = base.slice(1, 1, 2 * C, 2);                      // [R, C] with stride 2
    const auto tr = kiln::from(v, kiln::shape{C * 2, R}).transpose(); // [R, 2C] transposed
    auto out = kiln::zeros<double>({C, R});
    out.transpose() = odd * tr.narrow(1, 0, C) + 1.0; // strided target
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        const double e = v[i * 2 * C + 2 * j + 1] * v[j * R + i] + 1.0;
        REQUIRE(out.at({j, i}) == Approx(e).epsilon(1e-15));
      }
  }
  // An offset view: the middle of a buffer.
  const auto v = kiln::arange<float>(0, 100);
  kiln::tensor<float> m = v.narrow(0, 40, 20) * 2.0f;
  CHECK(m.at({0}) == 80.0f);
  CHECK(m.at({19}) == 118.0f);
}

TEST_CASE("nothing is computed until a result is needed", "[eval]") {
  auto a = kiln::from<float>({1, 2, 3});
  const auto e = a * 10.0f; // holds a's handle: no value yet
  a.data()[1] = 5;          // change the storage after building the expression
  CHECK(kiln::tensor<float>(e).to_vector() == std::vector<float>{10, 50, 30});
  a.data()[0] = 7;
  CHECK(e.eval().to_vector() == std::vector<float>{70, 50, 30});
  CHECK(e.to_vector()[0] == 70);
  CHECK(kiln::sum(e).item() == 150);
}

TEST_CASE("an expression returned from a function keeps its leaves alive", "[eval]") {
  std::vector<float> ref;
  const auto r = make_local_expression_result(ref).to_vector();
  for (int i = 0; i < 1000; ++i)
    CHECK(r[i] == Approx(ref[i]).epsilon(1e-6));
  // The same with the expression stored, not evaluated, and evaluated later.
  auto factory = [] {
    kiln::tensor<double> t = kiln::linspace<double>(0, 1, 11);
    return kiln::sqrt(t) + t;
  };
  const auto e = factory();
  const auto v = kiln::tensor<double>(e).to_vector();
  for (int i = 0; i <= 10; ++i)
    CHECK(v[i] == Approx(std::sqrt(i / 10.0) + i / 10.0));
}

TEST_CASE("several outputs in one pass", "[eval]") {
  const std::int64_t n = 50001;
  const auto va = test::uniform<float>(n, -2, 2), vb = test::uniform<float>(n, -2, 2);
  const auto a = kiln::from(va, kiln::shape{n}), b = kiln::from(vb, kiln::shape{n});
  auto r1 = kiln::empty<float>({n});
  auto r2 = kiln::empty<double>({n});
  auto r3 = kiln::empty<std::int32_t>({n});
  kiln::eval(r1 = a * b, r2 = kiln::cast<double>(a) - 1.0,
             r3 = kiln::cast<std::int32_t>(b * 100.0f));
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(r1.data()[i] == va[i] * vb[i]);
    REQUIRE(r2.data()[i] == double(va[i]) - 1.0);
    REQUIRE(r3.data()[i] == std::int32_t(vb[i] * 100.0f));
  }
  // Outputs that are also inputs: every value is read before any output is written.
  auto x = kiln::from(va, kiln::shape{n});
  auto y = kiln::from(vb, kiln::shape{n});
  kiln::eval(x = y + 1.0f, y = x * 2.0f); // y uses the old x
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(x.data()[i] == vb[i] + 1.0f);
    REQUIRE(y.data()[i] == va[i] * 2.0f);
  }
  // An output overlapping an input through another layout goes through temporaries.
  auto m = kiln::from(std::vector<float>(va.begin(), va.begin() + 100), kiln::shape{10, 10});
  auto s = kiln::empty<float>({10, 10});
  kiln::eval(m = m.transpose() + 0.0f, s = m * 1.0f);
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) {
      REQUIRE(m.at({i, j}) == va[j * 10 + i]);
      REQUIRE(s.at({i, j}) == va[i * 10 + j]);
    }
  auto bad = kiln::empty<float>({3});
  CHECK_THROWS_AS(kiln::eval(r1 = a * b, bad = kiln::ones<float>({3}) * 2.0f), kiln::error);
}

TEST_CASE("assignment aliasing: in place, transposed, shifted", "[eval]") {
  const std::int64_t n = test::draw(2, 60);
  const auto v = test::uniform<double>(n * n, -1, 1);
  auto a = kiln::from(v, kiln::shape{n, n});
  const auto b = kiln::ones<double>({n, n});
  a = a * 2.0 + b; // same layout: in place, no temporary needed
  for (std::int64_t i = 0; i < n * n; ++i)
    REQUIRE(a.data()[i] == v[i] * 2 + 1);
  a = kiln::from(v, kiln::shape{n, n});
  auto alias = a; // shares storage
  a = a.transpose();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      REQUIRE(alias.at({i, j}) == v[j * n + i]);
  a = alias.transpose() * 1.0 + 0.0; // an expression reading a transposed alias
  for (std::int64_t i = 0; i < n * n; ++i)
    REQUIRE(a.data()[i] == v[i]);
  // Shifted overlap in both directions.
  auto row = kiln::from(v, kiln::shape{n * n});
  row.narrow(0, 0, n * n - 1) = row.narrow(0, 1, n * n - 1);
  for (std::int64_t i = 0; i + 1 < n * n; ++i)
    REQUIRE(row.data()[i] == v[i + 1]);
  row = kiln::from(v, kiln::shape{n * n});
  row.narrow(0, 1, n * n - 1) = row.narrow(0, 0, n * n - 1) + 0.0;
  for (std::int64_t i = 1; i < n * n; ++i)
    REQUIRE(row.data()[i] == v[i - 1]);
  // Compound assignment, broadcasting a row into the target.
  auto c = kiln::zeros<double>({n, n});
  c += kiln::arange<double>(0, double(n));
  c *= 2.0;
  CHECK(c.at({n - 1, n - 1}) == 2.0 * double(n - 1));
}

TEST_CASE("a whole tensor assigned another shape takes new storage; a view cannot", "[eval]") {
  auto a = kiln::zeros<float>({4});
  auto shared = a;
  a = kiln::ones<float>({2, 3}) * 2.0f; // resize: a gets new storage
  CHECK(a.shape() == kiln::shape{2, 3});
  CHECK(shared.shape() == kiln::shape{4});
  CHECK(shared.to_vector() == std::vector<float>{0, 0, 0, 0});
  kiln::tensor<float> empty;
  empty = a + 1.0f;
  CHECK(empty.to_vector() == std::vector<float>(6, 3.0f));
  auto big = kiln::zeros<float>({4, 4});
  CHECK_THROWS_AS(big.narrow(0, 0, 2) = kiln::ones<float>({3, 4}) * 1.0f, kiln::error);
}
