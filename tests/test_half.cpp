// kiln::half and kiln::bfloat16: conversions round to nearest, ties to even, against two
// references written here: a search over the representable values, and a direct
// rounding in double arithmetic on the two candidate neighbours (exact for every input
// these tests use, since the candidates, the input and their differences are doubles).
#include "support.hpp"

#include <algorithm>

namespace {

// Every finite non-negative half, as (value, bits), sorted by value.
std::vector<std::pair<double, std::uint16_t>> positive_halves() {
  std::vector<std::pair<double, std::uint16_t>> v;
  for (std::uint32_t b = 0; b < 0x7c00; ++b) {
    const int e = (b >> 10) & 31, m = b & 1023;
    const double val = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    v.push_back({val, static_cast<std::uint16_t>(b)});
  }
  return v;
}

// The value of any half bit pattern, from the IEEE 754 binary16 definition.
double half_value(std::uint16_t b) {
  const double s = (b & 0x8000) ? -1.0 : 1.0;
  const int e = (b >> 10) & 31, m = b & 1023;
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

// The value of any bfloat16 bit pattern (the top half of a binary32).
double bfloat16_value(std::uint16_t b) {
  const double s = (b & 0x8000) ? -1.0 : 1.0;
  const int e = (b >> 7) & 255, m = b & 127;
  if (e == 255) return m ? NAN : s * INFINITY;
  return s * (e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134));
}

// x rounded to nearest, ties to even, into a binary format with `digits` significand
// bits, smallest normal exponent emin and largest finite value maxv; Inf beyond.
double round_to_format(double x, int digits, int emin, double maxv) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const double a = std::fabs(x);
  const int e = std::max(std::ilogb(a), emin);
  const double q = std::ldexp(1.0, e - (digits - 1)); // spacing of the format near a
  const double lo = std::floor(a / q) * q, hi = lo + q;
  const double dl = a - lo, dh = hi - a; // both exact
  double r = dl < dh ? lo : dh < dl ? hi : (std::fmod(lo / q, 2.0) == 0 ? lo : hi);
  if (r > maxv) r = INFINITY;
  return std::copysign(r, x);
}
double ref_half(double x) { return round_to_format(x, 11, -14, 65504.0); }
double ref_bfloat16(double x) { return round_to_format(x, 8, -126, 0x1.fep127); }

// The half nearest to f (ties to even mantissa), by search; Inf beyond the rounding edge.
std::uint16_t search_half(float f, const std::vector<std::pair<double, std::uint16_t>>& tab) {
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7c00; // halfway above the largest half rounds up
  auto it = std::lower_bound(tab.begin(), tab.end(), std::make_pair(a, std::uint16_t(0)));
  if (it == tab.end()) return sign | 0x7bff;
  if (it->first == a || it == tab.begin()) return sign | it->second;
  const auto lo = *(it - 1), hi = *it;
  const double dl = a - lo.first, dh = hi.first - a;
  if (dl < dh) return sign | lo.second;
  if (dh < dl) return sign | hi.second;
  return sign | ((lo.second & 1) ? hi.second : lo.second);
}

float next_up(float f) { return std::nextafter(f, INFINITY); }
float next_down(float f) { return std::nextafter(f, -INFINITY); }

} // namespace

TEST_CASE("all 65536 half bit patterns convert to float exactly and back", "[half]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const kiln::half h = kiln::half::from_bits(bits);
    const float f = float(h);
    INFO("half bits 0x" << std::hex << b);
    REQUIRE(test::same_value(double(f), half_value(bits)));
    const kiln::half back(f);
    if (std::isnan(f)) {
      // NaN stays NaN (quiet, the sign kept), never Inf.
      REQUIRE((back.bits & 0x7c00) == 0x7c00);
      REQUIRE((back.bits & 0x03ff) != 0);
      REQUIRE((back.bits & 0x0200) != 0);
      REQUIRE((back.bits & 0x8000) == (bits & 0x8000));
    } else {
      REQUIRE(back.bits == bits);
    }
  }
  CHECK(kiln::half(INFINITY).bits == 0x7c00);
  CHECK(kiln::half(-INFINITY).bits == 0xfc00);
  CHECK(kiln::half(-0.0f).bits == 0x8000);
}

