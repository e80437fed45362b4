// kiln::half and kiln::bfloat16: conversions round to nearest, ties to even, against a
// reference that searches the representable values directly.
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

// The half nearest to f (ties to even mantissa), by search; Inf beyond the rounding edge.
std::uint16_t reference_half(float f, const std::vector<std::pair<double, std::uint16_t>>& tab) {
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

std::uint16_t reference_bfloat16(float f) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t lo = b & 0xffff0000u, hi = lo + 0x10000u;
  const double x = f, dl = std::fabs(x - double(std::bit_cast<float>(lo)));
  // hi may step into Inf: compare against the would-be value 2^128 instead.
  const bool hi_inf = ((hi >> 23) & 0xff) == 0xff;
  const double hv =
      hi_inf ? std::copysign(std::ldexp(1.0, 128), x) : double(std::bit_cast<float>(hi));
  const double dh = std::fabs(hv - x);
  const std::uint32_t pick = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) & 1 ? hi : lo);
  return static_cast<std::uint16_t>(pick >> 16);
}

} // namespace

TEST_CASE("every half converts to float exactly and back to itself", "[half]") {
  const auto tab = positive_halves();
  for (const auto& [val, bits] : tab) {
    const kiln::half h = kiln::half::from_bits(bits);
    REQUIRE(double(float(h)) == val);
    REQUIRE(kiln::half(float(h)).bits == bits);
    REQUIRE(kiln::half(-float(h)).bits == (bits | 0x8000));
  }
  CHECK(std::isinf(float(kiln::half::from_bits(0x7c00))));
  CHECK(std::isnan(float(kiln::half::from_bits(0x7e01))));
  CHECK(std::isnan(float(kiln::half(NAN))));
  CHECK(kiln::half(INFINITY).bits == 0x7c00);
  CHECK(kiln::half(-INFINITY).bits == 0xfc00);
}

TEST_CASE("float to half rounds to nearest even, subnormals and overflow included", "[half]") {
  const auto tab = positive_halves();
  std::vector<float> xs = {0.0f,     -0.0f,    65504.0f, 65519.99f, 65520.0f, 1e6f,
                           5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-9f,     6.1e-5f,  1.00048828125f};
  // Random floats over the whole half range, log-uniform, and exact ties.
  std::uniform_real_distribution<double> e(-26, 17);
  for (int i = 0; i < 200000; ++i) {
    const float f = static_cast<float>(std::exp2(e(test::rng())));
    xs.push_back(test::draw(0, 1) ? f : -f);
  }
  for (std::size_t k = 0; k + 1 < tab.size(); k += 97) // midpoints: ties
    xs.push_back(static_cast<float>((tab[k].first + tab[k + 1].first) / 2));
  for (float f : xs) {
    INFO("f = " << f);
    REQUIRE(kiln::half(f).bits == reference_half(f, tab));
  }
}

TEST_CASE("float to bfloat16 rounds to nearest even", "[half]") {
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 300000; ++i) {
    std::uint32_t b = bits(test::rng());
    if (i % 3 == 0) b = (b & 0xffff0000u) | 0x8000u; // an exact tie
    const float f = std::bit_cast<float>(b);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(float(kiln::bfloat16(f))));
      continue;
    }
    INFO("bits " << b);
    REQUIRE(kiln::bfloat16(f).bits == reference_bfloat16(f));
  }
  CHECK(float(kiln::bfloat16(1.0f)) == 1.0f);
  CHECK(std::isinf(float(kiln::bfloat16(3.4e38f))));
}

TEST_CASE("16-bit float tensors compute in float and round on store", "[half]") {
  const auto a = test::uniform<float>(1000, -4, 4), b = test::uniform<float>(1000, 0.1, 4);
  std::vector<kiln::half> ha(a.begin(), a.end()), hb(b.begin(), b.end());
  std::vector<kiln::bfloat16> ba(a.begin(), a.end()), bb(b.begin(), b.end());
  const auto th = kiln::from(ha, kiln::shape{1000}), tb = kiln::from(hb, kiln::shape{1000});
  const auto bh = kiln::from(ba, kiln::shape{1000}), bbt = kiln::from(bb, kiln::shape{1000});
  const auto rh = kiln::tensor<kiln::half>(th * tb + kiln::sqrt(tb)).to_vector();
  const auto rb = kiln::tensor<kiln::bfloat16>(bh / bbt - kiln::exp(bh)).to_vector();
  for (int i = 0; i < 1000; ++i) {
    // Each op rounds to the 16-bit type, as numpy does.
    const float p = float(kiln::half(float(ha[i]) * float(hb[i])));
    const float s = float(kiln::half(std::sqrt(float(hb[i]))));
    REQUIRE(rh[i].bits == kiln::half(p + s).bits);
    const float q = float(kiln::bfloat16(float(ba[i]) / float(bb[i])));
    const float x = float(kiln::bfloat16(std::exp(float(ba[i]))));
    REQUIRE(rb[i].bits == kiln::bfloat16(q - x).bits);
  }
}
