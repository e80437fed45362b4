// The fused host evaluator: random shapes with numpy broadcasting, strided inputs and
// outputs, laziness, returned expressions, multi-output passes and aliasing, all against
// double-precision loops written here.
#include "support.hpp"

#include <kiln/xtensor.hpp>

#include <xtensor/xadapt.hpp>

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
        // a*b + 1 may be one FMA in either computation (clang contracts the reference):
        // they may differ by an ulp of 1, which cancellation can make large relative to e.
        REQUIRE(out.at({j, i}) == Approx(e).epsilon(1e-15).margin(1e-15));
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
  // Targets of different layouts: each output is written through its own strides.
  auto plain = kiln::empty<float>({10, 10});
  auto backing = kiln::empty<float>({10, 10});
  auto flipped = backing.transpose();
  const auto ma = kiln::from(std::vector<float>(va.begin(), va.begin() + 100), kiln::shape{10, 10});
  kiln::eval(plain = ma + 1.0f, flipped = ma * 2.0f);
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) {
      REQUIRE(plain.at({i, j}) == va[i * 10 + j] + 1.0f);
      REQUIRE(backing.at({j, i}) == va[i * 10 + j] * 2.0f);
    }
  // Outputs of different shapes: one pass per shape.
  auto other = kiln::empty<float>({3});
  const auto c = kiln::from<float>({1.5f, -2.0f, 4.0f}, {3});
  kiln::eval(r1 = a * b, other = c * 2.0f, r2 = kiln::cast<double>(b));
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(r1.data()[i] == va[i] * vb[i]);
    REQUIRE(r2.data()[i] == double(vb[i]));
  }
  CHECK(other.to_vector() == std::vector<float>{3.0f, -4.0f, 8.0f});
  // A target that cannot hold its expression's shape is still an error, before any write.
  // (A view is not rebound to a new shape as a whole tensor handle would be.)
  auto backing3 = kiln::full<float>({5}, 7.0f);
  auto bad = backing3.narrow(0, 1, 3);
  CHECK_THROWS_AS(kiln::eval(r1 = a * b * 0.0f, bad = kiln::ones<float>({4}) * 2.0f), kiln::error);
  CHECK(r1.data()[0] == va[0] * vb[0]);
  CHECK(backing3.to_vector() == std::vector<float>(5, 7.0f));
}

// Outputs of one expression type in one pass run one out-of-line copy of that type's code
// (eval/kernel.hpp), each on its own leaves and scalars: the batch loop, the tail, and the
// lane-by-lane loop of a pass that cannot be vectorized, with outputs that are inputs.
TEST_CASE("outputs of one expression type in one pass each read their own operands", "[eval]") {
  for (const std::int64_t n :
       {std::int64_t{1}, std::int64_t{7}, std::int64_t{1000 + test::draw(0, 99)}}) {
    INFO("n = " << n);
    std::vector<std::vector<float>> v;
    for (int i = 0; i < 4; ++i)
      v.push_back(test::uniform<float>(n, -2, 2));
    auto x = kiln::from(v[0], kiln::shape{n}), y = kiln::from(v[1], kiln::shape{n}),
         z = kiln::from(v[2], kiln::shape{n});
    const auto w = kiln::from(v[3], kiln::shape{n});
    const float c = test::uniform<float>(1, 0.5, 2)[0];
    // Three outputs of the type exp(t * s) + t, a permutation of x, y, z: each reads the old
    // values of the others.
    kiln::eval(x = kiln::exp(y * c) + w, y = kiln::exp(z * 0.5f) + x, z = kiln::exp(x * -c) + y);
    // f32 rounding of both terms: relative to their sizes (a sum near 0 cancels).
    const auto near = [](float got, double e, double t) {
      return std::fabs(got - (e + t)) <= 1e-6 * (std::fabs(e) + std::fabs(t));
    };
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(near(x.data()[i], std::exp(double(v[1][i]) * c), v[3][i]));
      REQUIRE(near(y.data()[i], std::exp(double(v[2][i]) * 0.5), v[0][i]));
      REQUIRE(near(z.data()[i], std::exp(double(v[0][i]) * -c), v[1][i]));
    }
    // Mixed widths (f64 beside f32) take the lane-by-lane loop.
    const auto k = kiln::from(test::uniform<float>(n, -100, 100), kiln::shape{n});
    auto p = kiln::empty<double>({n}), q = kiln::empty<double>({n});
    auto r = kiln::empty<float>({n});
    kiln::eval(p = kiln::cast<double>(k * 2.0f), q = kiln::cast<double>(k * -3.0f), r = k * 2.0f);
    const auto kv = k.to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(p.data()[i] == double(kv[i] * 2.0f));
      REQUIRE(q.data()[i] == double(kv[i] * -3.0f));
      REQUIRE(r.data()[i] == kv[i] * 2.0f);
    }
  }
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

