#pragma once
// The fuzzer's reference (test_fuzz.cpp): a small interpreter over dense row-major arrays
// of doubles, independent of kiln's evaluator. Each value carries an absolute error bound:
// how far the value kiln computes in the element type T may lie from the exact one, by a
// forward error analysis per op (rules below). A bound of +inf means "either outcome is
// right" (a comparison too close to call, say), and that element is not compared. Integer
// types have no error (e = 0): the values drawn keep every op exact, and integer ops follow
// C++ as kiln does (truncating division, remainder with the dividend's sign, 0 for a zero
// divisor; products of a reduction wrap in i64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fuzz {

using dims = std::vector<std::int64_t>;

inline std::int64_t count(const dims& s) {
  std::int64_t n = 1;
  for (auto e : s)
    n *= e;
  return n;
}

struct val {
  double v = 0;
  double e = 0; // absolute error bound of kiln's value; +inf: not compared
};

struct dense {
  dims shape;
  std::vector<val> x;
};

// The element type's arithmetic, as the error rules need it.
struct arith {
  bool integer = false;
  int bits = 64; // integers narrower than 64 bits wrap, as C++ unsigned arithmetic
  bool is_signed = true;
  double u = 0;    // unit roundoff: 2^-24 (f32), 2^-53 (f64), 0 (integers)
  double maxv = 0; // largest finite value
  double tiny = 0; // smallest normal: the absolute error of a result in the subnormal range
  // Transcendental functions (sin, exp, tanh, log1p): kiln's host SIMD kernels and its GLSL
  // library are within 4 ulp (tests/float_ops.hpp, jit/kiln/kernels/glsl_math/math.hpp); 8 ulp of
  // the result plus an absolute 8 ulp of 1 (the results here are O(1) and sin's argument
  // reduction loses |x| ulp of absolute accuracy) leaves room for both without hiding a
  // wrong formula, which is off by far more.
  static constexpr double ulps = 8;
};

// Row-major offset of a multi-index of `out` in an array of shape s that broadcasts to it.
inline std::int64_t bcast_offset(const dims& s, const dims& out, const dims& idx) {
  std::int64_t off = 0;
  const std::size_t lead = out.size() - s.size();
  for (std::size_t d = 0; d < s.size(); ++d)
    off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
  return off;
}
inline bool step_index(dims& idx, const dims& s) {
  for (int d = int(s.size()) - 1; d >= 0; --d) {
    if (++idx[d] < s[d]) return true;
    idx[d] = 0;
  }
  return false;
}
inline dims bcast_shape(const dims& a, const dims& b) {
  dims r(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::int64_t x = i < r.size() - a.size() ? 1 : a[i - (r.size() - a.size())];
    const std::int64_t y = i < r.size() - b.size() ? 1 : b[i - (r.size() - b.size())];
    r[i] = x == 1 ? y : x; // the drawn shapes always broadcast
  }
  return r;
}

template <class F>
dense map_n(const std::vector<const dense*>& in, F f) {
  dims out;
  for (auto* a : in)
    out = bcast_shape(out, a->shape);
  dense r{out, std::vector<val>(static_cast<std::size_t>(count(out)))};
  dims idx(out.size(), 0);
  std::vector<val> args(in.size());
  for (std::size_t i = 0; i < r.x.size(); ++i) {
    for (std::size_t k = 0; k < in.size(); ++k)
      args[k] = in[k]->x[bcast_offset(in[k]->shape, out, idx)];
    r.x[i] = f(args);
    step_index(idx, out);
  }
  return r;
}

// The reference's ops on values. Every float result passes through `fin`: a result beyond
// the type's range is inf for kiln too (or either, within the error bound).
struct ops {
  arith t;

  bool ambiguous(const val& a) const { return std::isinf(a.e) || std::isnan(a.e); }
  val fin(double r, double e) const {
    if (std::isnan(e)) e = INFINITY;
    if (t.integer) return {wrap(r), 0};
    if (!std::isfinite(r)) return {r, 0};
    if (std::abs(r) - e > t.maxv) return {std::copysign(INFINITY, r), 0};
    if (std::abs(r) + e > t.maxv) return {r, INFINITY};
    return {r, e + t.u * std::abs(r) + t.tiny};
  }
  double wrap(double r) const {
    if (t.bits >= 64) return r; // i64 values stay small here
    const std::uint64_t m = (std::uint64_t(1) << t.bits) - 1;
    const std::uint64_t w = static_cast<std::uint64_t>(static_cast<std::int64_t>(r)) & m;
    if (t.is_signed && w > m / 2) return double(std::int64_t(w) - std::int64_t(m) - 1);
    return double(w);
  }
  // One input not finite: the result is as exact as IEEE makes it (inf - inf is NaN for both).
  static bool special(const val& a) { return !std::isfinite(a.v); }

