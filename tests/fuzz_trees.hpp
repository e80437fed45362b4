#pragma once
// The fuzzer's expression trees (test_fuzz.cpp). C++ fixes an expression's type at compile
// time, so a tree's shape is drawn at compile time from its seed S (as device_trees.hpp
// does); the same template is walked by three domains: kiln's (builds the expression), the
// reference's (computes dense arrays with error bounds, fuzz_reference.hpp) and a printer
// (C++ text for a failure report). Leaves are four slots filled at run time, so a tensor
// recurs in random places. Float trees use + - * maximum minimum where sin exp tanh sqrt
// log1p and a division by |b| + c (c > 0); integer trees + - * maximum minimum where abs / %.
#include "fuzz_reference.hpp"

#include <kiln/kiln.hpp>

#include <array>
#include <string>

namespace fuzz {

// Floating element types: float, double and kiln's 16-bit floats.
template <class T>
inline constexpr bool floating_v = std::is_floating_point_v<T> || std::is_same_v<T, kiln::half> ||
                                   std::is_same_v<T, kiln::bfloat16>;

constexpr unsigned mix(unsigned s) { return (s * 2654435761u) ^ (s >> 13) ^ 0x9e3779b9u; }

template <unsigned S, int D, class Dom, class L>
auto tree(const Dom& d, const L& v) {
  constexpr unsigned h = mix(S);
  if constexpr (D == 0) {
    return v[h % 4];
  } else {
    const auto a = tree<h + 1, D - 1>(d, v);
    const auto b = tree<h + 2, D - 1>(d, v);
    constexpr unsigned op = (h >> 3) % 10;
    if constexpr (op == 0)
      return d.add(a, b);
    else if constexpr (op == 1)
      return d.mul(a, b);
    else if constexpr (op == 2)
      return d.scale_sub(a, b);
    else if constexpr (op == 3)
      return d.maximum(a, b);
    else if constexpr (op == 4)
      return d.where_gt(a, b, a, tree<h + 3, D - 1>(d, v));
    else if constexpr (op == 5)
      return d.minimum(a, b);
    else if constexpr (Dom::floating) {
      if constexpr (op == 6)
        return d.add(d.sin(a), b);
      else if constexpr (op == 7)
        return d.mul(d.exp_neg_abs(a), d.tanh(b));
      else if constexpr (op == 8)
        return d.div_pos(a, b);
      else
        return d.add(d.sqrt_abs(a), d.log1p_abs(b));
    } else {
      if constexpr (op == 6)
        return d.idiv(a, b);
      else if constexpr (op == 7)
        return d.imod(a, b);
      else if constexpr (op == 8)
        return d.sub(d.abs(a), b);
      else
        return d.add(a, b);
    }
  }
}

// kiln's expressions; c is the scalar of a - b * c, cpos > 0 the one of a / (|b| + cpos).
template <class T>
struct kiln_dom {
  static constexpr bool floating = floating_v<T>;
  T c, cpos;
  template <class A, class B>
  auto add(const A& a, const B& b) const {
    return a + b;
  }
  template <class A, class B>
  auto sub(const A& a, const B& b) const {
    return a - b;
  }
  template <class A, class B>
  auto mul(const A& a, const B& b) const {
    return a * b;
  }
  template <class A, class B>
  auto scale_sub(const A& a, const B& b) const {
    return a - b * c;
  }
  template <class A, class B>
  auto maximum(const A& a, const B& b) const {
    return kiln::maximum(a, b);
  }
  template <class A, class B>
  auto minimum(const A& a, const B& b) const {
    return kiln::minimum(a, b);
  }
  template <class A, class B, class X, class Y>
  auto where_gt(const A& a, const B& b, const X& x, const Y& y) const {
    return kiln::where(a > b, x, y);
  }
  template <class A>
  auto sin(const A& a) const {
    return kiln::sin(a);
  }
  template <class A>
  auto exp_neg_abs(const A& a) const {
    return kiln::exp(-kiln::abs(a));
  }
  template <class A>
  auto tanh(const A& a) const {
    return kiln::tanh(a);
  }
  template <class A, class B>
  auto div_pos(const A& a, const B& b) const {
    return a / (kiln::abs(b) + cpos);
  }
  template <class A>
  auto sqrt_abs(const A& a) const {
    return kiln::sqrt(kiln::abs(a));
  }
  template <class A>
  auto log1p_abs(const A& a) const {
    return kiln::log1p(kiln::abs(a));
  }
  template <class A, class B>
  auto idiv(const A& a, const B& b) const {
    return a / b;
  }
  template <class A, class B>
  auto imod(const A& a, const B& b) const {
    return a % b;
  }
  template <class A>
  auto abs(const A& a) const {
    return kiln::abs(a);
  }
};

// The reference: dense arrays of values with error bounds.
template <bool Floating>
struct ref_dom {
  static constexpr bool floating = Floating;
  ops o;
  double c, cpos;
  template <class F>
  dense un(const dense& a, F f) const {
    return map_n({&a}, [&](const std::vector<val>& x) { return f(x[0]); });
  }
  template <class F>
  dense bin(const dense& a, const dense& b, F f) const {
    return map_n({&a, &b}, [&](const std::vector<val>& x) { return f(x[0], x[1]); });
  }
  dense add(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.add(x, y); });
  }
  dense sub(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.sub(x, y); });
  }
  dense mul(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.mul(x, y); });
  }
  dense scale_sub(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.sub(x, o.mul(y, {c, 0})); });
  }
  dense maximum(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.extreme(x, y, true); });
  }
  dense minimum(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.extreme(x, y, false); });
  }
  dense where_gt(const dense& a, const dense& b, const dense& x, const dense& y) const {
    return map_n({&a, &b, &x, &y},
                 [&](const std::vector<val>& v) { return o.where_gt(v[0], v[1], v[2], v[3]); });
  }
  dense sin(const dense& a) const {
    return un(a, [&](val x) { return o.sin(x); });
  }
  dense exp_neg_abs(const dense& a) const {
    return un(a, [&](val x) { return o.exp(o.neg(o.abs(x))); });
  }
  dense tanh(const dense& a) const {
    return un(a, [&](val x) { return o.tanh(x); });
  }
  dense div_pos(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return o.div_pos(x, o.add(o.abs(y), {cpos, 0})); });
  }
  dense sqrt_abs(const dense& a) const {
    return un(a, [&](val x) { return o.sqrt_abs(x); });
  }
  dense log1p_abs(const dense& a) const {
    return un(a, [&](val x) { return o.log1p_abs(x); });
  }
  dense idiv(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return ops::idiv(x, y); });
  }
  dense imod(const dense& a, const dense& b) const {
    return bin(a, b, [&](val x, val y) { return ops::imod(x, y); });
  }
  dense abs(const dense& a) const {
    return un(a, [&](val x) { return o.abs(x); });
  }
};

