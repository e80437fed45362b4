// Streaming (non-temporal) stores for passes larger than the last-level cache: the same
// values as ordinary stores, whatever the alignment of the target, the thread count, in
// place, with several outputs, and for element types that have no streaming store. Each
// test case sets KILN_STREAM_BYTES=1 before its first pass (CTest runs each case in its
// own process), so every contiguous pass here takes the streaming path.
#include "support.hpp"

#include <cstdlib>

namespace {
void force_streaming() {
  ::setenv("KILN_STREAM_BYTES", "1", 1);
  REQUIRE(kiln::detail::stream_threshold() == 1); // else this file tests nothing new
}
} // namespace

TEST_CASE("streaming stores give the values of a double-precision reference", "[stream]") {
  force_streaming();
  for (int th : {1, 2}) {
    kiln::set_num_threads(th);
    for (int iter = 0; iter < 6; ++iter) {
      const std::int64_t n = test::draw(1, 300000);
      const auto a = test::uniform<float>(n, -2, 2), b = test::uniform<float>(n, -2, 2),
                 c = test::uniform<float>(n, -2, 2);
      const auto ta = kiln::from(a, kiln::shape{n}), tb = kiln::from(b, kiln::shape{n}),
                 tc = kiln::from(c, kiln::shape{n});
      const auto r = kiln::tensor<float>(ta * tb + kiln::exp(tc)).to_vector();
      // A target that starts one element into its storage: not vector-aligned.
      auto big = kiln::full<float>({n + 1}, 7.0f);
      big.narrow(0, 1, n) = ta - tc;
      const auto shifted = big.to_vector();
      const auto d = kiln::tensor<double>(kiln::cast<double>(ta) * 3.0).to_vector();
      INFO("n " << n << ", threads " << th);
      REQUIRE(shifted[0] == 7.0f);
      for (std::int64_t i = 0; i < n; ++i) {
        const double want = double(a[i]) * b[i] + std::exp(double(c[i]));
        REQUIRE(std::fabs(r[i] - want) <= 4e-7 * (std::fabs(want) + 4));
        REQUIRE(shifted[i + 1] == a[i] - c[i]);
        REQUIRE(d[i] == double(a[i]) * 3.0);
      }
    }
  }
}

TEST_CASE("streaming stores in place, with several outputs, rows and integers", "[stream]") {
  force_streaming();
  const std::int64_t R = test::draw(1, 300), C = test::draw(1, 777);
  const auto v = test::uniform<float>(R * C, -1, 1), w = test::uniform<float>(R * C, -1, 1);
  auto a = kiln::from(v, kiln::shape{R, C});
  const auto b = kiln::from(w, kiln::shape{R, C});
  a = a * 2.0f + b; // in place: each element read before it is overwritten
  auto s = kiln::empty<float>({R, C}), p = kiln::empty<float>({R, C});
  kiln::eval(s = a + b, p = a * b);
  const auto ints = kiln::from(test::integers<std::int32_t>(R * C, -1000, 1000), kiln::shape{R, C});
  const auto doubled = kiln::tensor<std::int32_t>(ints * 2 + 1).to_vector();
  const auto av = a.to_vector(), sv = s.to_vector(), pv = p.to_vector();
  const auto iv = ints.to_vector();
  INFO("shape [" << R << ", " << C << "]");
  for (std::int64_t i = 0; i < R * C; ++i) {
    const float ai = v[i] * 2.0f + w[i];
    REQUIRE(av[i] == Approx(ai).margin(1e-6));
    REQUIRE(sv[i] == av[i] + w[i]);
    REQUIRE(pv[i] == av[i] * w[i]);
    REQUIRE(doubled[i] == iv[i] * 2 + 1);
  }
}

TEST_CASE("streaming passes over views: a stencil's interior, outputs of different alignment",
          "[stream]") {
  force_streaming();
  for (int th : {1, 2}) {
    kiln::set_num_threads(th);
    // The 5-point stencil through narrow views (rows of the target are strided), f64.
    const std::int64_t R = test::draw(3, 400), C = test::draw(3, 400);
    const auto uv = test::uniform<double>(std::size_t(R * C), 0, 1);
    const auto u = kiln::from(uv, kiln::shape{R, C});
    auto v = kiln::full<double>({R, C}, -1.0);
    auto in = [&](const kiln::tensor<double>& t, std::int64_t di, std::int64_t dj) {
      return t.narrow(0, 1 + di, R - 2).narrow(1, 1 + dj, C - 2);
    };
    in(v, 0, 0) = in(u, 0, 0) + 0.2 * (in(u, -1, 0) + in(u, 1, 0) + in(u, 0, -1) + in(u, 0, 1) -
                                       4.0 * in(u, 0, 0));
    const auto got = v.to_vector();
    INFO("threads " << th << ", shape [" << R << ", " << C << "]");
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        const auto at = [&](std::int64_t a, std::int64_t b) { return uv[std::size_t(a * C + b)]; };
        const bool edge = i == 0 || j == 0 || i == R - 1 || j == C - 1;
        const double want = edge ? -1.0
                                 : at(i, j) + 0.2 * (at(i - 1, j) + at(i + 1, j) + at(i, j - 1) +
                                                     at(i, j + 1) - 4.0 * at(i, j));
        REQUIRE(std::fabs(got[std::size_t(i * C + j)] - want) <= 1e-15);
      }

    // Two outputs starting 1 and 3 elements into their storage: the first one's stores are
    // aligned by the pass, the second's fall back where they are not.
    const std::int64_t n = test::draw(1, 200000);
    const auto a = test::uniform<float>(std::size_t(n), -2, 2);
    const auto ta = kiln::from(a, kiln::shape{n});
    auto big1 = kiln::full<float>({n + 1}, 5.0f), big3 = kiln::full<float>({n + 3}, 5.0f);
    kiln::eval(big1.narrow(0, 1, n) = ta * 2.0f, big3.narrow(0, 3, n) = ta + 1.0f);
    const auto b1 = big1.to_vector(), b3 = big3.to_vector();
    INFO("n " << n);
    REQUIRE(b1[0] == 5.0f);
    for (int k = 0; k < 3; ++k)
      REQUIRE(b3[std::size_t(k)] == 5.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      REQUIRE(b1[std::size_t(i + 1)] == a[std::size_t(i)] * 2.0f);
      REQUIRE(b3[std::size_t(i + 3)] == a[std::size_t(i)] + 1.0f);
    }
  }
}

TEST_CASE("KILN_STREAM_BYTES must be a whole number of bytes", "[stream][errors]") {
  CHECK(kiln::detail::parse_stream_bytes("4096") == 4096);
  CHECK(kiln::detail::parse_stream_bytes("0") == INT64_MAX); // 0: never stream
  for (const char* junk : {"", "abc", "-5", "12x", "1.5"}) {
    INFO("KILN_STREAM_BYTES=\"" << junk << "\"");
    try {
      kiln::detail::parse_stream_bytes(junk);
      FAIL("no error");
    } catch (const kiln::error& e) {
      CHECK(std::string(e.what()).find("KILN_STREAM_BYTES") != std::string::npos);
      CHECK(std::string(e.what()).find("whole number") != std::string::npos);
    }
  }
}