TEST_CASE("a whole tensor assigned another shape takes new storage, a view cannot", "[eval]") {
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

// --- Random layouts: every operand and the target as views over larger buffers.
namespace {

kiln::shape random_out_shape() {
  kiln::shape s = test::random_shape(0, 4, 7);
  // Sometimes one long dim (threads, long rows), the total kept under ~600k elements.
  if (s.size() > 0 && test::draw(0, 3) == 0) {
    const int d = test::draw(0, s.size() - 1);
    s[d] = 1;
    if (kiln::numel(s) <= 16) s[d] = test::draw(1000, 40000);
  }
  return s;
}

// A shape that broadcasts to `out`: a suffix of its dims, some of them 1.
kiln::shape broadcastable_to(const kiln::shape& out) {
  kiln::shape s;
  const int r = test::draw(0, out.size());
  for (int d = out.size() - r; d < out.size(); ++d)
    s.push_back(test::draw(0, 2) == 0 ? 1 : out[d]);
  return s;
}

template <class T>
kiln::tensor<T> permuted(const kiln::tensor<T>& t, const std::vector<std::int64_t>& q) {
  switch (q.size()) {
  case 0:
    return t;
  case 1:
    return t.permute({q[0]});
  case 2:
    return t.permute({q[0], q[1]});
  case 3:
    return t.permute({q[0], q[1], q[2]});
  default:
    return t.permute({q[0], q[1], q[2], q[3]});
  }
}

// A view of shape s over a bigger buffer filled with `fill`: dims permuted in memory,
// stepped by 1..3 in either direction, offset; its elements (row-major) set to vals by
// pointer arithmetic. With `plain`, just a contiguous tensor.
template <class T>
kiln::tensor<T> scattered(const kiln::shape& s, const std::vector<T>& vals, T fill, bool plain) {
  if (plain) return kiln::from(vals, s);
  const int r = s.size();
  std::vector<std::int64_t> perm(static_cast<std::size_t>(r)), inv(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), test::rng());
  kiln::shape bs;
  std::vector<std::int64_t> step(static_cast<std::size_t>(r)), off(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) {
    const std::int64_t n = s[int(perm[i])];
    step[i] = test::draw(1, n > 1000 ? 2 : 3) * (test::draw(0, 1) ? -1 : 1);
    off[i] = test::draw(0, 2);
    bs.push_back(off[i] + (n - 1) * std::abs(step[i]) + 1 + test::draw(0, 2));
    inv[std::size_t(perm[i])] = i;
  }
  std::vector<kiln::tensor<T>> v{kiln::full<T>(bs, fill)};
  for (int i = 0; i < r; ++i) {
    const std::int64_t n = s[int(perm[i])];
    v.push_back(v.back().narrow(i, off[i], (n - 1) * std::abs(step[i]) + 1));
    v.push_back(step[i] > 0
                    ? v.back().slice(i, 0, std::numeric_limits<std::int64_t>::max(), step[i])
                    : v.back().slice(i, -1, std::numeric_limits<std::int64_t>::min(), step[i]));
  }
  const auto view = permuted(v.back(), inv);
  REQUIRE(view.shape() == s);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(r), 0);
  for (std::size_t k = 0; k < vals.size(); ++k) {
    std::int64_t o = 0;
    for (int d = 0; d < r; ++d)
      o += idx[d] * view.strides()[d];
    view.data()[o] = vals[k];
    test::next_index(idx, s);
  }
  return view;
}

