// expression.to(device): evaluate, then move (as tensor.to does for a tensor). Checked
// against double-precision loops over the inputs, for host -> host, host -> vulkan:0,
// vulkan:0 -> host and vulkan:0 -> vulkan:0, with an elementwise expression (broadcast,
// a promoted type) and a reduction.
#include "vulkan_support.hpp"

#include <type_traits>

namespace {

// e(i, j) = a(i, j) * b(j) + 1, in double.
std::vector<double> reference_fma(const std::vector<float>& a, const std::vector<float>& b,
                                  std::int64_t rows, std::int64_t cols) {
  std::vector<double> r(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      r[i * cols + j] = double(a[i * cols + j]) * double(b[j]) + 1.0;
  return r;
}

// Row sums of a.
std::vector<double> reference_row_sums(const std::vector<float>& a, std::int64_t rows,
                                       std::int64_t cols) {
  std::vector<double> r(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      r[i] += a[i * cols + j];
  return r;
}

template <class T>
void check_close(const kiln::tensor<T>& t, const std::vector<double>& want, double tol) {
  const std::vector<T> got = t.to(kiln::device{}).to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(double(got[i]) == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

// Runs every case with the inputs made on `from`, the results sent to `to`.
void check_moves(const kiln::device& from, const kiln::device& to) {
  const std::int64_t rows = test::draw(1, 40), cols = test::draw(1, 300);
  const auto av = test::uniform<float>(static_cast<std::size_t>(rows * cols), -2, 2);
  const auto bv = test::uniform<float>(static_cast<std::size_t>(cols), -2, 2);
  const auto a = kiln::from<float>(av, {rows, cols}).to(from);
  const auto b = kiln::from<float>(bv, {cols}).to(from);
  INFO(from.str() << " -> " << to.str() << ", shape [" << rows << ", " << cols << "]");

  const auto e = (a * b + 1.0f).to(to);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(e)>, kiln::tensor<float>>);
  CHECK(e.device() == to);
  CHECK(e.shape() == kiln::shape{rows, cols});
  check_close(e, reference_fma(av, bv, rows, cols), 1e-6);

  // A double scalar with a float tensor keeps f32; with an integer tensor it gives f64.
  const auto ai = kiln::cast<std::int32_t>(a * 10.0f).eval();
  const auto p = (ai * 0.5).to(to);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(p)>, kiln::tensor<double>>);
  CHECK(p.device() == to);
  const auto aiv = ai.to(kiln::device{}).to_vector();
  std::vector<double> half(aiv.size());
  for (std::size_t i = 0; i < aiv.size(); ++i)
    half[i] = aiv[i] * 0.5;
  check_close(p, half, 0);

  // A reduction (materialized on the leaves' device first) and an expression over one.
  const auto s = kiln::sum(a, 1).to(to);
  CHECK(s.device() == to);
  CHECK(s.shape() == kiln::shape{rows});
  check_close(s, reference_row_sums(av, rows, cols), 1e-5);
  const auto c = (a - kiln::sum(a, 1, true)).to(to);
  CHECK(c.device() == to);
  const auto sums = reference_row_sums(av, rows, cols);
  std::vector<double> centred(av.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      centred[i * cols + j] = av[i * cols + j] - sums[i];
  check_close(c, centred, 1e-5);

  // The moved result is its own storage: writing to it leaves the inputs alone.
  auto w = (a + 0.0f).to(to);
  w = 7.0f;
  CHECK(a.to(kiln::device{}).to_vector() == av);
}

} // namespace

TEST_CASE("expression.to: host to host", "[to]") { check_moves(kiln::device{}, kiln::device{}); }

TEST_CASE("expression.to: host to vulkan:0 and back, vulkan:0 to vulkan:0", "[to][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  check_moves(kiln::device{}, *dev);
  check_moves(*dev, kiln::device{});
  check_moves(*dev, *dev);
}
