// Philox random tensors: known-answer test against the Random123 reference vectors,
// value = f(seed, index) independent of threads and shape, and sane distributions.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <cmath>

TEST_CASE("Philox-4x32-10 matches the published known-answer vectors", "[random]") {
  // Random123's kat_vectors: philox4x32 10 rounds, counter 0 / key 0, and all-ones.
  auto z = kiln::random::philox4x32({0, 0, 0, 0}, 0);
  CHECK(z[0] == 0x6627e8d5u);
  CHECK(z[1] == 0xe169c58du);
  CHECK(z[2] == 0xbc57ac4cu);
  CHECK(z[3] == 0x9b00dbd8u);
  auto f = kiln::random::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                    0xffffffffffffffffull);
  CHECK(f[0] == 0x408f276du);
  CHECK(f[1] == 0x41c83b0eu);
  CHECK(f[2] == 0xa20bc7c6u);
  CHECK(f[3] == 0x6d5451fdu);
}

TEST_CASE("a random value depends only on (seed, index)", "[random]") {
  const auto seed = Catch::rngSeed();
  kiln::set_num_threads(1);
  const auto a = kiln::random::uniform<float>({300, 1000}, seed).to_vector();
  kiln::set_num_threads(2);
  const auto b = kiln::random::uniform<float>({300000}, seed).to_vector();
  const auto c = kiln::random::uniform<float>({1000}, seed).to_vector();
  REQUIRE(a == b);
  REQUIRE(std::equal(c.begin(), c.end(), a.begin()));
  const auto d = kiln::random::uniform<float>({1000}, seed + 1).to_vector();
  CHECK(d != c);
  const auto n1 = kiln::random::normal<double>({5000}, seed).to_vector();
  const auto n2 = kiln::random::normal<double>({5000}, seed).to_vector();
  CHECK(n1 == n2);
}

TEST_CASE("uniform and normal have the right moments and range", "[random]") {
  const auto seed = Catch::rngSeed();
  const std::int64_t n = 1'000'000;
  const auto u = kiln::random::uniform<double>({n}, seed, -3, 5);
  const auto uv = u.to_vector();
  double mean = 0, var = 0;
  bool in_range = true;
  for (double v : uv) {
    in_range = in_range && v >= -3 && v < 5;
    mean += v;
  }
  REQUIRE(in_range);
  mean /= n;
  for (double v : uv)
    var += (v - mean) * (v - mean);
  var /= n;
  // Uniform(-3, 5): mean 1, variance 64/12; bounds are ~6 standard errors.
  CHECK(std::abs(mean - 1) < 6 * std::sqrt(64.0 / 12 / n));
  CHECK(std::abs(var - 64.0 / 12) < 0.05);

  const auto g = kiln::random::normal<float>({n}, seed, 2, 0.5);
  const double gm = kiln::mean(kiln::cast<double>(g)).item();
  const double gv = kiln::mean(kiln::pow(kiln::cast<double>(g) - gm, 2.0)).item();
  CHECK(std::abs(gm - 2) < 6 * 0.5 / std::sqrt(double(n)));
  CHECK(std::abs(gv - 0.25) < 0.005);
  // Tails: about 4.55% beyond 2 sigma.
  const double tail = kiln::mean(kiln::cast<double>(kiln::abs(g - 2.0f) > 1.0f)).item();
  CHECK(std::abs(tail - 0.0455) < 0.002);
  // Half precision draws stay in range too.
  const auto h = kiln::random::uniform<kiln::half>({10000}, seed).to_vector();
  CHECK(
      std::all_of(h.begin(), h.end(), [](kiln::half v) { return float(v) >= 0 && float(v) < 1; }));
}

TEST_CASE("random parameters are checked", "[random][errors]") {
  CHECK_THROWS_AS(kiln::random::uniform<float>({3}, 1, 2, 1), kiln::error);
  CHECK_THROWS_AS(kiln::random::normal<float>({3}, 1, 0, -1), kiln::error);
}