// Every element of the buffer under `view` that the view does not cover still holds fill.
template <class T>
std::size_t count_outside_changed(const kiln::tensor<T>& view, T fill) {
  const T* base = static_cast<const T*>(view.storage()->data());
  std::vector<char> covered(std::size_t(view.storage()->count()), 0);
  std::vector<std::int64_t> idx(std::size_t(view.rank()), 0);
  for (std::int64_t k = 0; k < view.size(); ++k) {
    std::int64_t o = view.data() - base;
    for (int d = 0; d < view.rank(); ++d)
      o += idx[d] * view.strides()[d];
    covered[std::size_t(o)] = 1;
    test::next_index(idx, view.shape());
  }
  std::size_t changed = 0;
  for (std::size_t i = 0; i < covered.size(); ++i)
    changed += !covered[i] && !(base[i] == fill);
  return changed;
}

template <class T>
std::vector<T> read(const kiln::tensor<T>& view) { // row-major, by pointer arithmetic
  std::vector<T> out;
  std::vector<std::int64_t> idx(std::size_t(view.rank()), 0);
  for (std::int64_t k = 0; k < view.size(); ++k) {
    std::int64_t o = 0;
    for (int d = 0; d < view.rank(); ++d)
      o += idx[d] * view.strides()[d];
    out.push_back(view.data()[o]);
    test::next_index(idx, view.shape());
  }
  return out;
}

} // namespace

TEST_CASE("random shapes, broadcasting, strided and offset operands and targets", "[eval]") {
  for (int iter = 0; iter < 120; ++iter) {
    kiln::set_num_threads(test::draw(1, 2));
    const kiln::shape out = random_out_shape();
    const kiln::shape sa = broadcastable_to(out), sb = broadcastable_to(out),
                      sc = broadcastable_to(out);
    const auto va = test::uniform<float>(kiln::numel(sa), -2, 2);
    const auto vb = test::integers<std::int32_t>(kiln::numel(sb), -1000, 1000);
    const auto vc = test::uniform<double>(kiln::numel(sc), -1e3, 1e3);
    const auto a = scattered(sa, va, float(NAN), test::draw(0, 3) == 0);
    const auto b = scattered(sb, vb, -7, test::draw(0, 3) == 0);
    const auto c = scattered(sc, vc, double(NAN), test::draw(0, 3) == 0);
    INFO("out " << out.str() << ", a " << sa.str() << " strides " << a.strides().str() << ", b "
                << sb.str() << " strides " << b.strides().str() << ", c " << sc.str() << " strides "
                << c.strides().str() << ", threads " << kiln::num_threads());
    // Float result of mixed f32/i32 (SIMD conversions), into a fresh tensor.
    auto r1 = kiln::zeros<float>(out); // broadcast into the target's shape
    r1 = a * b - kiln::exp(a * 0.25f);
    // f64 result into a strided target inside a bigger buffer.
    const std::vector<double> zero(std::size_t(kiln::numel(out)), 0.0);
    auto target = scattered(out, zero, -99.0, test::draw(0, 3) == 0);
    target = c * a + b;
    // An i32 result of integer ops with a scalar, into a contiguous target.
    kiln::tensor<std::int32_t> r3 = kiln::maximum(b * 3, -b) % 7 + kiln::zeros<std::int32_t>(out);
    REQUIRE(r1.shape() == out);
    REQUIRE(r3.shape() == out);
    const auto v1 = r1.clone().to_vector();
    const auto v2 = read(target);
    const auto v3 = r3.to_vector();
    std::vector<std::int64_t> idx(std::size_t(out.size()), 0);
    for (std::int64_t k = 0; k < kiln::numel(out); ++k) {
      const double x = va[test::broadcast_offset(sa, idx)];
      const double y = vb[test::broadcast_offset(sb, idx)];
      const double z = vc[test::broadcast_offset(sc, idx)];
      REQUIRE(v1[k] == Approx(x * y - std::exp(x * 0.25)).epsilon(1e-6).margin(1e-6));
      REQUIRE(v2[k] == Approx(z * x + y).epsilon(1e-14).margin(1e-12));
      const std::int64_t iy = std::int64_t(y);
      REQUIRE(v3[k] == std::max(iy * 3, -iy) % 7);
      test::next_index(idx, out);
    }
    REQUIRE(count_outside_changed(target, -99.0) == 0);
  }
  kiln::set_num_threads(2);
}

