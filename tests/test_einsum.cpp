// einsum and tensordot (issue 33): subscripts drawn at random (batch, free, contracted and
// summed-away labels, diagonals, dims of 1 that broadcast, extents 0 and 1, permuted and
// strided operands), against a sum over every assignment of the labels computed here in
// double; gradients against finite differences; errors naming the subscripts and shapes;
// results inside expressions; each GPU device against the same reference.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "device_stand_in.hpp"
#include "grad_support.hpp"
#include "matmul_support.hpp"
#include "metal_support.hpp"
#include "support.hpp"
#include "tune_support.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace {

template <class X>
std::vector<double> read(const X& x) {
  using T = kiln::value_t<X>;
  const kiln::tensor<T> t = kiln::tensor<T>(x).to(kiln::device{});
  std::vector<double> r;
  for (const T& e : t.to_vector())
    r.push_back(double(kiln::convert<double>(e)));
  return r;
}

// A drawn einsum: each operand's subscripts and shape, the output's subscripts.
struct problem {
  std::vector<std::string> in;
  std::vector<kiln::shape> shape;
  std::string out;
  std::string spec() const {
    std::string s = in[0];
    for (std::size_t i = 1; i < in.size(); ++i)
      s += "," + in[i];
    return s + "->" + out;
  }
};

// The reference: for every assignment of the labels, the product of the operands' elements
// added to the output's. Also the sum of |products| per output (the error bound's scale)
// and the number of terms.
struct reference {
  std::vector<double> v, scale;
  std::int64_t terms = 1;
};
reference einsum_reference(const problem& p, const std::vector<std::vector<double>>& x) {
  std::map<char, std::int64_t> ext;
  for (std::size_t i = 0; i < p.in.size(); ++i)
    for (std::size_t d = 0; d < p.in[i].size(); ++d) {
      std::int64_t& e = ext[p.in[i][d]];
      if (e <= 1) e = std::max<std::int64_t>(e, p.shape[i][int(d)]);
      if (p.shape[i][int(d)] == 0) e = 0;
    }
  std::vector<char> labels;
  for (const auto& [c, e] : ext)
    labels.push_back(c);
  std::int64_t nout = 1;
  for (const char c : p.out)
    nout *= ext[c];
  reference r;
  r.v.assign(std::size_t(nout), 0.0);
  r.scale.assign(std::size_t(nout), 0.0);
  for (const char c : labels)
    if (p.out.find(c) == std::string::npos) r.terms *= std::max<std::int64_t>(ext[c], 1);
  std::int64_t total = 1;
  for (const char c : labels)
    total *= ext[c];
  std::map<char, std::int64_t> at;
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t rest = e;
    for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
      at[*it] = rest % ext[*it];
      rest /= ext[*it];
    }
    double prod = 1;
    for (std::size_t i = 0; i < p.in.size(); ++i) {
      std::int64_t off = 0;
      for (std::size_t d = 0; d < p.in[i].size(); ++d) {
        const std::int64_t s = p.shape[i][int(d)];
        off = off * s + (s == 1 ? 0 : at[p.in[i][d]]);
      }
      prod *= x[i][std::size_t(off)];
    }
    std::int64_t o = 0;
    for (const char c : p.out)
      o = o * ext[c] + at[c];
    r.v[std::size_t(o)] += prod;
    r.scale[std::size_t(o)] += std::fabs(prod);
  }
  return r;
}

