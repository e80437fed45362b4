#pragma once
// Each op of the catalog on every GPU device there is (vulkan:0, cuda:0; each missing one a
// visible skip) against the host evaluator, on random inputs mixed with special values. One
// binary serves both backends: the host code is the same, only the kernels generated at run
// time differ, so compiling it per backend would double the build for nothing. The lists of
// checks are test_device_catalog_{ops,math,casts}.cpp. Exact ops
// (integer, comparison, logical, bitwise, select, conversions, and + - * / on floats, IEEE-exact on
// both sides) must match bit for bit (NaN as NaN, zeros with their sign); float math within the sum
// of the two sides' ulp bounds (each side is within its bound of the true value: host
// tests/float_ops.hpp, device jit/kiln/kernels/glsl_math/math.hpp, CUDA's libdevice bounds in
// cuda_codegen.hpp); 16-bit floats within one ulp of their type (both sides round a float result
// that may differ in its last bits).
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "metal_support.hpp"

#include <iomanip>
#include <limits>
#include <optional>
#include <sstream>

namespace catalog {

constexpr std::int64_t n = 211;

// The devices to check: each backend's device 0 where it is usable.
inline std::vector<const kiln::device*> devices() {
  std::vector<const kiln::device*> d;
  for (const kiln::device* x : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (x) d.push_back(x);
  return d;
}

// Random values of T with its special values mixed in (float: ±0, ±inf, NaN, ±1; integers:
// 0, -1, the limits).
template <class T>
std::vector<T> values(double lo, double hi) {
  std::vector<T> v;
  if constexpr (std::is_same_v<T, bool>) {
    for (auto i : test::integers<int>(n, 0, 1))
      v.push_back(i != 0);
  } else if constexpr (kiln::is_floating(kiln::dtype_of<T>())) {
    for (double d : test::uniform<double>(n - 8, lo, hi))
      v.push_back(kiln::convert<T>(d));
    for (double d : {0.0, -0.0, 1.0, -1.0, double(INFINITY), -double(INFINITY), double(NAN), 0.5})
      v.push_back(kiln::convert<T>(d));
  } else {
    const auto l =
        static_cast<std::int64_t>(std::max<double>(lo, double(std::numeric_limits<T>::lowest())));
    const auto h =
        static_cast<std::int64_t>(std::min<double>(hi, double(std::numeric_limits<T>::max())));
    for (auto i : test::integers<T>(n - 4, l, h))
      v.push_back(i);
    for (T x : {T(0), static_cast<T>(-1), std::numeric_limits<T>::lowest(),
                std::numeric_limits<T>::max()})
      v.push_back(x);
  }
  std::shuffle(v.begin(), v.end(), test::rng());
  return v;
}

inline bool agree(float a, float b, std::uint64_t ulp) {
  return test::same_value(a, b) ||
         (!std::isnan(a) && !std::isinf(a) && !std::isinf(b) && test::ulp_distance(a, b) <= ulp);
}
inline bool agree(double a, double b, std::uint64_t ulp) {
  return test::same_value(a, b) ||
         (!std::isnan(a) && !std::isinf(a) && !std::isinf(b) && test::ulp_distance(a, b) <= ulp);
}
// 16-bit floats: one ulp of the type, through their bit patterns.
template <class H>
requires(std::is_same_v<H, kiln::half> ||
         std::is_same_v<H, kiln::bfloat16>) bool agree(H a, H b, std::uint64_t ulp) {
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  if (test::same_value(fa, fb)) return true;
  if (std::isnan(fa) || std::isnan(fb)) return false;
  auto key = [](H x) {
    const std::int32_t i = x.bits;
    return i & 0x8000 ? -(i & 0x7fff) : i;
  };
  return std::abs(key(a) - key(b)) <= std::int64_t(ulp == 0 ? 0 : 1);
}
template <class T>
requires(std::is_integral_v<T>) bool agree(T a, T b, std::uint64_t) { return a == b; }

// A host tensor of the values (std::vector<bool> has no contiguous storage to view).
template <class T>
kiln::tensor<T> tensor_of(const std::vector<T>& v) {
  kiln::tensor<T> t(kiln::shape{static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i)
    t.data()[i] = v[i];
  return t;
}

// The inputs as doubles, for the messages of a disagreement.
template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> d;
  for (const T& x : v)
    d.push_back(kiln::convert<double>(x));
  return d;
}

// Metal has no 64-bit floats: f64 operands or results, and integer math (computed in f64),
// are a clear error there. `error` is what the evaluation threw, if it threw.
inline void expect_metal_outcome(const char* name, const kiln::device& dev, bool f64,
                                 const std::optional<std::string>& error) {
  if (!error) {
    INFO(name << " on " << dev.str() << " evaluated");
    CHECK_FALSE(f64);
    return;
  }
  INFO(name << " on " << dev.str() << ": " << *error);
  CHECK(error->find("64-bit floats") != std::string::npos);
}

// Every element of a device's result against the host's. Out of line and templated on the
// result type only: per op it was most of each catalog file's code (the messages, Catch's
// macros), and compiling it per op cost about a third of the files' build.
template <class R>
[[gnu::noinline]] void compare(const char* name, std::uint64_t ulp, const kiln::device& dev,
                               const kiln::device& got_on, const std::vector<R>& g,
                               const std::vector<R>& w,
                               const std::vector<std::vector<double>>& in) {
  REQUIRE(got_on == dev);
  REQUIRE(g.size() == w.size());
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!agree(g[i], w[i], ulp) && bad++ < 4) {
      first << "\n  element " << i << ": inputs";
      for (const auto& x : in)
        first << " " << std::setprecision(17) << x[i];
      first << " -> device " << +kiln::convert<double>(g[i]) << ", host "
            << +kiln::convert<double>(w[i]);
    }
  INFO(name << " on " << dev.str() << ", " << kiln::name(kiln::dtype_of<R>()) << ": " << bad
            << " of " << w.size() << " disagree" << first.str());
  CHECK(bad == 0);
}

// Evaluates make(operands...) on each device and on the host and compares every element.
template <class... T, class F>
void check(const char* name, std::uint64_t ulp, F make, const std::vector<T>&... in) {
  const auto want = make(tensor_of(in)...).eval();
  using R = typename decltype(want)::value_type;
  const std::vector<R> w = want.to_vector();
  const std::vector<std::vector<double>> inputs{as_doubles(in)...};
  for (const kiln::device* dev : devices()) {
    if (dev->kind() == kiln::device_kind::metal) {
      const bool f64 = ((kiln::dtype_of<T>() == kiln::dtype::f64) || ... ||
                        (kiln::dtype_of<R>() == kiln::dtype::f64));
      std::optional<std::string> error;
      try {
        (void)make(tensor_of(in).to(*dev)...).eval();
      } catch (const kiln::error& e) {
        error = e.what();
      }
      expect_metal_outcome(name, *dev, f64, error);
      if (error) continue;
    }
    const auto got = make(tensor_of(in).to(*dev)...).eval();
    compare<R>(name, ulp, *dev, got.device(), got.to_vector(), w, inputs);
  }
}

} // namespace catalog