TEST_CASE("one-element passes read and write the one element of views at offsets", "[eval]") {
  // A pass of one element is a row of one (iteration_space::merge): every operand is read
  // at its own offset, whatever its strides, and nothing else in its buffer is touched.
  for (const kiln::shape& out : {kiln::shape{}, kiln::shape{1}, kiln::shape{1, 1, 1}}) {
    for (int iter = 0; iter < 20; ++iter) {
      const kiln::shape sa = broadcastable_to(out), sb = broadcastable_to(out);
      const auto va = test::uniform<float>(1, -2, 2);
      const auto vb = test::uniform<double>(1, -2, 2);
      const auto a = scattered(sa, va, float(NAN), test::draw(0, 2) == 0);
      const auto b = scattered(sb, vb, double(NAN), test::draw(0, 2) == 0);
      auto t1 = scattered(out, std::vector<double>{0.0}, -99.0, test::draw(0, 2) == 0);
      auto t2 = scattered(out, std::vector<float>{0.0f}, -99.0f, test::draw(0, 2) == 0);
      INFO("out " << out.str() << ", a " << sa.str() << " strides " << a.strides().str() << ", b "
                  << sb.str() << " strides " << b.strides().str());
      const auto shared = kiln::exp(a * 0.5f) + b; // one subexpression in both outputs
      kiln::eval(t1 = shared * b, t2 = kiln::cast<float>(shared - a));
      const double x = va[0], y = vb[0], ex = std::exp(double(float(x * 0.5))), e = ex + y;
      // exp is f32 (a is): its last-bit error, scaled by what multiplies it, is the margin
      // (e = ex + y may cancel, so a relative tolerance alone is not enough).
      const double f32_exp = 2.5e-7 * ex;
      CHECK(read(t1)[0] ==
            Approx(e * y).epsilon(0).margin(f32_exp * std::abs(y) + 1e-15 * std::abs(e * y)));
      CHECK(read(t2)[0] == // and the rounding to f32
            Approx(e - x).epsilon(0).margin(f32_exp + 6e-8 * std::abs(e - x)));
      CHECK(count_outside_changed(t1, -99.0) == 0);
      CHECK(count_outside_changed(t2, -99.0f) == 0);
      const kiln::tensor<double> fresh = a + b * 2.0;
      CHECK(fresh.shape().size() == std::max(sa.size(), sb.size()));
      CHECK(fresh.item() == Approx(x + 2 * y).epsilon(1e-12));
    }
  }
}