TEST_CASE("all 65536 bfloat16 bit patterns convert to float exactly and back", "[half]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = float(kiln::bfloat16::from_bits(bits));
    INFO("bfloat16 bits 0x" << std::hex << b);
    REQUIRE(test::same_value(double(f), bfloat16_value(bits)));
    const kiln::bfloat16 back(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(float(back)));
      REQUIRE((back.bits & 0x8000) == (bits & 0x8000));
    } else {
      REQUIRE(back.bits == bits);
    }
  }
}

TEST_CASE("float to half: every tie and both its neighbours round to nearest even", "[half]") {
  const auto tab = positive_halves();
  // Midpoints between consecutive halves (subnormals included), and the rounding edge
  // between the largest half and 2^16: all exact in float.
  std::vector<double> mids;
  for (std::size_t k = 0; k + 1 < tab.size(); ++k)
    mids.push_back((tab[k].first + tab[k + 1].first) / 2);
  mids.push_back(65520.0);
  for (double m : mids) {
    const float t = static_cast<float>(m);
    REQUIRE(double(t) == m);
    for (float f : {t, next_up(t), next_down(t), -t, -next_up(t), -next_down(t)}) {
      INFO("f = " << f);
      REQUIRE(test::same_value(double(float(kiln::half(f))), ref_half(f)));
      REQUIRE(kiln::half(f).bits == search_half(f, tab));
    }
  }
}

TEST_CASE("float to half: random floats of every magnitude, NaN and Inf", "[half]") {
  const auto tab = positive_halves();
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::uniform_real_distribution<double> e(-27, 17);
  for (int i = 0; i < 400000; ++i) {
    // Half of the draws: any float bit pattern (overflow, flush to zero, NaN); the other
    // half: log-uniform over the half range.
    float f = std::bit_cast<float>(any_bits(test::rng()));
    if (i % 2) f = std::copysign(static_cast<float>(std::exp2(e(test::rng()))), f);
    INFO("f = " << f << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(f) << ")");
    const kiln::half h(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(float(h)));
      continue;
    }
    REQUIRE(test::same_value(double(float(h)), ref_half(f)));
    REQUIRE(h.bits == search_half(f, tab));
  }
  CHECK(kiln::half(65504.0f).bits == 0x7bff);
  CHECK(kiln::half(65519.996f).bits == 0x7bff);
  CHECK(kiln::half(65520.0f).bits == 0x7c00);
  CHECK(kiln::half(1e30f).bits == 0x7c00);
  CHECK(kiln::half(-1e30f).bits == 0xfc00);
  CHECK(kiln::half(std::ldexp(1.0f, -25)).bits == 0x0000);          // tie: to even (zero)
  CHECK(kiln::half(next_up(std::ldexp(1.0f, -25))).bits == 0x0001); // above: smallest
  CHECK(kiln::half(std::ldexp(3.0f, -25)).bits == 0x0002);          // tie 1.5: to 2
  CHECK(kiln::half(-std::ldexp(1.0f, -26)).bits == 0x8000);         // -0
  CHECK(kiln::half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)).bits == 0x0400); // to normal
}

TEST_CASE("float to bfloat16 rounds to nearest even, ties and neighbours included", "[half]") {
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 300000; ++i) {
    std::uint32_t b = bits(test::rng());
    if (i % 3 == 0) b = (b & 0xffff0000u) | 0x8000u;                                // an exact tie
    if (i % 3 == 1) b = (b & 0xffff0000u) | (0x8000u + (i % 2 ? 1u : 0xffffffffu)); // beside it
    const float f = std::bit_cast<float>(b);
    INFO("bits 0x" << std::hex << b);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(float(kiln::bfloat16(f))));
      continue;
    }
    REQUIRE(test::same_value(double(float(kiln::bfloat16(f))), ref_bfloat16(f)));
  }
  CHECK(float(kiln::bfloat16(1.0f)) == 1.0f);
  CHECK(kiln::bfloat16(3.4e38f).bits == 0x7f80);                           // beyond the edge: Inf
  CHECK(kiln::bfloat16(std::bit_cast<float>(0x7f7f7fffu)).bits == 0x7f7f); // just below it
  CHECK(kiln::bfloat16(std::bit_cast<float>(0x7f7f8000u)).bits == 0x7f80); // the tie: Inf
  CHECK(kiln::bfloat16(std::bit_cast<float>(0x00008000u)).bits == 0x0000); // subnormal tie
  CHECK(kiln::bfloat16(std::bit_cast<float>(0x00018000u)).bits == 0x0002);
  CHECK(std::isnan(float(kiln::bfloat16(std::bit_cast<float>(0x7f800001u))))); // low payload
}

