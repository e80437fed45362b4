#pragma once
// What the product tests share (test_matmul.cpp, test_matmul_device.cpp): operands' values
// in double, numpy's matmul computed here in double with each element's error scale, the
// check of a result against it within the bound that grows with K, and random operands in
// contiguous, transposed and strided layouts.
#include "support.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace matmul_test {

// An operand's values in double with its shape, row-major.
struct values {
  kiln::shape shape;
  std::vector<double> v;
};

template <class X>
values read(const X& x) {
  using T = kiln::value_t<X>;
  const kiln::tensor<T> t = kiln::tensor<T>(x).to(kiln::device{});
  const std::vector<T> h = t.to_vector();
  values r{t.shape(), {}};
  for (const T& e : h)
    r.v.push_back(double(kiln::convert<double>(e)));
  return r;
}

// numpy's matmul in double, and for each element the sum of |a||b| (the error bound's scale).
struct product {
  kiln::shape shape;
  std::vector<double> v, scale;
  std::int64_t k = 0;
};
inline product reference(const values& a, const values& b) {
  const bool av = a.shape.size() == 1, bv = b.shape.size() == 1;
  kiln::shape as = a.shape, bs = b.shape;
  if (av) as.insert(0, 1);
  if (bv) bs.push_back(1);
  const int ra = as.size(), rb = bs.size();
  const std::int64_t m = as[ra - 2], k = as[ra - 1], n = bs[rb - 1];
  REQUIRE(bs[rb - 2] == k);
  const kiln::shape ba(as.begin(), as.begin() + ra - 2), bb(bs.begin(), bs.begin() + rb - 2);
  kiln::shape batch = ba;
  REQUIRE(kiln::broadcast_into(batch, bb));
  product p;
  p.k = k;
  p.shape = batch;
  if (!av) p.shape.push_back(m);
  if (!bv) p.shape.push_back(n);
  const std::int64_t nb = kiln::numel(batch);
  std::vector<std::int64_t> idx(batch.size(), 0);
  // The offset of batch element idx in an operand of batch shape s (broadcast).
  auto offset = [&](const kiln::shape& s) {
    std::int64_t o = 0;
    const int lead = batch.size() - s.size();
    for (int d = 0; d < s.size(); ++d)
      o = o * s[d] + (s[d] == 1 ? 0 : idx[d + lead]);
    return o;
  };
  for (std::int64_t e = 0; e < nb; ++e) {
    const std::int64_t oa = offset(ba) * m * k, ob = offset(bb) * k * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long double s = 0, sc = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          const long double x = a.v[oa + i * k + q], y = b.v[ob + q * n + j];
          s += x * y;
          sc += std::fabs(x * y);
        }
        p.v.push_back(double(s));
        p.scale.push_back(double(sc));
      }
    test::next_index(idx, batch);
  }
  return p;
}

// p + r, r a vector broadcast along p's last dim (a bias), its magnitude in the scale too.
inline product plus_row(product p, const values& r) {
  const std::size_t n = r.v.size();
  for (std::size_t e = 0; e < p.v.size(); ++e)
    p.v[e] += r.v[e % n], p.scale[e] += std::fabs(r.v[e % n]);
  return p;
}

template <class T>
constexpr double eps() {
  if constexpr (std::is_same_v<T, kiln::half>)
    return 1.0 / 1024;
  else if constexpr (std::is_same_v<T, kiln::bfloat16>)
    return 1.0 / 128;
  else if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::epsilon();
  else
    return 0;
}

// Half the spacing of T's subnormals: the result's own rounding where it is subnormal, which
// eps(T) times the value does not bound (an f16 result of 6.9e-6 rounds by up to 3e-8).
template <class T>
constexpr double subnormal_rounding() {
  if constexpr (std::is_same_v<T, kiln::half>)
    return 0x1p-25;
  else if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::denorm_min() / 2;
  else if constexpr (std::is_same_v<T, kiln::bfloat16>)
    return 0x1p-134;
  else
    return 0;
}