TEST_CASE("runs that end between two batches: every element once, in place or apart", "[eval]") {
  // A run whose length is not a multiple of the batch ends with a batch over its last
  // elements where no output shares memory with an input (some recomputed), else with the
  // padded tail. Every length from 1 to 70 (f32 and f64 batches of 2 to 16), contiguous
  // and as rows of a view (f32 rows at every offset within a batch); shared subexpressions
  // across two outputs; and in place.
  for (std::int64_t n = 1; n <= 70; ++n) {
    INFO("n " << n);
    const auto va = test::uniform<float>(std::size_t(n), -2, 2);
    const auto vb = test::uniform<double>(std::size_t(n), -2, 2);
    const auto a = kiln::from(va, kiln::shape{n});
    const auto b = kiln::from(vb, kiln::shape{n});
    const auto shared = kiln::exp(a * 0.5f) * 3.0f; // one memo site, two outputs
    kiln::tensor<float> z1 = kiln::zeros<float>({n});
    kiln::tensor<double> z2 = kiln::zeros<double>({n});
    kiln::eval(z1 = shared + a, z2 = shared * b);
    // Rows of a 3 x (n + 2) buffer: the interior columns, a row of n at an odd offset.
    auto big = kiln::full<double>({3, n + 2}, -7.0);
    const auto rows =
        kiln::from(test::uniform<double>(std::size_t(3 * n), -1, 1), kiln::shape{3, n});
    big.narrow(1, 1, n) = rows * 2.0 - b;
    // Rows of f32 starting at every offset within a batch as n goes (the batches after the
    // first start where a row's stores are aligned, the first covering those before).
    const std::int64_t off = n % 17;
    auto wide = kiln::full<float>({2, n + off + 1}, -7.0f);
    wide.narrow(1, off, n) = kiln::exp(a * 0.25f) - a;
    // In place: the output is an input, so the tail path.
    auto c = kiln::from(vb, kiln::shape{n});
    c = c * c + 1.0;
    const auto r1 = z1.to_vector();
    const auto r2 = z2.to_vector();
    const auto rb = big.to_vector(), rr = rows.to_vector(), rc = c.to_vector();
    const auto rw = wide.to_vector();
    const std::int64_t ww = n + off + 1;
    for (std::int64_t row = 0; row < 2; ++row)
      for (std::int64_t i = 0; i < ww; ++i) {
        const float got = rw[std::size_t(row * ww + i)];
        if (i < off || i >= off + n) {
          REQUIRE(got == -7.0f);
        } else {
          const double x = va[std::size_t(i - off)], e = std::exp(x * 0.25) - x;
          REQUIRE(got == Approx(e).epsilon(0).margin(1e-6 * (std::abs(x) + 2)));
        }
      }
    for (std::int64_t i = 0; i < n; ++i) {
      const double e = std::exp(double(va[i]) * 0.5) * 3.0;
      REQUIRE(r1[i] == Approx(e + va[i]).epsilon(0).margin(1e-6 * (e + 2)));
      REQUIRE(r2[i] == Approx(e * vb[i]).epsilon(0).margin(1e-6 * e * (std::abs(vb[i]) + 1)));
      // (one rounding or two: the compiler may contract c * c + 1 into an FMA on either side)
      REQUIRE(rc[i] == Approx(vb[i] * vb[i] + 1.0).epsilon(0).margin(5e-16 * (vb[i] * vb[i] + 1)));
      for (std::int64_t row = 0; row < 3; ++row)
        REQUIRE(rb[std::size_t(row * (n + 2) + 1 + i)] ==
                rr[std::size_t(row * n + i)] * 2.0 - vb[i]);
    }
    for (std::int64_t row = 0; row < 3; ++row) { // the columns around the view untouched
      REQUIRE(rb[std::size_t(row * (n + 2))] == -7.0);
      REQUIRE(rb[std::size_t(row * (n + 2) + n + 1)] == -7.0);
    }
  }
}

TEST_CASE("one thread and two threads give identical elementwise results", "[eval]") {
  for (int iter = 0; iter < 8; ++iter) {
    const std::int64_t r = test::draw(1, 300), c = test::draw(200, 3000);
    const auto va = test::uniform<float>(r * c * 2, -3, 3);
    const auto vb = test::uniform<double>(c, -3, 3);
    const auto base = kiln::from(va, kiln::shape{r, 2 * c});
    const auto a = base.slice(1, 2 * c - 1, std::numeric_limits<std::int64_t>::min(), -2); // [r, c]
    const auto b = kiln::from(vb, kiln::shape{c});
    auto run = [&](int threads) {
      kiln::set_num_threads(threads);
      kiln::tensor<double> x = kiln::tanh(a) * b + kiln::erf(b) - kiln::sqrt(kiln::abs(a));
      kiln::tensor<float> y = kiln::where(a > 0, kiln::sin(a), kiln::cos(a) * 2.0f);
      auto z = kiln::zeros<float>({c, r});
      z.transpose() = a * a + 1.0f; // strided target
      return std::make_tuple(x.to_vector(), y.to_vector(), z.to_vector());
    };
    const auto one = run(1), two = run(2);
    INFO("shape [" << r << ", " << c << "]");
    CHECK((std::get<0>(one) == std::get<0>(two)));
    CHECK((std::get<1>(one) == std::get<1>(two)));
    CHECK((std::get<2>(one) == std::get<2>(two)));
  }
  kiln::set_num_threads(2);
}