TEST_CASE("numeric_limits of the 16-bit types", "[half]") {
  using HL = std::numeric_limits<kiln::half>;
  using BL = std::numeric_limits<kiln::bfloat16>;
  CHECK(float(HL::max()) == 65504.0f);
  CHECK(float(HL::lowest()) == -65504.0f);
  CHECK(float(HL::min()) == std::ldexp(1.0f, -14));
  CHECK(float(HL::epsilon()) == std::ldexp(1.0f, -10));
  CHECK(std::isinf(float(HL::infinity())));
  CHECK(std::isnan(float(HL::quiet_NaN())));
  CHECK(HL::digits == 11);
  CHECK(float(BL::max()) == 0x1.fep127f);
  CHECK(float(BL::lowest()) == -0x1.fep127f);
  CHECK(float(BL::min()) == std::ldexp(1.0f, -126));
  CHECK(float(BL::epsilon()) == std::ldexp(1.0f, -7));
  CHECK(BL::digits == 8);
  // Comparisons are on values: -0 == +0, NaN equals nothing.
  CHECK(kiln::half(0.0f) == kiln::half(-0.0f));
  CHECK_FALSE(HL::quiet_NaN() == HL::quiet_NaN());
  CHECK(kiln::half(1.0f) < kiln::half(1.001f));
  CHECK(kiln::bfloat16(-2.0f) < kiln::bfloat16(1.0f));
}