  val add(val a, val b) const {
    if (ambiguous(a) || ambiguous(b)) return {a.v + b.v, INFINITY};
    if (special(a) || special(b)) return {a.v + b.v, 0};
    return fin(a.v + b.v, a.e + b.e);
  }
  val neg(val a) const { return {-a.v, a.e}; }
  val sub(val a, val b) const { return add(a, neg(b)); }
  val mul(val a, val b) const {
    if (ambiguous(a) || ambiguous(b)) return {a.v * b.v, INFINITY};
    // inf times a finite value whose sign (or zero-ness) the error bound leaves open
    if ((std::isinf(a.v) && std::isfinite(b.v) && std::abs(b.v) <= b.e) ||
        (std::isinf(b.v) && std::isfinite(a.v) && std::abs(a.v) <= a.e))
      return {a.v * b.v, INFINITY};
    if (special(a) || special(b)) return {a.v * b.v, 0};
    return fin(a.v * b.v, std::abs(a.v) * b.e + std::abs(b.v) * a.e + a.e * b.e);
  }
  // a / d with d >= c > 0 (the trees divide by |b| + c only): no pole within the bound.
  val div_pos(val a, val d) const {
    if (ambiguous(a) || ambiguous(d)) return {a.v / d.v, INFINITY};
    if (special(a) || special(d)) return {a.v / d.v, 0};
    const double r = a.v / d.v;
    return fin(r, (a.e + std::abs(r) * d.e) / (d.v - d.e));
  }
  val abs(val a) const { return {std::abs(a.v), a.e}; }
  // maximum/minimum: NaN if either is NaN (as the README states); 1-Lipschitz otherwise.
  val extreme(val a, val b, bool mx) const {
    if (std::isnan(a.v) || std::isnan(b.v)) return {NAN, 0};
    const double r = mx ? std::max(a.v, b.v) : std::min(a.v, b.v);
    if (ambiguous(a) || ambiguous(b)) return {r, INFINITY};
    const double e = std::max(std::isfinite(a.v) ? a.e : 0.0, std::isfinite(b.v) ? b.e : 0.0);
    return {r, std::isfinite(r) ? e : 0};
  }
  // where(a > b, x, y): a comparison within the bounds may go either way.
  val where_gt(val a, val b, val x, val y) const {
    if (ambiguous(a) || ambiguous(b)) return {x.v, INFINITY};
    const bool gt = a.v > b.v;
    const bool close = std::isfinite(a.v) && std::isfinite(b.v) && a.e + b.e > 0 &&
                       std::abs(a.v - b.v) <= a.e + b.e;
    if (!close) return gt ? x : y;
    if (ambiguous(x) || ambiguous(y) || special(x) || special(y)) return {x.v, INFINITY};
    const val c = gt ? x : y;
    return {c.v, std::max(x.e, y.e) + std::abs(x.v - y.v)};
  }
  // Transcendental: Lipschitz constant L of f over the interval, then ulps (see arith).
  val transc(double r, double lip_err, double scale) const {
    if (t.integer) return {r, 0};
    if (!std::isfinite(r)) return {r, 0};
    return fin(r, lip_err + arith::ulps * t.u * (std::abs(r) + scale));
  }
  val sin(val a) const {
    if (ambiguous(a)) return {std::sin(a.v), INFINITY};
    if (special(a)) return {std::sin(a.v), 0};
    return transc(std::sin(a.v), a.e, 1 + std::abs(a.v));
  }
  val exp(val a) const { // the trees take exp of -|x| only: r <= 1, L = r e^e
    if (ambiguous(a)) return {std::exp(a.v), INFINITY};
    if (special(a)) return {std::exp(a.v), 0};
    const double r = std::exp(a.v);
    return transc(r, r * std::expm1(a.e), 1);
  }
  val tanh(val a) const {
    if (ambiguous(a)) return {std::tanh(a.v), INFINITY};
    if (special(a)) return {std::tanh(a.v), 0};
    return transc(std::tanh(a.v), a.e, 1);
  }
  val log1p_abs(val a) const { // log1p(|x|): L <= 1
    if (ambiguous(a)) return {std::log1p(std::abs(a.v)), INFINITY};
    if (special(a)) return {std::log1p(std::abs(a.v)), 0};
    return transc(std::log1p(std::abs(a.v)), a.e, 1);
  }
  val sqrt_abs(val a) const { // |sqrt(x) - sqrt(y)| <= sqrt(|x - y|)
    if (ambiguous(a)) return {std::sqrt(std::abs(a.v)), INFINITY};
    if (special(a)) return {std::sqrt(std::abs(a.v)), 0};
    return transc(std::sqrt(std::abs(a.v)), std::sqrt(a.e), 0);
  }
  // Integer division and remainder as C++ and kiln: truncate, dividend's sign, 0 for / 0.
  static val idiv(val a, val b) { return {b.v == 0 ? 0 : std::trunc(a.v / b.v), 0}; }
  static val imod(val a, val b) { return {b.v == 0 ? 0 : std::fmod(a.v, b.v), 0}; }
};

// x (shape [..., q]) times w ([q, n], exact values) as numpy's matmul. Each sum's bound: the
// inputs' errors through |w|, and (q + 2) u_acc sum |x w| for the accumulation (u_acc: the
// accumulator's unit roundoff, f32's for 16-bit floats), then the result's rounding (fin).
// Integers wrap as the sum converted to the type does. A sum over a value that is not finite
// or not bounded is not compared (the NaN and inf rules of products are tested elsewhere).
inline dense matmul_ref(const ops& o, const dense& x, const dense& w, double u_acc) {
  const std::int64_t q = w.shape[0], n = w.shape[1];
  dims s(x.shape.begin(), x.shape.end() - 1);
  const std::int64_t rows = count(s);
  s.push_back(n);
  dense r{s, std::vector<val>(static_cast<std::size_t>(rows * n))};
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0, e = 0;
      bool wild = false;
      for (std::int64_t k = 0; k < q; ++k) {
        const val a = x.x[static_cast<std::size_t>(i * q + k)];
        const double b = w.x[static_cast<std::size_t>(k * n + j)].v;
        wild = wild || !std::isfinite(a.v) || o.ambiguous(a);
        sum += a.v * b;
        mag += std::abs(a.v * b);
        e += std::abs(b) * a.e;
      }
      val& out = r.x[static_cast<std::size_t>(i * n + j)];
      if (wild)
        out = {sum, INFINITY};
      else
        out = o.t.integer ? o.fin(sum, 0) : o.fin(sum, e + double(q + 2) * u_acc * mag);
    }
  return r;
}

} // namespace fuzz