// C++ text of the tree over leaves L0..L3 and scalars c, cpos.
template <bool Floating>
struct print_dom {
  static constexpr bool floating = Floating;
  using s = std::string;
  static s f(const char* fn, const s& a) { return s(fn) + "(" + a + ")"; }
  static s f(const char* fn, const s& a, const s& b) { return s(fn) + "(" + a + ", " + b + ")"; }
  s add(const s& a, const s& b) const { return "(" + a + " + " + b + ")"; }
  s sub(const s& a, const s& b) const { return "(" + a + " - " + b + ")"; }
  s mul(const s& a, const s& b) const { return "(" + a + " * " + b + ")"; }
  s scale_sub(const s& a, const s& b) const { return "(" + a + " - " + b + " * c)"; }
  s maximum(const s& a, const s& b) const { return f("kiln::maximum", a, b); }
  s minimum(const s& a, const s& b) const { return f("kiln::minimum", a, b); }
  s where_gt(const s& a, const s& b, const s& x, const s& y) const {
    return "kiln::where(" + a + " > " + b + ", " + x + ", " + y + ")";
  }
  s sin(const s& a) const { return f("kiln::sin", a); }
  s exp_neg_abs(const s& a) const { return "kiln::exp(-kiln::abs(" + a + "))"; }
  s tanh(const s& a) const { return f("kiln::tanh", a); }
  s div_pos(const s& a, const s& b) const { return "(" + a + " / (kiln::abs(" + b + ") + cpos))"; }
  s sqrt_abs(const s& a) const { return "kiln::sqrt(kiln::abs(" + a + "))"; }
  s log1p_abs(const s& a) const { return "kiln::log1p(kiln::abs(" + a + "))"; }
  s idiv(const s& a, const s& b) const { return "(" + a + " / " + b + ")"; }
  s imod(const s& a, const s& b) const { return "(" + a + " % " + b + ")"; }
  s abs(const s& a) const { return f("kiln::abs", a); }
};

inline const std::array<std::string, 4> leaf_names{"L0", "L1", "L2", "L3"};
inline const std::array<std::string, 4> leaf_names2{"M0", "M1", "M2", "M3"};

} // namespace fuzz