// A double or a wide integer rounds once to the 16-bit type: going through float first
// would round twice (an input just above a half-way point lands on it in float, and the
// tie then goes to even, the wrong way).
TEST_CASE("double and wide integer sources round once to half and bfloat16", "[half]") {
  const auto tab = positive_halves();
  std::vector<double> xs;
  std::uniform_real_distribution<double> nudge(1e-12, 1e-9);
  for (int i = 0; i < 2000; ++i) {
    const std::size_t k =
        std::uniform_int_distribution<std::size_t>(1, tab.size() - 2)(test::rng());
    const double mid = (tab[k].first + tab[k + 1].first) / 2;
    const double up = mid + mid * nudge(test::rng()), down = mid - mid * nudge(test::rng());
    xs.push_back(i % 2 ? up : -down);
  }
  xs.push_back(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)); // rounds up to 0x3c01
  {
    std::vector<double> hx, href;
    for (double x : xs) {
      hx.push_back(double(float(kiln::half(x)))); // the explicit double constructor
      href.push_back(ref_half(x));
    }
    // Through tensors: cast<half> of an f64 tensor, and storing an f64 expression.
    const auto t = kiln::from(xs, kiln::shape{std::int64_t(xs.size())});
    const auto c = kiln::tensor<kiln::half>(kiln::cast<kiln::half>(t)).to_vector();
    const auto s = kiln::tensor<kiln::half>(t * 1.0).to_vector();
    std::size_t bad_ctor = 0, bad_cast = 0, bad_store = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      bad_ctor += !test::same_value(hx[i], href[i]);
      bad_cast += !test::same_value(double(float(c[i])), href[i]);
      bad_store += !test::same_value(double(float(s[i])), href[i]);
    }
    INFO("of " << xs.size() << " doubles near half-way points, wrongly rounded: half(double) "
               << bad_ctor << ", cast<half> " << bad_cast << ", f64 stored as half " << bad_store);
    CHECK(bad_ctor == 0);
    CHECK(bad_cast == 0);
    CHECK(bad_store == 0);
  }

  // i32 -> bfloat16: above 2^24 an integer is not exact in float either.
  {
    std::vector<std::int32_t> is;
    std::vector<std::int64_t> ls;
    for (int i = 0; i < 2000; ++i) {
      // Half-way between two bfloat16 values m 2^k and (m + 1) 2^k, then one step aside.
      const int k = test::draw(17, 23);
      const std::int64_t m = test::draw(128, 255), tie = (2 * m + 1) << (k - 1);
      const std::int64_t x = (tie + (i % 2 ? 1 : -1)) * (i % 4 < 2 ? 1 : -1);
      is.push_back(static_cast<std::int32_t>(x));
      ls.push_back(x << 20);
    }
    is.push_back((1 << 24) + 65537); // the tie in float would round down to 2^24
    ls.push_back((std::int64_t(1) << 40) + (std::int64_t(1) << 32) + 1);
    const auto ti = kiln::from(is, kiln::shape{std::int64_t(is.size())});
    const auto tl = kiln::from(ls, kiln::shape{std::int64_t(ls.size())});
    const auto bi = kiln::tensor<kiln::bfloat16>(kiln::cast<kiln::bfloat16>(ti)).to_vector();
    const auto bl = kiln::tensor<kiln::bfloat16>(kiln::cast<kiln::bfloat16>(tl)).to_vector();
    std::size_t bad_i32 = 0, bad_i64 = 0, bad_ctor_i = 0;
    for (std::size_t i = 0; i < is.size(); ++i) {
      bad_i32 += !test::same_value(double(float(bi[i])), ref_bfloat16(double(is[i])));
      bad_i64 += !test::same_value(double(float(bl[i])), ref_bfloat16(double(ls[i])));
      bad_ctor_i += !test::same_value(double(float(kiln::bfloat16(is[i]))), ref_bfloat16(is[i]));
    }
    INFO("of " << is.size() << " integers near bfloat16 half-way points, wrongly rounded: "
               << "cast i32 " << bad_i32 << ", cast i64 " << bad_i64 << ", bfloat16(int) "
               << bad_ctor_i);
    CHECK(bad_i32 == 0);
    CHECK(bad_i64 == 0);
    CHECK(bad_ctor_i == 0);
  }
}

TEST_CASE("16-bit float tensors compute in float and round on store", "[half]") {
  for (std::int64_t n : {std::int64_t(37), std::int64_t(test::draw(20000, 70000))}) {
    const auto a = test::uniform<float>(n, -4, 4), b = test::uniform<float>(n, 0.1, 4);
    std::vector<kiln::half> ha(a.begin(), a.end()), hb(b.begin(), b.end());
    std::vector<kiln::bfloat16> ba(a.begin(), a.end()), bb(b.begin(), b.end());
    const auto th = kiln::from(ha, kiln::shape{n}), tb = kiln::from(hb, kiln::shape{n});
    const auto bh = kiln::from(ba, kiln::shape{n}), bbt = kiln::from(bb, kiln::shape{n});
    const auto rh = kiln::tensor<kiln::half>(th * tb + kiln::sqrt(tb)).to_vector();
    const auto rb = kiln::tensor<kiln::bfloat16>(bh / bbt - kiln::exp(bh)).to_vector();
    // half + float: the result is float, computed from the half values exactly.
    const auto fa = kiln::from(a, kiln::shape{n});
    const auto mixed = kiln::tensor<float>(th + fa).to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      // Each op rounds to the 16-bit type, as numpy does (reference in double).
      const double p = ref_half(double(float(ha[i])) * double(float(hb[i])));
      const double s = ref_half(std::sqrt(double(float(hb[i]))));
      REQUIRE(test::same_value(double(float(rh[i])), ref_half(p + s)));
      const double q = ref_bfloat16(double(float(ba[i])) / double(float(bb[i])));
      const double x = ref_bfloat16(double(std::exp(float(ba[i])))); // exp in float, as kiln
      REQUIRE(test::same_value(double(float(rb[i])), ref_bfloat16(q - x)));
      REQUIRE(mixed[i] == static_cast<float>(double(float(ha[i])) + double(a[i])));
    }
  }
}