// Checks a result against the reference: exact for integers; for floats within
// (k + 2) eps(acc) sum|a||b| (the classic bound of a k-term sum, eps of the accumulator: f32
// for 16-bit floats), plus the result's own rounding (relative, or a subnormal's).
template <class T>
void check(const kiln::tensor<T>& got, const product& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape);
  const values g = read(got);
  constexpr double acc = std::is_same_v<T, double> ? eps<double>() : eps<float>();
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < g.v.size(); ++i) {
    double tol = std::is_integral_v<T>
                     ? 0.0
                     : (want.k + 2) * acc * want.scale[i] + eps<T>() * std::fabs(want.v[i]) +
                           subnormal_rounding<T>() + 1e-300;
    if (!std::isfinite(tol)) tol = 0; // a non-finite sum: compared by category below
    // NaN and infinities propagate as in the exact sum (the reference's IEEE arithmetic).
    const double err = std::isfinite(want.v[i]) ? std::fabs(g.v[i] - want.v[i])
                       : std::isnan(want.v[i])  ? (std::isnan(g.v[i]) ? 0.0 : INFINITY)
                                                : (g.v[i] == want.v[i] ? 0.0 : INFINITY);
    if (!(err <= tol)) {
      if (bad++ == 0) worst = err;
      UNSCOPED_INFO("element " << i << ": " << g.v[i] << " vs " << want.v[i] << " (tol " << tol
                               << ")");
      if (bad > 3) break;
    }
  }
  CHECK(bad == 0);
  (void)worst;
}

inline std::int64_t extent() {
  static const std::int64_t pool[] = {0,  1,  1,  2,  3,  4,  5,  7,  8,
                                      12, 13, 16, 17, 24, 31, 33, 48, 65};
  if (test::draw(0, 19) == 0) return test::draw(90, 300); // past a register tile and a block
  return pool[test::draw(0, int(std::size(pool)) - 1)];
}

// A random tensor of `s` in layout `how`: 0 contiguous, 1 a transposed view of the last two
// dims, 2 a strided slice of a larger one.
template <class T>
kiln::tensor<T> operand_of(const kiln::shape& s, const kiln::device& dev, int how) {
  auto fill = [](const kiln::shape& sh) {
    const std::int64_t n = kiln::numel(sh);
    const auto v = std::is_integral_v<T> ? test::integers<T>(std::size_t(n), -20, 20)
                                         : test::uniform<T>(std::size_t(n), -2, 2);
    return kiln::from(v, sh);
  };
  if (how == 1 && s.size() >= 2) {
    kiln::shape t = s;
    std::swap(t[s.size() - 1], t[s.size() - 2]);
    const kiln::tensor<T> f = fill(t).to(dev);
    kiln::layout l = f.layout();
    std::swap(l.shape[s.size() - 1], l.shape[s.size() - 2]);
    std::swap(l.strides[s.size() - 1], l.strides[s.size() - 2]);
    return kiln::tensor<T>(f.storage(), l);
  }
  if (how == 2 && s.size() >= 1) {
    kiln::shape w = s;
    const std::int64_t last = s[s.size() - 1];
    w[s.size() - 1] = 2 * last + 1;
    return fill(w).to(dev).slice(s.size() - 1, 1, 2 * last + 1, 2);
  }
  return fill(s).to(dev);
}

// The same in a layout drawn at random.
template <class T>
kiln::tensor<T> operand(const kiln::shape& s, const kiln::device& dev) {
  return operand_of<T>(s, dev, test::draw(0, 2));
}

// Runs a statement and checks what the host kernel's counts say of it: how many products
// ran, how many with the statement's pass as their epilogue, and how many of those were
// computed straight into their output (the epilogue in place).
template <class F>
void check_counts(F&& statement, std::uint64_t products, std::uint64_t fused,
                  std::uint64_t in_output, const char* what) {
  auto& counts = kiln::detail::host_gemm_counts();
  const std::uint64_t p0 = counts.products, f0 = counts.fused, i0 = counts.in_output;
  statement();
  INFO(what);
  CHECK(counts.products - p0 == products);
  CHECK(counts.fused - f0 == fused);
  CHECK(counts.in_output - i0 == in_output);
}

} // namespace matmul_test