TEST_CASE("laziness: leaves are read when the expression is evaluated", "[eval]") {
  const std::int64_t n = test::draw(10, 5000);
  const auto v = test::uniform<double>(n, -1, 1), w = test::uniform<double>(n, -1, 1);
  auto a = kiln::from(v, kiln::shape{n});
  const auto b = kiln::from(w, kiln::shape{n});
  const auto e = kiln::exp(a) * b + a;                 // nothing computed yet
  a.narrow(0, 0, n / 2) = b.narrow(0, 0, n / 2) * 3.0; // change a through a view, via kiln
  a(n - 1) = 42.0;                                     // and one element by indexing
  const auto r = kiln::tensor<double>(e).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = i < n / 2 ? w[i] * 3.0 : i == n - 1 ? 42.0 : v[i];
    REQUIRE(r[i] == Approx(std::exp(x) * w[i] + x).epsilon(1e-14).margin(1e-14));
  }
  // A reduction inside an expression is lazy too.
  auto s = kiln::from(v, kiln::shape{n});
  const auto centred = s - kiln::mean(s);
  s = 1.0;
  const auto cv = kiln::tensor<double>(centred).to_vector();
  for (auto x : cv)
    REQUIRE(x == 0.0);
}

TEST_CASE("expressions kept in containers outlive the tensors they were built from", "[eval]") {
  std::vector<decltype(kiln::tensor<float>() * 2.0f + kiln::tensor<float>())> exprs;
  std::vector<std::vector<float>> refs;
  for (int k = 0; k < 5; ++k) {
    const std::int64_t n = test::draw(1, 3000);
    const auto v = test::uniform<float>(n, -1, 1), w = test::uniform<float>(n, -1, 1);
    {
      const auto a = kiln::from(v, kiln::shape{n});
      const auto b = kiln::from(w, kiln::shape{n});
      exprs.push_back(a * 2.0f + b); // a and b go out of scope here
    }
    std::vector<float> ref(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      ref[i] = v[i] * 2.0f + w[i];
    refs.push_back(ref);
  }
  for (std::size_t k = 0; k < exprs.size(); ++k) {
    const auto r = kiln::tensor<float>(exprs[k]).to_vector();
    REQUIRE(r.size() == refs[k].size());
    for (std::size_t i = 0; i < r.size(); ++i)
      REQUIRE(r[i] == Approx(refs[k][i]).epsilon(1e-6));
  }
}

TEST_CASE("aliasing: reversed, broadcast and shifted reads of the target", "[eval]") {
  for (std::int64_t n :
       {std::int64_t(test::draw(2, 200)), std::int64_t(test::draw(70000, 200000))}) {
    const auto v = test::uniform<double>(n, -1, 1);
    auto a = kiln::from(v, kiln::shape{n});
    // Reversal onto itself: the input is the target read backwards.
    a = a.slice(0, -1, std::numeric_limits<std::int64_t>::min(), -1) * 1.0;
    for (std::int64_t i = 0; i < n; ++i)
      REQUIRE(a.data()[i] == v[n - 1 - i]);
    a = a.slice(0, -1, std::numeric_limits<std::int64_t>::min(), -1); // a plain copy of a view
    for (std::int64_t i = 0; i < n; ++i)
      REQUIRE(a.data()[i] == v[i]);
    // Interleaved halves swap: even <- odd.
    auto b = kiln::from(v, kiln::shape{n});
    const std::int64_t h = n / 2;
    b.slice(0, 0, 2 * h, 2) = b.slice(0, 1, 2 * h, 2) + 0.0;
    for (std::int64_t i = 0; i < h; ++i)
      REQUIRE(b.data()[2 * i] == v[2 * i + 1]);
    // Shifts by k in both directions, k drawn.
    const std::int64_t k = test::draw(1, int(std::min<std::int64_t>(n - 1, 5000)));
    auto c = kiln::from(v, kiln::shape{n});
    c.narrow(0, k, n - k) = c.narrow(0, 0, n - k) * 2.0; // reads behind the write
    for (std::int64_t i = k; i < n; ++i)
      REQUIRE(c.data()[i] == v[i - k] * 2.0);
    c = kiln::from(v, kiln::shape{n});
    c.narrow(0, 0, n - k) = c.narrow(0, k, n - k); // reads ahead of the write
    for (std::int64_t i = 0; i < n - k; ++i)
      REQUIRE(c.data()[i] == v[i + k]);
  }
  // A row of the target broadcast over the target.
  const std::int64_t r = test::draw(2, 300), m = test::draw(2, 300);
  const auto v = test::uniform<float>(r * m, -1, 1);
  auto t = kiln::from(v, kiln::shape{r, m});
  t = t + t(0);
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      REQUIRE(t.at({i, j}) == v[i * m + j] + v[j]);
  // Square matrices, large enough for threads: a = a.transpose() and an expression of it.
  const std::int64_t n = test::draw(200, 700);
  const auto w = test::uniform<float>(n * n, -1, 1);
  auto sq = kiln::from(w, kiln::shape{n, n});
  sq = sq.transpose();
  std::size_t wrong = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      wrong += sq.data()[i * n + j] != w[j * n + i];
  CHECK(wrong == 0);
  sq = sq.transpose() * 2.0f - sq; // transposed back, times 2, minus itself
  wrong = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      wrong += sq.data()[i * n + j] != w[i * n + j] * 2.0f - w[j * n + i];
  CHECK(wrong == 0);
  // Rows shifted within a matrix: a.narrow(0, 0, n - 1) = a.narrow(0, 1, n - 1).
  auto rows = kiln::from(w, kiln::shape{n, n});
  rows.narrow(0, 0, n - 1) = rows.narrow(0, 1, n - 1);
  rows.narrow(1, 1, n - 1) = rows.narrow(1, 0, n - 1) + 0.0f; // columns, the other way
  wrong = 0;
  for (std::int64_t i = 0; i + 1 < n; ++i)
    for (std::int64_t j = 1; j < n; ++j)
      wrong += rows.data()[i * n + j] != w[(i + 1) * n + j - 1];
  CHECK(wrong == 0);
}

TEST_CASE("multi-output passes: aliasing between outputs and inputs", "[eval]") {
  const std::int64_t n = test::draw(2, 100000);
  const auto va = test::uniform<float>(n, -2, 2), vb = test::uniform<float>(n, -2, 2);
  // Swap through one pass.
  auto x = kiln::from(va, kiln::shape{n});
  auto y = kiln::from(vb, kiln::shape{n});
  kiln::eval(x = y * 1.0f, y = x * 1.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(x.data()[i] == vb[i]);
    REQUIRE(y.data()[i] == va[i]);
  }
  // Outputs of different types, one also an input read reversed.
  auto p = kiln::from(va, kiln::shape{n});
  auto q = kiln::empty<double>({n});
  auto flags = kiln::empty<bool>({n});
  kiln::eval(p = p.slice(0, -1, std::numeric_limits<std::int64_t>::min(), -1) + 1.0f,
             q = kiln::cast<double>(p) * 2.0, flags = p > 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(p.data()[i] == va[n - 1 - i] + 1.0f);
    REQUIRE(q.data()[i] == double(va[i]) * 2.0); // the old p
    REQUIRE(flags.data()[i] == (va[i] > 0.0f));
  }
  // Two targets that overlap each other: written in order, from values computed first.
  if (n >= 3) {
    auto z = kiln::from(va, kiln::shape{n});
    const auto src = kiln::from(vb, kiln::shape{n});
    kiln::eval(z.narrow(0, 0, n - 1) = src.narrow(0, 0, n - 1) * 1.0f,
               z.narrow(0, 1, n - 1) = z.narrow(0, 0, n - 1) * 2.0f);
    REQUIRE(z.data()[0] == vb[0]);
    for (std::int64_t i = 1; i < n; ++i)
      REQUIRE(z.data()[i] == va[i - 1] * 2.0f);
  }
}

TEST_CASE("mixed dtypes, conversions on store, rank 0 and empty tensors", "[eval]") {
  const std::int64_t n = test::draw(1000, 100000);
  const auto vu = test::integers<std::uint32_t>(n, 0, UINT32_MAX);
  const auto vl = test::integers<std::int64_t>(n, INT64_MIN / 2, INT64_MAX / 2);
  const auto v8 = test::integers<std::uint8_t>(n, 0, 255);
  const auto vf = test::uniform<float>(n, -1e3, 1e3);
  const auto tu = kiln::from(vu, kiln::shape{n});
  const auto tl = kiln::from(vl, kiln::shape{n});
  const auto t8 = kiln::from(v8, kiln::shape{n});
  const auto tf = kiln::from(vf, kiln::shape{n});
  const auto uf = kiln::tensor<float>(tu + tf).to_vector();              // u32 -> f32 (SIMD)
  const auto ld = kiln::tensor<double>(tl * 1.0).to_vector();            // i64 -> f64 (SIMD)
  const auto stored = kiln::tensor<float>(tu).to_vector();               // converted on store
  const auto u8s = kiln::tensor<std::uint8_t>(t8 * 3 + 100).to_vector(); // u8 wraps
  const auto f64s = kiln::tensor<double>(tf * 3.0f).to_vector();         // f32 result, f64 store
  const auto h = kiln::tensor<kiln::half>(tf * 0.01f).to_vector();       // f32 -> f16 on store
  for (std::int64_t i = 0; i < n; ++i) {
    INFO("u32 " << vu[i] << " i64 " << vl[i] << " f32 " << vf[i]);
    REQUIRE(uf[i] == float(vu[i]) + vf[i]);
    REQUIRE(ld[i] == double(vl[i]));
    REQUIRE(stored[i] == float(vu[i]));
    REQUIRE(u8s[i] == std::uint8_t(v8[i] * 3 + 100));
    REQUIRE(f64s[i] == double(vf[i] * 3.0f));
    REQUIRE(h[i].bits == kiln::half(vf[i] * 0.01f).bits);
  }
  // Rank 0 with anything; empty extents give empty results and write nothing.
  const auto s0 = kiln::full<double>({}, 2.5);
  const auto m = kiln::from(test::uniform<double>(6, -1, 1), kiln::shape{2, 3});
  const auto r0 = kiln::tensor<double>(s0 * s0 + 1.0);
  CHECK(r0.rank() == 0);
  CHECK(r0.item() == 7.25);
  const auto rm = kiln::tensor<double>(m * s0).to_vector();
  for (int i = 0; i < 6; ++i)
    CHECK(rm[i] == m.data()[i] * 2.5);
  const auto e = kiln::zeros<double>({0, 3});
  const auto re = kiln::tensor<double>(e + m(0) * s0);
  CHECK(re.shape() == kiln::shape{0, 3});
  CHECK(re.to_vector().empty());
  auto target = kiln::zeros<double>({4, 0});
  target = kiln::zeros<double>({4, 0}) + 1.0;
  CHECK(target.shape() == kiln::shape{4, 0});
}

// Two kiln views of one xtensor container (view_of) share memory but not a storage
// object: aliasing between them must still be detected (DESIGN.md: "aliasing is
// handled, not documented away").
TEST_CASE("aliasing between two view_of handles of one xtensor container", "[eval]") {
  const std::size_t n = std::size_t(test::draw(3, 64));
  const auto v = test::uniform<float>(n * n, -1, 1);
  xt::xarray<float> x = xt::adapt(v, std::vector<std::size_t>{n, n});
  auto a = kiln::view_of(x);
  const auto b = kiln::view_of(x);
  a = b.transpose();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      wrong += x(i, j) != v[j * n + i];
  {
    INFO(wrong << " of " << n * n << " elements wrong after a = b.transpose()");
    CHECK(wrong == 0);
  }
  xt::xarray<float> y = xt::adapt(v, std::vector<std::size_t>{n * n});
  auto c = kiln::view_of(y);
  const auto d = kiln::view_of(y);
  c.narrow(0, 1, std::int64_t(n * n - 1)) = d.narrow(0, 0, std::int64_t(n * n - 1)) * 1.0f;
  wrong = 0;
  for (std::size_t i = 1; i < n * n; ++i)
    wrong += y(i) != v[i - 1];
  INFO(wrong << " of " << n * n - 1 << " elements wrong after a shifted copy");
  CHECK(wrong == 0);
}
