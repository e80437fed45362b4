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