// A random einsum of one or two operands over up to 5 labels: each label is batch, free,
// contracted or summed away by where it appears; a label may repeat within an operand (a
// diagonal) or have extent 1 in one operand (broadcast).
problem draw_problem(int operands) {
  const int nl = test::draw(1, 5);
  std::vector<std::int64_t> ext;
  for (int l = 0; l < nl; ++l) {
    const int r = test::draw(0, 9);
    ext.push_back(r == 0 ? 0 : r == 1 ? 1 : test::draw(2, 9));
  }
  problem p;
  std::string used;
  for (int i = 0; i < operands; ++i) {
    std::string s;
    const int rank = test::draw(0, 4);
    for (int d = 0; d < rank; ++d) {
      char c = char('a' + test::draw(0, nl - 1));
      // Mostly distinct labels: a repeat (a diagonal) one time in five.
      if (s.find(c) != std::string::npos && test::draw(0, 4) != 0) continue;
      s.push_back(c);
    }
    kiln::shape sh;
    for (const char c : s) {
      const std::int64_t e = ext[c - 'a'];
      // A dim of 1 against the label's extent elsewhere, unless it repeats in this operand.
      const bool once = std::count(s.begin(), s.end(), c) == 1;
      sh.push_back(once && e > 1 && test::draw(0, 7) == 0 ? 1 : e);
    }
    p.in.push_back(s);
    p.shape.push_back(sh);
    used += s;
  }
  // The output: a random subset of the labels used, in random order, each once.
  std::string distinct;
  for (const char c : used)
    if (distinct.find(c) == std::string::npos) distinct.push_back(c);
  std::shuffle(distinct.begin(), distinct.end(), test::rng());
  for (const char c : distinct)
    if (test::draw(0, 2) != 0) p.out.push_back(c);
  return p;
}

// An operand of shape s with random values, contiguous, reversed in memory (a permuted
// view) or strided.
template <class T>
kiln::tensor<T> operand(const kiln::shape& s, const kiln::device& dev) {
  auto fill = [](const kiln::shape& sh) {
    const std::size_t n = std::size_t(kiln::numel(sh));
    return kiln::from(
        std::is_integral_v<T> ? test::integers<T>(n, -4, 4) : test::uniform<T>(n, -2, 2), sh);
  };
  const int how = test::draw(0, 2);
  if (how == 1 && s.size() >= 2) {
    kiln::shape r;
    for (int d = s.size() - 1; d >= 0; --d)
      r.push_back(s[d]);
    const kiln::tensor<T> f = fill(r).to(dev);
    kiln::layout l = f.layout();
    std::reverse(l.shape.begin(), l.shape.end());
    std::reverse(l.strides.begin(), l.strides.end());
    return kiln::tensor<T>(f.storage(), l);
  }
  if (how == 2 && s.size() >= 1) {
    kiln::shape w = s;
    w[0] = 2 * s[0] + 1;
    return fill(w).to(dev).slice(0, 1, 2 * s[0] + 1, 2);
  }
  return fill(s).to(dev);
}

using matmul_test::eps;

template <class T>
void check(const kiln::tensor<T>& got, const reference& want, const std::string& what) {
  INFO(what);
  const std::vector<double> g = read(got);
  REQUIRE(g.size() == want.v.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    // A sum of `terms` products: (terms + 2) eps sum|products| with the accumulator's eps
    // (f32 for f16: every sum is f32's), plus the result's own rounding (relative, or a
    // subnormal's).
    constexpr double acc = std::is_same_v<T, kiln::half> ? eps<float>() : eps<T>();
    const double tol = (want.terms + 2) * acc * want.scale[i] + eps<T>() * std::fabs(want.v[i]) +
                       matmul_test::subnormal_rounding<T>();
    if (!(std::fabs(g[i] - want.v[i]) <= tol)) {
      UNSCOPED_INFO("element " << i << ": " << g[i] << " vs " << want.v[i] << " (tol " << tol
                               << ")");
      if (++bad > 3) break;
    }
  }
  CHECK(bad == 0);
}

