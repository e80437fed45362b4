#pragma once
// The fuzzer's reference reductions (see fuzz_reference.hpp for the values and their error
// bounds): sum, prod, mean, max, min, argmax, argmin, all, any over a set of axes of a
// dense array, in double (integers in i64, products wrapping as kiln's do).
#include "fuzz_reference.hpp"

#include <cstring>

namespace fuzz {

enum class red { sum, prod, mean, max, min, argmax, argmin, all, any };
inline const char* red_name(red r) {
  static const char* n[] = {"sum", "prod", "mean", "max", "min", "argmax", "argmin", "all", "any"};
  return n[static_cast<int>(r)];
}

// The reduced values of one output, in row-major order of the reduced axes.
struct reducer {
  arith t;   // the reduced expression's type
  arith res; // the result's type (sum of f32: f32; mean of i32: f64; argmax: i64 ...)

  // Float sums: the host adds blocks of 64 SIMD steps per lane in T, then the blocks in
  // double (include/kiln/reduce.hpp): at most 64 roundings in T per element, so 64 u
  // sum|x|; devices accumulate in double (jit/kiln/jit/backend/run_reduction.hpp): n 2^-53 sum|x|.
  // Plus the elements' own bounds, and the final rounding to the result type.
  val sum(const std::vector<val>& g) const {
    if (t.integer) {
      std::int64_t s = 0;
      for (auto& x : g)
        s += static_cast<std::int64_t>(x.v);
      return {static_cast<double>(s), 0};
    }
    double s = 0, a = 0, e = 0;
    bool amb = false;
    for (auto& x : g) {
      s += x.v;
      if (std::isfinite(x.v)) a += std::abs(x.v), e += x.e;
      amb |= std::isinf(x.e) || std::isnan(x.e);
    }
    if (amb) return {s, INFINITY};
    if (!std::isfinite(s)) return {s, 0};
    const double n = static_cast<double>(g.size());
    e += (64 * t.u + n * 0x1p-52) * a;
    return ops{res}.fin(s, e);
  }
  val prod(const std::vector<val>& g) const {
    if (t.integer) {
      std::uint64_t p = 1;
      for (auto& x : g)
        p *= static_cast<std::uint64_t>(static_cast<std::int64_t>(x.v));
      return {static_cast<double>(static_cast<std::int64_t>(p)), 0};
    }
    // in double (f64's accumulator is f64: its rounding is the type's own)
    arith acc = t;
    acc.u = 0x1p-53;
    acc.maxv = std::numeric_limits<double>::max();
    acc.tiny = std::numeric_limits<double>::min();
    const ops o{acc};
    val p{1, 0};
    for (auto& x : g)
      p = o.mul(p, x);
    // kiln multiplies chunks of the elements on several threads (or invocations) and then
    // the chunks' products: where the product of some run of elements leaves double's
    // range, the result depends on where the chunks fall (0, inf, or NaN from 0 * inf:
    // test_fuzz_regressions.cpp), so it is not compared.
    double hi = 0, lo = 0, run_hi = 0, run_lo = 0; // max and min sums of log2|x| over runs
    bool zero = false;
    for (auto& x : g) {
      if (x.v == 0) {
        zero = true;
        run_hi = 0;
        continue;
      }
      if (!std::isfinite(x.v)) continue;
      const double l = std::log2(std::abs(x.v));
      run_hi = std::max(l, run_hi + l), hi = std::max(hi, run_hi);
      run_lo = std::min(l, run_lo + l), lo = std::min(lo, run_lo);
    }
    if (hi > 1000 || (lo < -1000 && !zero)) return {p.v, INFINITY};
    if (std::isinf(p.e) || !std::isfinite(p.v)) return p;
    return ops{res}.fin(p.v, p.e);
  }
  val mean(const std::vector<val>& g) const {
    if (g.empty()) return {NAN, 0};
    arith wide = res; // the sum stays in the accumulator (double), not rounded to T
    if (!t.integer) wide.u = 0x1p-53, wide.maxv = std::numeric_limits<double>::max();
    const val s = reducer{t, wide}.sum(g);
    const double n = static_cast<double>(g.size());
    if (std::isinf(s.e)) return {s.v / n, INFINITY};
    if (!std::isfinite(s.v)) return {s.v / n, 0};
    return ops{res}.fin(s.v / n, s.e / n);
  }
  // max/min propagate NaN; the extreme moves by at most the largest bound.
  val extreme(const std::vector<val>& g, bool mx) const {
    double r = mx ? -INFINITY : INFINITY, e = 0;
    for (auto& x : g) {
      if (std::isnan(x.v)) return {NAN, 0};
      r = mx ? std::max(r, x.v) : std::min(r, x.v);
      if (std::isfinite(x.v)) e = std::max(e, x.e);
    }
    if (!std::isfinite(r)) e = 0;
    return {r, e};
  }
  // argmax/argmin: the first index of the extreme (a NaN is extreme). Returns the answer
  // and, through ok, which answers the bounds allow (every element i such that some
  // values within the bounds make i the first extreme).
  val arg(const std::vector<val>& g, bool mx, std::vector<char>& ok) const {
    ok.assign(g.size(), 0);
    for (std::size_t i = 0; i < g.size(); ++i)
      if (std::isnan(g[i].v)) {
        ok[i] = 1;
        return {double(i), 0};
      }
    // Flip signs for argmin, so that both look for the largest.
    auto lo = [&](std::size_t i) { return (mx ? g[i].v : -g[i].v) - g[i].e; };
    auto hi = [&](std::size_t i) { return (mx ? g[i].v : -g[i].v) + g[i].e; };
    std::size_t first = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      if ((mx ? g[i].v > g[first].v : g[i].v < g[first].v)) first = i;
    // i can be first: every j < i can be below it, every j > i can be at most it.
    double best_lo_after = -INFINITY;
    std::vector<double> suffix(g.size() + 1, -INFINITY);
    for (std::size_t j = g.size(); j-- > 0;)
      suffix[j] = std::max(suffix[j + 1], lo(j));
    double prefix = -INFINITY;
    for (std::size_t i = 0; i < g.size(); ++i) {
      best_lo_after = suffix[i + 1];
      ok[i] = (i == 0 || prefix < hi(i)) && best_lo_after <= hi(i); // all -inf: the first
      prefix = std::max(prefix, lo(i));
    }
    return {double(first), 0};
  }
  // all/any: an element's truth is unknown when its bound reaches zero.
  val boolean(const std::vector<val>& g, bool all) const {
    bool unknown = false;
    for (auto& x : g) {
      const bool amb =
          std::isinf(x.e) || std::isnan(x.e) || (x.v != 0 ? std::abs(x.v) <= x.e : x.e > 0);
      if (amb) {
        unknown = true;
        continue;
      }
      const bool truth = x.v != 0; // NaN is true
      if (all && !truth) return {0, 0};
      if (!all && truth) return {1, 0};
    }
    return {all ? 1.0 : 0.0, unknown ? INFINITY : 0};
  }
};

struct reduced {
  dense out;
  std::vector<std::vector<char>> ok; // argmax/argmin: the allowed answers per output
  bool error = false;                // kiln must refuse (max of an empty axis)
};

inline reduced reduce(const dense& a, red kind, const std::vector<bool>& mask, bool keepdims,
                      const arith& t, const arith& res) {
  reduced r;
  dims kept;
  std::int64_t n = 1;
  for (std::size_t d = 0; d < a.shape.size(); ++d) {
    if (!mask[d])
      kept.push_back(a.shape[d]);
    else
      n *= a.shape[d];
    if (!mask[d] || keepdims) r.out.shape.push_back(mask[d] ? 1 : a.shape[d]);
  }
  const std::int64_t nout = count(kept);
  const bool needs_element =
      kind == red::max || kind == red::min || kind == red::argmax || kind == red::argmin;
  if (n == 0 && nout > 0 && needs_element) {
    r.error = true;
    return r;
  }
  std::vector<std::vector<val>> groups(static_cast<std::size_t>(nout));
  for (auto& g : groups)
    g.reserve(static_cast<std::size_t>(n));
  dims idx(a.shape.size(), 0);
  for (std::size_t i = 0; i < a.x.size(); ++i) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < a.shape.size(); ++d)
      if (!mask[d]) o = o * a.shape[d] + idx[d];
    groups[o].push_back(a.x[i]);
    step_index(idx, a.shape);
  }
  const reducer f{t, res};
  r.out.x.resize(groups.size());
  if (kind == red::argmax || kind == red::argmin) r.ok.resize(groups.size());
  for (std::size_t o = 0; o < groups.size(); ++o) {
    const auto& g = groups[o];
    switch (kind) {
    case red::sum:
      r.out.x[o] = f.sum(g);
      break;
    case red::prod:
      r.out.x[o] = f.prod(g);
      break;
    case red::mean:
      r.out.x[o] = f.mean(g);
      break;
    case red::max:
      r.out.x[o] = f.extreme(g, true);
      break;
    case red::min:
      r.out.x[o] = f.extreme(g, false);
      break;
    case red::argmax:
      r.out.x[o] = f.arg(g, true, r.ok[o]);
      break;
    case red::argmin:
      r.out.x[o] = f.arg(g, false, r.ok[o]);
      break;
    case red::all:
      r.out.x[o] = f.boolean(g, true);
      break;
    case red::any:
      r.out.x[o] = f.boolean(g, false);
      break;
    }
  }
  return r;
}

// kiln's value against the reference's: NaN for NaN, inf for inf, else within the bound
// (a result past the type's range may be inf where the bound reaches it).
inline bool close(double got, const val& ref, const arith& t) {
  if (std::isinf(ref.e) || std::isnan(ref.e)) return true;
  if (std::isnan(ref.v)) return std::isnan(got);
  if (std::isnan(got)) return false;
  if (std::isinf(ref.v)) return got == ref.v;
  const double lo = ref.v - ref.e, hi = ref.v + ref.e;
  if (std::isinf(got)) return got > 0 ? hi >= t.maxv : lo <= -t.maxv;
  return got >= lo && got <= hi;
}

} // namespace fuzz
