// Shared subexpressions in the host evaluator (kiln/eval/memo.hpp): which subtrees share a
// slot (same type, same memory through the same strides, same scalars), and that passes
// with shared subtrees give the values of double loops written here, over rows, strided
// views, SIMD tails and several threads. Also the short-circuit of autodiff's gate.
#include "support.hpp"

#include <kiln/autodiff/gate.hpp>

#include <cstring>

namespace {

std::vector<double> dv(const kiln::tensor<double>& t) { return t.to_vector(); }

// |got - want| within a few ulp of double for every element.
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    bad += !(std::abs(got[i] - want[i]) <= 1e-13 * (1 + std::abs(want[i])));
  INFO(what << ": " << bad << " of " << got.size() << " differ");
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("memo: equal subtrees share a slot, others do not", "[eval][memo]") {
  const auto x = kiln::random::uniform<double>({64}, 1, -2, 2);
  const auto y = kiln::random::uniform<double>({64}, 2, -2, 2);
  const auto z = kiln::random::uniform<double>({64}, 3, -2, 2);
  auto f = [](const auto& a, const auto& b, double c) { return kiln::exp(kiln::sin(a * b) + c); };
  const auto e1 = f(x, y, 1.0), e2 = f(x, y, 1.0), e3 = f(z, y, 1.0), e4 = f(x, y, 2.0),
             e5 = f(x, y, -0.0), e6 = f(x, y, 0.0);
  using E = std::remove_cvref_t<decltype(e1)>;
  using all = kiln::detail::type_list<E, E>; // E and everything below it occur twice
  // A slot where a repeated subtree costs more to compute than the slot's call: the exp
  // (with the add below it) and the sin (with the multiply), not sin + c or x * y alone.
  using S = std::remove_cvref_t<decltype(kiln::sin(x * y))>;
  using cheap = std::remove_cvref_t<decltype(x * y + 1.0)>;
  CHECK((kiln::detail::memoized<E, all>));
  CHECK((kiln::detail::memoized<S, all>));
  CHECK_FALSE((kiln::detail::memoized<cheap, kiln::detail::type_list<cheap, cheap>>));
  // Repeat detection numbers subtree types by structure: types differing only in an op,
  // an element type, the order of operands or a leaf kind get different numbers.
  const auto xf = kiln::random::uniform<float>({64}, 4, -2, 2);
  using kiln::detail::subtree_hash;
  using D = std::remove_cvref_t<decltype(kiln::exp(kiln::sin(x * y) + 1.0))>;
  STATIC_REQUIRE(subtree_hash<E> == subtree_hash<D>);
  STATIC_REQUIRE(subtree_hash<E> != subtree_hash<decltype(kiln::exp(kiln::sin(x * y) - 1.0))>);
  STATIC_REQUIRE(subtree_hash<E> != subtree_hash<decltype(kiln::exp(kiln::cos(x * y) + 1.0))>);
  STATIC_REQUIRE(subtree_hash<S> != subtree_hash<decltype(kiln::sin(xf * xf))>);
  STATIC_REQUIRE(subtree_hash<decltype(x - 1.0)> != subtree_hash<decltype(1.0 - x)>);
  STATIC_REQUIRE(subtree_hash<decltype(x - 1.0)> != subtree_hash<decltype(x - y)>);
  CHECK_FALSE(
      (kiln::detail::memoized<S, kiln::detail::type_list<S, decltype(kiln::sin(xf * xf))>>));
  // The host pass's slot sharing over the six outputs' memo sites: leaves equal when they
  // are the same memory through the same strides (here: the same tensor), scalars bit for bit.
  using kernel = kiln::detail::host_kernel<
      kiln::detail::type_list<double, double, double, double, double, double>,
      kiln::detail::type_list<E, E, E, E, E, E>>;
  const auto k = kernel::ref();
  REQUIRE(k.memos.size() == 12); // per output: the exp, then the sin below it
  std::array<kiln::detail::flat_leaf, 12> leaves;
  std::array<kiln::detail::flat_scalar, 6> scalars;
  auto* l = leaves.data();
  auto* s = scalars.data();
  for (const E* e : {&e1, &e2, &e3, &e4, &e5, &e6})
    kiln::detail::flatten(*e, l, s);
  std::array<int, 12> rep{};
  for (int i = 0; i < 12; ++i) { // what the host pass derives from memory and strides
    rep[i] = i;
    for (int p = 0; p < i; ++p)
      if (leaves[p].storage == leaves[i].storage) {
        rep[i] = p;
        break;
      }
  }
  const std::array<bool, 6> active{true, true, true, true, true, true};
  std::array<int, 12> slot{};
  bool shared[12] = {};
  const int slots =
      kiln::detail::index_memo_sites(k.memos, active, rep, scalars, slot.data(), shared);
  // Site 2i is output i's exp, 2i + 1 its sin.
  CHECK(slot[0] == slot[2]); // same tensors, same scalar
  CHECK(slot[1] == slot[3]); // and the sin below
  CHECK(slot[4] != slot[0]); // another tensor
  CHECK(slot[5] != slot[1]);
  CHECK(slot[6] != slot[0]);  // another scalar
  CHECK(slot[7] == slot[1]);  // (the scalar is above the sin)
  CHECK(slot[8] != slot[10]); // -0.0 and 0.0: compared bit for bit
  // exp: e1/e2, e3, e4, e5, e6; sin: x * y (all but e3), z * y.
  CHECK(slots == 7);
  // Only a slot with several sites is kept: the others would cost a store and never hit.
  CHECK(shared[0]);
  CHECK(shared[2]);
  CHECK_FALSE(shared[4]);
  CHECK_FALSE(shared[5]);
  CHECK_FALSE(shared[10]);
  // An inactive output's sites get no slot and share nothing.
  const std::array<bool, 6> first_off{false, true, true, true, true, true};
  kiln::detail::index_memo_sites(k.memos, first_off, rep, scalars, slot.data(), shared);
  CHECK(slot[0] == -1);
  CHECK_FALSE(shared[2]);
}

TEST_CASE("memo: several outputs sharing subtrees match double loops", "[eval][memo]") {
  for (int rep = 0; rep < 20; ++rep) {
    // Two dims so that rows restart the slots; an odd inner extent for the SIMD tail.
    const std::int64_t rows = test::draw(1, 9), cols = test::draw(1, 77);
    const auto xv = test::uniform<double>(rows * cols, -2, 2),
               yv = test::uniform<double>(rows * cols, -2, 2);
    const auto x = kiln::from(xv, {rows, cols}), y = kiln::from(yv, {rows, cols});
    const auto yt = kiln::from(yv, {cols, rows}).transpose(); // same storage, other strides
    const double c = test::uniform<double>(1, -1, 1)[0];
    const auto shared = kiln::exp(x * y + c) * kiln::sin(x);
    kiln::tensor<double> a({rows, cols}), b({rows, cols}), d({rows, cols});
    kiln::eval(a = shared + kiln::log1p(shared * shared), b = shared * 2.0,
               d = kiln::exp(x * yt + c) * kiln::sin(x));
    std::vector<double> wa(xv.size()), wb(xv.size()), wd(xv.size());
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const std::size_t k = i * cols + j;
        const double s = std::exp(xv[k] * yv[k] + c) * std::sin(xv[k]);
        wa[k] = s + std::log1p(s * s);
        wb[k] = s * 2.0;
        wd[k] = std::exp(xv[k] * yv[j * rows + i] + c) * std::sin(xv[k]);
      }
    INFO("shape " << rows << " x " << cols << ", c " << c);
    check_close(dv(a), wa, "shared + log1p(shared^2)");
    check_close(dv(b), wb, "shared * 2");
    check_close(dv(d), wd, "the same type through a transposed view");
  }
}