template <class T>
void random_einsums(const kiln::device& dev, int draws) {
  for (int i = 0; i < draws; ++i) {
    const problem p = draw_problem(test::draw(1, 5) == 1 ? 1 : 2);
    std::vector<kiln::tensor<T>> x;
    std::vector<std::vector<double>> xv;
    for (const kiln::shape& s : p.shape) {
      x.push_back(operand<T>(s, dev));
      xv.push_back(read(x.back()));
    }
    const std::string what =
        std::string(kiln::name(kiln::dtype_of<T>())) + " \"" + p.spec() + "\" " + p.shape[0].str() +
        (p.shape.size() > 1 ? " " + p.shape[1].str() : "") + " on " + dev.str();
    const reference want = einsum_reference(p, xv);
    if (x.size() == 1) {
      const kiln::tensor<T> got = kiln::einsum(p.spec(), x[0]);
      REQUIRE(got.device() == dev);
      check(got, want, what);
    } else {
      const kiln::tensor<T> got = kiln::einsum(p.spec(), x[0], x[1]);
      REQUIRE(got.device() == dev);
      check(got, want, what);
    }
  }
}

std::string message(auto&& f) {
  try {
    f();
  } catch (const kiln::error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

} // namespace

TEST_CASE("einsum: random subscripts, shapes, layouts and dtypes on the host match double sums",
          "[host]") {
  const kiln::device host;
  random_einsums<double>(host, 150);
  random_einsums<float>(host, 150);
  random_einsums<std::int32_t>(host, 60);
  random_einsums<kiln::half>(host, 40);
}

TEST_CASE("einsum: the usual forms, the implicit output, ellipses and tensordot", "[host]") {
  const auto a = kiln::from(test::uniform<double>(3 * 4, -1, 1), {3, 4});
  const auto b = kiln::from(test::uniform<double>(4 * 5, -1, 1), {4, 5});
  const auto q = kiln::from(test::uniform<double>(2 * 3 * 4, -1, 1), {2, 3, 4});
  const auto sq = kiln::from(test::uniform<double>(4 * 4, -1, 1), {4, 4});
  auto same = [](const auto& x, const auto& y, const char* what) {
    INFO(what);
    grad_test::check_close(read(x), read(y), 1e-12, what);
  };
  same(kiln::einsum("ij,jk->ik", a, b), kiln::matmul(a, b), "ij,jk->ik");
  same(kiln::einsum("ij,jk", a, b), kiln::matmul(a, b), "implicit ik");
  same(kiln::einsum("ij,kj->ik", a, kiln::tensor<double>(b).transpose()), kiln::matmul(a, b),
       "b transposed");
  same(kiln::einsum("ij,jk->ki", a, b), kiln::matmul(a, b).eval().transpose(), "output ki");
  same(kiln::einsum("ba", a), kiln::tensor<double>(a).transpose(), "implicit transpose");
  same(kiln::einsum("ii->i", sq),
       kiln::from(std::vector<double>{read(sq)[0], read(sq)[5], read(sq)[10], read(sq)[15]}, {4}),
       "diagonal");
  same(kiln::einsum("ii", sq), kiln::sum(kiln::einsum("ii->i", sq)), "trace");
  same(kiln::einsum("bij,jk->bik", q, b), kiln::matmul(q, b), "batched");
  same(kiln::einsum("...ij,...jk->...ik", q, b), kiln::matmul(q, b), "ellipsis");
  same(kiln::einsum("...j->...", q), kiln::sum(q, -1), "ellipsis sum");
  same(kiln::einsum("ij->", a), kiln::sum(a), "sum");
  same(kiln::einsum("ij,ij->ij", a, a), a * a, "elementwise");
  same(kiln::einsum("i,j", kiln::from(std::vector<double>{1, 2}, {2}),
                    kiln::from(std::vector<double>{3, 4, 5}, {3})),
       kiln::from(std::vector<double>{3, 4, 5, 6, 8, 10}, {2, 3}), "outer");
  // tensordot: numpy's default contracts the last two dims of x with the first two of y.
  const auto y = kiln::from(test::uniform<double>(3 * 4 * 2, -1, 1), {3, 4, 2});
  same(kiln::tensordot(q, y), kiln::einsum("aij,ijb->ab", q, y), "tensordot 2");
  const auto z = kiln::from(test::uniform<double>(4 * 5 * 6, -1, 1), {4, 5, 6});
  same(kiln::tensordot(q, z, 1), kiln::einsum("abi,icd->abcd", q, z), "tensordot 1");
  same(kiln::tensordot(q, y, {1, 0}, {0, 2}), kiln::einsum("abc,bda->cd", q, y),
       "tensordot with axes");
  same(kiln::tensordot(a, b, 0), kiln::einsum("ij,kl->ijkl", a, b), "tensordot 0: outer");
}

TEST_CASE("einsum: gradients through every label role match finite differences", "[host]") {
  for (int i = 0; i < 40; ++i) {
    problem p = draw_problem(test::draw(1, 4) == 1 ? 1 : 2);
    // Small extents: finite differences evaluate f twice per element.
    for (auto& s : p.shape)
      for (auto& e : s)
        e = std::min<std::int64_t>(e, 4);
    // Keep extents consistent after shrinking: a label's extents are min(e, 4) everywhere.
    std::vector<kiln::tensor<double>> x;
    for (const kiln::shape& s : p.shape)
      x.push_back(kiln::from(test::uniform<double>(std::size_t(kiln::numel(s)), -1, 1), s));
    std::string what = "\"" + p.spec() + "\"";
    for (const kiln::shape& s : p.shape)
      what += " " + s.str();
    INFO(what);
    // The gradient of each operand against finite differences (an empty one: its shape).
    auto against_fd = [&](const auto& f, const auto& d, std::size_t i) {
      const kiln::tensor<double> g = d;
      REQUIRE(g.shape() == x[i].shape());
      if (x[i].size() > 0)
        grad_test::check_close(read(g), grad_test::fd_grad(f, x[i]), 1e-7,
                               "d/dx" + std::to_string(i) + " " + what);
    };
    if (x.size() == 1) {
      const kiln::shape so = kiln::einsum(p.spec(), x[0]).shape();
      const auto r = kiln::from(test::uniform<double>(std::size_t(kiln::numel(so)), -1, 1), so);
      const auto f = kiln::sum(kiln::tanh(kiln::einsum(p.spec(), x[0])) * r);
      auto [d0] = kiln::grad(f, x[0]);
      against_fd(f, d0, 0);
    } else {
      const kiln::shape so = kiln::einsum(p.spec(), x[0], x[1]).shape();
      const auto r = kiln::from(test::uniform<double>(std::size_t(kiln::numel(so)), -1, 1), so);
      const auto f = kiln::sum(kiln::tanh(kiln::einsum(p.spec(), x[0], x[1])) * r);
      auto [d0, d1] = kiln::grad(f, x[0], x[1]);
      against_fd(f, d0, 0);
      against_fd(f, d1, 1);
    }
  }
}

TEST_CASE("einsum: operands that are expressions, results inside expressions and reductions",
          "[host]") {
  const auto x = kiln::from(test::uniform<double>(6 * 5, -1, 1), {6, 5});
  const auto w = kiln::from(test::uniform<double>(5 * 4, -1, 1), {5, 4});
  auto same = [](const auto& got, const auto& want, const char* what) {
    grad_test::check_close(read(got), read(want), 1e-12, what);
  };
  same(kiln::einsum("ij,jk->ik", kiln::relu(x) * 2.0, w), kiln::matmul(kiln::relu(x) * 2.0, w),
       "expression operand");
  same(kiln::exp(kiln::einsum("ij,jk->ki", x, w)) + 1.0,
       kiln::exp(kiln::matmul(x, w).eval().transpose()) + 1.0, "inside an expression");
  same(kiln::sum(kiln::einsum("ij,jk->ik", x, w), 0), kiln::sum(kiln::matmul(x, w), 0),
       "inside a reduction");
  // Into one of its operands: the result is computed before the target is written.
  kiln::tensor<double> t = kiln::from(test::uniform<double>(5 * 5, -1, 1), {5, 5});
  const kiln::tensor<double> want = kiln::matmul(t, t);
  t = kiln::einsum("ij,jk->ik", t, t);
  same(t, want, "into an operand");
  // Integer einsums accumulate in i64 and wrap once, as matmul's do.
  const auto i32 = kiln::from(std::vector<std::int32_t>{1 << 15, 1 << 15, 1 << 15, 5}, {4});
  const auto j32 = kiln::from(std::vector<std::int32_t>{1 << 15, 1 << 15, 1 << 15, 1}, {4});
  CHECK(kiln::tensor<std::int32_t>(kiln::einsum("i,i", i32, j32)).item() ==
        static_cast<std::int32_t>(3 * (std::int64_t(1) << 30) + 5));
  // Operands of mixed types: a label summed away before the product is summed in the
  // result's accumulator type, not in the narrower operand's (u8 would wrap, bool stick at 1).
  const auto u8 = kiln::from(std::vector<std::uint8_t>{200, 200}, {1, 2});
  const auto one = kiln::from(std::vector<double>{1}, {1});
  CHECK(kiln::tensor<double>(kiln::einsum("ij,k->ik", u8, one)).item() == 400.0);
  const auto big = kiln::from(std::vector<std::int32_t>{2147483647, 2147483647}, {1, 2});
  const auto one64 = kiln::from(std::vector<std::int64_t>{1}, {1});
  CHECK(kiln::tensor<std::int64_t>(kiln::einsum("ij,k->ik", big, one64)).item() == 4294967294);
  const kiln::tensor<bool> flags =
      kiln::cast<bool>(kiln::from(std::vector<std::int32_t>{1, 1, 1}, {1, 3}));
  const auto two = kiln::from(std::vector<std::int32_t>{2}, {1});
  CHECK(kiln::tensor<std::int32_t>(kiln::einsum("ij,k->ik", flags, two)).item() == 6);
  CHECK(kiln::tensor<std::int32_t>(kiln::einsum("ij,j->i", flags, two.broadcast_to({3}))).item() ==
        6);
}

// An einsum whose product is its output (the result's dims in the product's order, rows or
// cols possibly merged from several labels) is one of the statement's products: the consuming
// expression runs as its epilogue, and every mention of it is one product. The host kernel's
// counts say how many products ran and how many were fused; values against double loops.
TEST_CASE("einsum: the consuming expression is the product's epilogue on the host", "[host]") {
  const auto run = [](auto&& statement, std::uint64_t products, std::uint64_t fused,
                      std::uint64_t in_output, const char* what) {
    matmul_test::check_counts(statement, products, fused, in_output, what);
  };
  const std::int64_t nb = 3, m = 70, k = 45, n = 300; // several strips per row block
  const auto xv = test::uniform<double>(nb * m * k, -1, 1),
             wv = test::uniform<double>(k * n, -1, 1), bv = test::uniform<double>(n, -1, 1),
             cv = test::uniform<double>(nb * n, -1, 1);
  const auto x = kiln::from(xv, {nb, m, k}), w = kiln::from(wv, {k, n}), b = kiln::from(bv, {n});
  const auto wt = kiln::from(wv, {k, n}).transpose().eval(); // [n, k]
  const auto c3 = kiln::from(cv, {nb, 1, n});
  // z[e, i, j] = sum_q x[e, i, q] w[q, j] in double.
  std::vector<double> z(nb * m * n, 0.0);
  for (std::int64_t e = 0; e < nb * m; ++e)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t q = 0; q < k; ++q)
        z[e * n + j] += xv[e * k + q] * wv[q * n + j];
  auto want = [&](auto f) {
    std::vector<double> v(z.size());
    for (std::size_t i = 0; i < z.size(); ++i)
      v[i] = f(z[i], i);
    return v;
  };
  auto gelu = [](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); };
  using grad_test::check_close;
  kiln::tensor<double> y = kiln::zeros<double>({nb, m, n}), pre = kiln::zeros<double>({nb, m, n});
  // Rows of the product merged from the labels b and i: the bias reads through the merge.
  run([&] { y = kiln::gelu(kiln::einsum("bij,jk->bik", x, w) + b); }, 1, 1, 1, "bij,jk->bik");
  check_close(read(y), want([&](double v, std::size_t i) { return gelu(v + bv[i % n]); }), 1e-12,
              "gelu(einsum(bij,jk->bik) + b)");
  run([&] { y = kiln::tanh(kiln::tensordot(x, w, 1)) * 2.0; }, 1, 1, 1, "tensordot");
  check_close(read(y), want([](double v, std::size_t) { return 2 * std::tanh(v); }), 1e-12,
              "tanh(tensordot(x, w, 1)) * 2");
  // A transposed operand, the product mentioned three times: one product, fused.
  run(
      [&] {
        const auto e = kiln::einsum("bij,kj->bik", x, wt);
        y = e * e - e;
      },
      1, 1, 1, "mentioned three times");
  check_close(read(y), want([](double v, std::size_t) { return v * v - v; }), 1e-12, "e e - e");
  // Two outputs from one product and one epilogue.
  run(
      [&] {
        const auto zz = kiln::einsum("bij,jk->bik", x, w) + b;
        kiln::eval(pre = zz, y = kiln::relu(zz));
      },
      1, 1, 0, "eval of two outputs");
  check_close(read(pre), want([&](double v, std::size_t i) { return v + bv[i % n]; }), 1e-12,
              "eval: pre");
  check_close(read(y), want([&](double v, std::size_t i) { return std::max(0.0, v + bv[i % n]); }),
              1e-12, "eval: relu(pre)");
  // A leaf the merged rows cannot view (c3 differs along b, broadcast along i): the product,
  // then the pass.
  run([&] { y = kiln::einsum("bij,jk->bik", x, w) + c3; }, 1, 0, 0, "a leaf the rows cannot view");
  check_close(read(y),
              want([&](double v, std::size_t i) { return v + cv[(i / (m * n)) * n + i % n]; }),
              1e-12, "einsum + c3");
  // With batch labels the product's dims are the output's: c3 reads as it is, fused.
  const auto w3 = kiln::from(wv, {1, k, n}).broadcast_to({nb, k, n});
  run([&] { y = kiln::einsum("bij,bjk->bik", x, w3) + c3; }, 1, 1, 1, "batch labels");
  check_close(read(y),
              want([&](double v, std::size_t i) { return v + cv[(i / (m * n)) * n + i % n]; }),
              1e-12, "einsum(bij,bjk->bik) + c3");
  // The output in another order than the product's: computed, then a pass.
  kiln::tensor<double> yt = kiln::zeros<double>({nb, n, m});
  run([&] { yt = kiln::einsum("bij,jk->bki", x, w) + 1.0; }, 1, 0, 0, "bki");
  std::vector<double> ytw(z.size());
  for (std::int64_t e = 0; e < nb; ++e)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        ytw[(e * n + j) * m + i] = z[(e * m + i) * n + j] + 1;
  check_close(read(yt), ytw, 1e-12, "einsum(bij,jk->bki) + 1");
  // Into its own operand: the kernel still reads it, so not fused, and right.
  kiln::tensor<double> sq = kiln::from(test::uniform<double>(k * k, -1, 1), {k, k});
  const kiln::tensor<double> sq2 = kiln::relu(kiln::matmul(sq, sq));
  run([&] { sq = kiln::relu(kiln::einsum("ij,jk->ik", sq, sq)); }, 1, 0, 0, "into an operand");
  check_close(read(sq), read(sq2), 1e-12, "sq = relu(einsum(sq, sq))");
  // Operand expressions: in the product's order they are read while the kernel packs them;
  // rows that merge two labels evaluate the expression first. Either way one product, fused.
  run([&] { y = kiln::tanh(kiln::einsum("bij,bjk->bik", x * 2.0, w3 * 0.5)); }, 1, 1, 1,
      "expression operands in order");
  check_close(read(y), want([](double v, std::size_t) { return std::tanh(v); }), 1e-12,
              "tanh(einsum(x * 2, w3 * 0.5))");
  run([&] { y = kiln::tanh(kiln::einsum("bij,jk->bik", x * 2.0, w)) * 0.5; }, 1, 1, 1,
      "an expression operand whose rows merge");
  check_close(read(y), want([](double v, std::size_t) { return 0.5 * std::tanh(2 * v); }), 1e-12,
              "tanh(einsum(x * 2, w)) / 2");
  run([&] { y = kiln::einsum("bij,kj->bik", x, kiln::exp(wt) - kiln::exp(wt) + wt); }, 1, 0, 0,
      "an expression operand read transposed");
  check_close(read(y), z, 1e-12, "einsum(x, exp(wt) - exp(wt) + wt)");
  // dst = einsum(...) of the product's type: straight into dst.
  run([&] { y = kiln::einsum("bij,jk->bik", x, w); }, 1, 0, 0, "dst = einsum");
  check_close(read(y), z, 1e-12, "y = einsum");
}

TEST_CASE("einsum: bad subscripts and shapes are a kiln::error naming them, where the node is "
          "built",
          "[host]") {
  const auto a = kiln::zeros<float>({3, 4}), b = kiln::zeros<float>({5, 2}),
             sq = kiln::zeros<float>({3, 4});
  CHECK_THAT(message([&] { (void)kiln::einsum("ij,jk->ik", a, b); }),
             Catch::Contains("einsum") && Catch::Contains("differ") &&
                 Catch::Contains("\"ij,jk->ik\"") && Catch::Contains("[3, 4]") &&
                 Catch::Contains("[5, 2]") && Catch::Contains("j is 4 and 5"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ijk,jk->ik", a, b); }),
             Catch::Contains("3 dims named for an operand of shape [3, 4]"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ij->iz", a); }),
             Catch::Contains("output label is in no operand") && Catch::Contains(": z"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ij->ii", a); }),
             Catch::Contains("output label appears twice"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ij,jk", a); }),
             Catch::Contains("another number of operands"));
  CHECK_THAT(message([&] { (void)kiln::einsum("i1", a); }), Catch::Contains("'1'"));
  CHECK_THAT(message([&] { (void)kiln::einsum("...j->j", a); }),
             Catch::Contains("\"...\" stands for dims the output does not name"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ii", sq); }),
             Catch::Contains("diagonal") && Catch::Contains("3 and 4"));
  CHECK_THAT(message([&] { (void)kiln::einsum("ij", kiln::tensor<float>()); }),
             Catch::Contains("empty"));
  CHECK_THAT(message([&] { (void)kiln::tensordot(a, b, 1); }),
             Catch::Contains("tensordot") && Catch::Contains("contracted dims differ") &&
                 Catch::Contains("4 vs 5"));
  CHECK_THAT(message([&] { (void)kiln::tensordot(a, b, 3); }), Catch::Contains("more dims"));
  CHECK_THAT(message([&] {
               (void)kiln::tensordot(a, b, {0}, {0, 1});
             }),
             Catch::Contains("differ in length"));
  CHECK_THAT(message([&] {
               (void)kiln::tensordot(a, a, {1, 1}, {1, 0});
             }),
             Catch::Contains("contracted twice"));
}

TEST_CASE("einsum: random subscripts on each GPU device match double sums",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    // On the CPU stand-ins every new kernel is a host compile: fewer draws there.
    const bool stand_in = test::stand_in(*dev);
    random_einsums<float>(*dev, stand_in ? 4 : 16);
    // A gradient through a contraction and a diagonal, f32 on the device against f64 here.
    const auto xv = test::uniform<double>(4 * 3 * 3, -1, 1),
               wv = test::uniform<double>(3 * 5, -1, 1);
    const auto xd = kiln::from(xv, {4, 3, 3}), wd = kiln::from(wv, {3, 5});
    const auto x = kiln::cast<float>(xd).eval().to(*dev), w = kiln::cast<float>(wd).eval().to(*dev);
    const auto f = kiln::sum(kiln::tanh(kiln::einsum("bii,ik->kb", x, w)));
    auto [dx, dw] = kiln::grad(f, x, w);
    const kiln::tensor<float> gx = dx, gw = dw;
    REQUIRE(gx.device() == *dev);
    const auto fh = kiln::sum(kiln::tanh(kiln::einsum("bii,ik->kb", xd, wd)));
    auto [dxh, dwh] = kiln::grad(fh, xd, wd);
    grad_test::check_close(read(gx), read(kiln::tensor<double>(dxh)), 1e-5,
                           "d/dx on " + dev->str());
    grad_test::check_close(read(gw), read(kiln::tensor<double>(dwh)), 1e-5,
                           "d/dw on " + dev->str());
    // The consuming expression as the contraction kernel's epilogue: one launch, where the
    // output is the product's dims and where its rows merge two labels (the bias read
    // through the merge); a leaf the merge cannot view runs the product, then a pass.
    const std::int64_t nb = 2, m = 19, k = 7, n = 23;
    const auto av = test::uniform<double>(nb * m * k, -1, 1),
               bv = test::uniform<double>(k * n, -1, 1), cv = test::uniform<double>(nb * n, -1, 1);
    // (made in f32 here: Metal has no f64)
    auto f32 = [&](const std::vector<double>& v, const kiln::shape& s) {
      return kiln::cast<float>(kiln::from(v, s)).eval().to(*dev);
    };
    const auto a32 = f32(av, {nb, m, k}), b32 = f32(bv, {k, n}), c332 = f32(cv, {nb, 1, n});
    const auto c32 = f32(std::vector<double>(cv.begin(), cv.begin() + n), {n});
    std::vector<double> z(nb * m * n, 0.0);
    for (std::int64_t e = 0; e < nb * m; ++e)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t q = 0; q < k; ++q)
          z[e * n + j] += av[e * k + q] * bv[q * n + j];
    kiln::tensor<float> y = kiln::zeros<float>({nb, m, n}).to(*dev);
    // Forms 3 and 4: an operand expression, read in the tile loads where it is the product's
    // matrix as it is (batch, rows, K), evaluated first where its rows merge two labels.
    const auto b3 = b32.unsqueeze(0).broadcast_to({nb, k, n});
    for (int form = 0; form < 5; ++form) {
      const auto launches = tune_test::launches_of([&] {
        if (form == 0)
          y = kiln::relu(kiln::einsum("bij,bjk->bik", a32, b3) + c32);
        else if (form == 1)
          y = kiln::relu(kiln::einsum("bij,jk->bik", a32, b32) + c32);
        else if (form == 2)
          y = kiln::relu(kiln::einsum("bij,jk->bik", a32, b32) + c332);
        else if (form == 3)
          y = kiln::relu(kiln::einsum("bij,bjk->bik", a32 * 2.0f, b3 * 0.5f) + c32);
        else
          y = kiln::relu(kiln::einsum("bij,jk->bik", a32 * 2.0f, b32 * 0.5f) + c32);
      });
      std::vector<double> want(z.size());
      for (std::size_t i = 0; i < z.size(); ++i)
        want[i] = std::max(0.0, z[i] + (form != 2 ? cv[i % n] : cv[(i / (m * n)) * n + i % n]));
      INFO("form " << form << " on " << dev->str());
      CHECK(launches.size() == (form == 2 || form == 4 ? 2u : 1u));
      grad_test::check_close(read(y), want, 1e-5, "relu(einsum + c) on " + dev->str());
    }
  }
}