TEST_CASE("memo: a pass split over threads keeps its slots per thread", "[eval][memo]") {
  const int before = kiln::num_threads();
  kiln::set_num_threads(std::max(2, before));
  const std::int64_t n = (1 << 20) + 13;
  const auto xv = test::uniform<double>(n, -3, 3);
  const auto x = kiln::from(xv, {n});
  kiln::tensor<double> a({n}), b({n});
  const auto s = kiln::sqrt(kiln::exp(x) + 1.0);
  kiln::eval(a = s * x, b = s - x);
  kiln::set_num_threads(before);
  std::vector<double> wa(n), wb(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::sqrt(std::exp(xv[i]) + 1.0);
    wa[i] = v * xv[i];
    wb[i] = v - xv[i];
  }
  check_close(dv(a), wa, "s * x");
  check_close(dv(b), wb, "s - x");
}

TEST_CASE("gate reads its value only where its mask is non-zero", "[eval][memo]") {
  // log of negative numbers is NaN: where the mask is 0 the result is 0, never NaN, both
  // in batches whose mask is all zero (skipped) and in mixed batches (selected); f32 and
  // a half-precision pass (the scalar loop).
  const std::int64_t n = 203;
  const auto xv = test::uniform<double>(n, -2, 2);
  std::vector<double> mv(n, 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    if (i >= 64 && i < 150 && test::draw(0, 1)) mv[i] = test::uniform<double>(1, 0.5, 2)[0];
  const auto x = kiln::from(xv, {n}), m = kiln::from(mv, {n});
  const kiln::tensor<double> g = kiln::make_node<kiln::ops::gate>(kiln::log(x), m);
  const kiln::tensor<kiln::half> gh = kiln::make_node<kiln::ops::gate>(
      kiln::cast<kiln::half>(kiln::log(x)), kiln::cast<kiln::half>(m));
  const auto gv = g.to_vector();
  const auto hv = gh.to_vector();
  std::size_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double want = mv[i] != 0 ? std::log(xv[i]) : 0.0;
    // (log on the batch path may differ from std::log in the last bit)
    const bool same = test::same_value(gv[i], want) ||
                      (!std::isnan(want) && std::abs(gv[i] - want) <= 4e-16 * std::abs(want));
    const bool ok =
        same && (mv[i] == 0 ? static_cast<float>(hv[i]) == 0.0f
                            : std::isnan(want) == std::isnan(static_cast<float>(hv[i])));
    bad += !ok;
  }
  CHECK(bad == 0);
}
