// Products on GPU devices (issue 33): the contraction kernel of kernels/contract_template.hpp
// over shapes drawn past its tile edges (batches that broadcast, transposed and strided
// operands, f32/f64/i32/f16), operand expressions fused into its tile loads (one launch, no
// temporary), every tile configuration of a sample of the matmul family's space forced on it,
// and the shapes it declines (matrix-vector, a K past one kernel's loop budget) run as a
// reduction — each against products computed here in double.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "device_stand_in.hpp"
#include "matmul_support.hpp"
#include "metal_support.hpp"
#include "tune_support.hpp"

#include <filesystem>
#include <optional>
#include <set>
#include <unistd.h>

namespace {

using namespace matmul_test;
namespace tune = kiln::jit::tune;

std::vector<const kiln::device*> devices() {
  std::vector<const kiln::device*> out;
  for (const kiln::device* d : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (d) out.push_back(d);
  return out;
}

bool runs(const kiln::device& dev, kiln::dtype t) {
  return kiln::backend_for(dev)->unsupported(t).empty();
}

// An extent around the default tile's edges (64) and register tile's (4), or small.
std::int64_t tile_extent() {
  static const std::int64_t pool[] = {8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129};
  return pool[test::draw(0, int(std::size(pool)) - 1)];
}

// Shapes of a product the tile kernel takes: a batch of rank 0-2 that broadcasts, M and N
// from tile_extent, K from 0 to past several K steps.
std::pair<kiln::shape, kiln::shape> tile_shapes() {
  const std::int64_t m = tile_extent(), n = tile_extent();
  const std::int64_t k = test::draw(0, 5) == 0 ? test::draw(0, 3) : test::draw(1, 150);
  kiln::shape a, b;
  const int nb = test::draw(0, 2);
  for (int d = 0; d < nb; ++d) {
    const std::int64_t e = test::draw(2, 3);
    const int which = test::draw(0, 3); // 0: a broadcasts it, 1: b does, 2: b lacks it
    if (which != 2 || d > 0) b.push_back(which == 1 ? 1 : e);
    a.push_back(which == 0 ? 1 : e);
  }
  a.push_back(m);
  a.push_back(k);
  b.push_back(k);
  b.push_back(n);
  return {a, b};
}

// The launches f makes, by family.
template <class F>
std::vector<std::string> families_of(F&& f) {
  std::vector<std::string> out;
  for (const auto& s : tune_test::launches_of(std::forward<F>(f)))
    out.push_back(s.sp->family());
  return out;
}

template <class T>
void random_tiles(const kiln::device& dev, int draws) {
  for (int i = 0; i < draws; ++i) {
    const auto [sa, sb] = tile_shapes();
    const auto a = operand<T>(sa, dev), b = operand<T>(sb, dev);
    const std::string what = std::string(kiln::name(kiln::dtype_of<T>())) + " " + sa.str() + " @ " +
                             sb.str() + " on " + dev.str();
    check(kiln::tensor<T>(kiln::matmul(a, b)), reference(read(a), read(b)), what);
  }
}

} // namespace

TEST_CASE("device matmul: the tile kernel over random shapes, layouts and dtypes",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : devices()) {
    // On the CPU stand-ins every new kernel is a host compile (~1-2 s): fewer draws there.
    const int n = test::stand_in(*dev) ? 3 : 12;
    random_tiles<float>(*dev, n);
    random_tiles<std::int32_t>(*dev, n / 3);
    random_tiles<kiln::half>(*dev, n / 3);
    if (runs(*dev, kiln::dtype::f64)) random_tiles<double>(*dev, n / 3);
  }
}

TEST_CASE("device matmul: operand expressions are read in the tile loads, one launch",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : devices()) {
    const std::int64_t m = 70, k = 37, n = 45;
    const auto xv = test::uniform<float>(m * k, -2, 2), wv = test::uniform<float>(k * n, -2, 2);
    const auto mv = test::integers<std::int32_t>(m * k, 0, 1);
    const auto x = kiln::from(xv, {m, k}).to(*dev), w = kiln::from(wv, {k, n}).to(*dev);
    const auto mask = kiln::cast<float>(kiln::from(mv, {m, k})).eval().to(*dev);
    // relu(x) * mask, a scalar, and w read transposed twice over (a view of a view).
    const auto wt = w.transpose().transpose();
    auto product = [&] {
      return kiln::tensor<float>(kiln::matmul(kiln::relu(x) * mask, wt * 0.5f));
    };
    CHECK(families_of(product) == std::vector<std::string>{"matmul"});
    const auto want = reference(read(kiln::relu(x) * mask), read(w * 0.5f));
    check(product(), want, "relu(x) * mask @ w * 0.5 on " + dev->str());
    // A cast in the prologue: f16 operands into an f32 product.
    const auto xh = kiln::cast<kiln::half>(x).eval(), wh = kiln::cast<kiln::half>(w).eval();
    auto mixed = [&] {
      return kiln::tensor<float>(kiln::matmul(kiln::cast<float>(xh), kiln::cast<float>(wh)));
    };
    CHECK(families_of(mixed) == std::vector<std::string>{"matmul"});
    check(mixed(), reference(read(xh), read(wh)), "cast f16 operands on " + dev->str());
    // One operand used twice: x @ x^T reads x through two layouts.
    check(kiln::tensor<float>(kiln::matmul(x, x.transpose())),
          reference(read(x), read(x.transpose())), "x @ x^T on " + dev->str());
  }
}

TEST_CASE("device matmul: every sampled tile configuration gives the product",
          "[vulkan][cuda][metal]") {
  // K = 67: eight full K steps of 8 and a part; K = 3: less than one (with two stages, the
  // first step is the last).
  for (const std::int64_t k : {67, 3})
    for (const kiln::device* dev : devices()) {
      const auto a = operand<float>({2, 45, k}, *dev), b = operand<float>({k, 53}, *dev);
      const product want = reference(read(a), read(b));
      auto run = [&] { return kiln::tensor<float>(kiln::matmul(a, b)); };
      const auto sites = tune_test::launches_of(run);
      REQUIRE(sites.size() == 1);
      const tune::space& sp = *sites[0].sp;
      REQUIRE(sp.family() == "matmul");
      // Configurations the device allows, a sample of each tile dim's values: tm, tn, tk, rm,
      // rn, rows_adjacent, stages (the stand-ins run the first four: each pair of the last two).
      const int rows[][7] = {
          {16, 16, 8, 1, 1, 0, 1},  {64, 32, 8, 4, 2, 1, 2},  {32, 64, 8, 2, 4, 0, 2},
          {128, 64, 8, 8, 4, 1, 1}, {32, 16, 8, 2, 1, 0, 1},  {16, 64, 8, 1, 4, 1, 2},
          {128, 32, 8, 4, 4, 0, 1}, {16, 16, 32, 1, 1, 1, 1}, {32, 32, 16, 4, 4, 0, 1},
          {64, 64, 8, 4, 4, 1, 2},  {128, 128, 8, 8, 8, 1, 2}};
      int ran = 0;
      std::string refused;
      for (const auto& r : rows) {
        tune::config c = sp.defaults();
        for (int p = 0; p < 5; ++p)
          c[std::size_t(p)] = r[p];
        c[tune::mm::rows_adjacent] = r[5];
        c[tune::mm::stages] = r[6];
        if (const std::string why = sp.why_illegal(c); !why.empty()) {
          refused += sp.format(c) + ": " + why + "\n";
          continue;
        }
        if (test::stand_in(*dev) && ran >= 4) break;
        ++ran;
        check(tune_test::forced(sites[0], c, run), want,
              "tile " + sp.format(c) + " on " + dev->str());
      }
      INFO(refused);
      CHECK(ran >= (test::stand_in(*dev) ? 4 : 9));
    }
}

TEST_CASE("device matmul: shapes the tile kernel declines run as a reduction",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : devices()) {
    // Matrix-vector: fewer columns than the family's min_mn.
    const auto a = operand<float>({40, 30}, *dev), v = operand<float>({30}, *dev);
    auto mv = [&] { return kiln::tensor<float>(kiln::matmul(a, v)); };
    // (The matmul family's site is seen, as a tuner sees it: its min_mn decides.)
    const auto mvf = families_of(mv);
    CHECK(std::find(mvf.begin(), mvf.end(), "reduction") != mvf.end());
    check(mv(), reference(read(a), read(v)), "matrix-vector on " + dev->str());
    if (test::stand_in(*dev)) continue;
  }
}

// Split-K: a long K over few output tiles is cut into parts, each part's product stored in a
// slot of partial sums (one launch of the tile kernel for the equal parts, one for a shorter
// last part), then summed by the fused reduction; a K past one kernel's loop budget too.
TEST_CASE("device matmul: a long K over few output tiles is split into parts, then summed",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : devices()) {
    const bool stand_in = test::stand_in(*dev);
    // Shapes of one output tile (split on any device that runs 2 or more workgroups at once),
    // and K past 32,768 (always split: a batch here). On the CPU stand-ins, where every new
    // kernel is a host compile, the shape with a short last part only (their generated code
    // for the parts' extra batch dim and the short part).
    std::vector<std::pair<kiln::shape, kiln::shape>> cases = {{{40, 5000}, {5000, 24}}};
    if (!stand_in) {
      cases.push_back({{2, 9, 40000}, {40000, 11}});
      cases.push_back({{64, 8192}, {8192, 48}});
      // K past one kernel's loop budget (16,384 steps of the default tile's 8)
      cases.push_back({{8, 16384 * 16 + 100}, {16384 * 16 + 100, 9}});
    }
    for (const auto& [sa, sb] : cases) {
      const auto x = operand<float>(sa, *dev), y = operand<float>(sb, *dev);
      auto run = [&] { return kiln::tensor<float>(kiln::matmul(x, y)); };
      const auto fams = families_of(run);
      const std::string what = sa.str() + " @ " + sb.str() + " on " + dev->str();
      INFO(what);
      // The whole product's kernel, asked for its split (a tuner sees it so), then the parts'
      // launches: one for the equal parts, one for a shorter last part.
      const std::int64_t k = sb[0], batch = sa.size() == 3 ? sa[0] : 1;
      const std::int64_t chunk =
          kiln::detail::split_k_chunk(0, batch, sa[sa.size() - 2], sb[1], k,
                                      kiln::executor_of(*x.storage(), "test").concurrent_groups());
      // (A device that runs one workgroup at a time splits only a K past 32,768.)
      CHECK(std::count(fams.begin(), fams.end(), "matmul") ==
            (chunk > 0 ? 1 + (k / chunk > 0) + (k % chunk > 0) : 1));
      CHECK((std::find(fams.begin(), fams.end(), "reduction") != fams.end()) == (chunk > 0));
      check(run(), reference(read(x), read(y)), what);
    }
    // The matmul family's `split` for the whole product's kernel (asked before anything
    // launches, so a tuner sees it first): forced to 1 the product runs whole, to 8 in
    // that many parts (another kernel launches: the parts'), each against the reference.
    {
      const auto x = operand<float>({40, 5000}, *dev), y = operand<float>({5000, 24}, *dev);
      auto run = [&] { return kiln::tensor<float>(kiln::matmul(x, y)); };
      const auto sites = tune_test::launches_of(run);
      REQUIRE(sites[0].sp->family() == "matmul");
      const product want = reference(read(x), read(y));
      for (const int parts : {1, 8}) {
        tune::config c = sites[0].sp->defaults();
        c[tune::mm::split] = parts;
        tune::launch_hook h;
        h.force = &c;
        h.family = "matmul";
        h.kernel = sites[0].kernel;
        std::optional<kiln::tensor<float>> got;
        {
          kiln::detail::hook_scope scope(h);
          got.emplace(run());
        }
        const bool split = std::any_of(h.seen.begin(), h.seen.end(), [&](const auto& l) {
          return l.sp->family() == "matmul" && l.kernel != sites[0].kernel;
        });
        CHECK(split == (parts > 1));
        check(*got, want, "split = " + std::to_string(parts) + " on " + dev->str());
      }
    }
    // Integers (i64 partials, wrapped once at the end) and f16 (f32 partials), K past 32,768:
    // split on every device (vulkan:0 only: the stand-ins compile each kernel).
    const std::int64_t kl = 40000;
    if (!stand_in) {
      const auto xi = operand<std::int32_t>({17, kl}, *dev),
                 yi = operand<std::int32_t>({kl, 13}, *dev);
      auto ri = [&] { return kiln::tensor<std::int32_t>(kiln::matmul(xi, yi)); };
      const auto fi = families_of(ri);
      CHECK(std::find(fi.begin(), fi.end(), "reduction") != fi.end());
      check(ri(), reference(read(xi), read(yi)), "i32 split on " + dev->str());
      const auto xh = operand<kiln::half>({17, kl}, *dev), yh = operand<kiln::half>({kl, 13}, *dev);
      auto rh = [&] { return kiln::tensor<kiln::half>(kiln::matmul(xh, yh)); };
      const auto fh = families_of(rh);
      CHECK(std::find(fh.begin(), fh.end(), "reduction") != fh.end());
      check(rh(), reference(read(xh), read(yh)), "f16 split on " + dev->str());
    }
    // A consumer of a split product is a pass after the sum, not the kernel's epilogue.
    const auto x = operand<float>({20, 6000}, *dev), w = operand<float>({6000, 30}, *dev);
    const auto bv = test::uniform<float>(30, -1, 1);
    const auto b = kiln::from(bv, {30}).to(*dev);
    kiln::tensor<float> out = kiln::zeros<float>({20, 30}).to(*dev);
    const auto fams = families_of([&] {
      out = kiln::relu(kiln::matmul(x, w) + b);
      return out;
    });
    const std::int64_t chunk = kiln::detail::split_k_chunk(
        0, 1, 20, 30, 6000, kiln::executor_of(*x.storage(), "test").concurrent_groups());
    // The fused kernel declined (the rule splits), the product asked, its parts' launches.
    CHECK(std::count(fams.begin(), fams.end(), "matmul") ==
          (chunk > 0 ? 1 + (6000 / chunk > 0) + (6000 % chunk > 0) : 1));
    const product p = reference(read(x), read(w));
    const values o = read(out);
    const double e = std::numeric_limits<float>::epsilon();
    for (std::size_t i = 0; i < o.v.size(); ++i) {
      const double want = std::max(0.0, p.v[i] + bv[i % 30]);
      CHECK(std::fabs(o.v[i] - want) <= (p.k + 2) * e * p.scale[i] + 4 * e * (1 + std::fabs(want)));
    }
  }
}

namespace {

// gelu (erf form) in double.
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// A result of f(product) against f applied to the double reference: within the product's
// bound times f's slope (at most `slope`), plus the result's own rounding.
template <class T, class F>
void check_epilogue(const kiln::tensor<T>& got, const product& p, F&& f, double slope,
                    const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == p.shape);
  const values g = read(got);
  const double e = std::numeric_limits<float>::epsilon();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.v.size() && bad < 4; ++i) {
    const double want = f(p.v[i], i);
    const double tol = slope * (p.k + 2) * e * p.scale[i] + 4 * eps<T>() * (1 + std::fabs(want));
    if (!(std::fabs(g.v[i] - want) <= tol)) {
      ++bad;
      UNSCOPED_INFO("element " << i << ": " << g.v[i] << " vs " << want << " (tol " << tol << ")");
    }
  }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("device matmul: the consuming expression is the kernel's epilogue, one launch",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : devices()) {
    const std::int64_t m = 67, k = 29, n = 41;
    const auto x = operand<float>({m, k}, *dev), w = operand<float>({k, n}, *dev);
    const auto bv = test::uniform<float>(n, -1, 1);
    const auto b = kiln::from(bv, {n}).to(*dev);
    const product p = reference(read(x), read(w));
    const std::string on = " on " + dev->str();
    // gelu(x w + b): a bias broadcast along rows, a math function.
    kiln::tensor<float> y = kiln::zeros<float>({m, n}).to(*dev);
    auto layer = [&] {
      y = kiln::gelu(kiln::matmul(x, w) + b);
      return y;
    };
    CHECK(families_of(layer) == std::vector<std::string>{"matmul"});
    check_epilogue(
        y, p, [&](double v, std::size_t i) { return gelu(v + bv[i % n]); }, 1.13,
        "gelu(x w + b)" + on);
    // One statement type whose product sits at another leaf: its own kernel (a review found
    // the first one's reused, reading b's slot as the product).
    const auto b2v = test::uniform<float>(m * n, -1, 1);
    const auto b2 = kiln::from(b2v, {m, n}).to(*dev);
    for (int order = 0; order < 2; ++order) {
      if (order == 0)
        y = kiln::matmul(x, w) + b2;
      else
        y = b2 + kiln::matmul(x, w);
      check_epilogue(
          y, p, [&](double v, std::size_t i) { return v + b2v[i]; }, 1,
          (order ? "b2 + x w" : "x w + b2") + on);
    }
    // Two outputs from one kernel: the pre-activation and the activation.
    const auto z = kiln::matmul(x, w) + b;
    kiln::tensor<float> pre = kiln::zeros<float>({m, n}).to(*dev);
    auto both = [&] {
      kiln::eval(pre = z, y = kiln::relu(z));
      return y;
    };
    CHECK(families_of(both) == std::vector<std::string>{"matmul"});
    check_epilogue(
        pre, p, [&](double v, std::size_t i) { return v + bv[i % n]; }, 1, "pre = x w + b" + on);
    check_epilogue(
        y, p, [&](double v, std::size_t i) { return std::max(v + bv[i % n], 0.0); }, 1,
        "relu(pre)" + on);
    // alpha x w + beta c into c itself (c read at the element written), and a product the
    // expression mentions three times (computed once).
    const auto c0 = test::uniform<float>(m * n, -1, 1);
    kiln::tensor<float> c = kiln::from(c0, {m, n}).to(*dev);
    auto axpby = [&] {
      c = 2.0f * kiln::matmul(x, w) - 0.5f * c;
      return c;
    };
    CHECK(families_of(axpby) == std::vector<std::string>{"matmul"});
    check_epilogue(
        c, p, [&](double v, std::size_t i) { return 2 * v - 0.5 * c0[i]; }, 2,
        "c = 2 x w - 0.5 c" + on);
    auto thrice = [&] {
      const auto q = kiln::matmul(x, w);
      y = q * q - q;
      return y;
    };
    CHECK(families_of(thrice) == std::vector<std::string>{"matmul"});
    check_epilogue(
        y, p, [&](double v, std::size_t) { return v * v - v; },
        2 * (1 + *std::max_element(p.scale.begin(), p.scale.end())), "q * q - q" + on);
    // A cast to f16 at the store, and a batch: [2, m, k] @ [k, n] + b.
    const auto xb = operand<float>({2, m, k}, *dev);
    const product pb = reference(read(xb), read(w));
    kiln::tensor<kiln::half> h = kiln::zeros<kiln::half>({2, m, n}).to(*dev);
    auto half = [&] {
      h = kiln::cast<kiln::half>(kiln::matmul(xb, w) + b);
      return h;
    };
    CHECK(families_of(half) == std::vector<std::string>{"matmul"});
    check_epilogue(
        h, pb, [&](double v, std::size_t i) { return v + bv[i % n]; }, 1,
        "cast<f16>(xb w + b)" + on);
    // Integers: the product wraps to i32 before the epilogue adds 1.
    const auto xi = operand<std::int32_t>({m, k}, *dev), wi = operand<std::int32_t>({k, n}, *dev);
    const product pi = reference(read(xi), read(wi));
    kiln::tensor<std::int32_t> yi = kiln::zeros<std::int32_t>({m, n}).to(*dev);
    yi = kiln::matmul(xi, wi) + 1;
    check_epilogue(
        yi, pi, [&](double v, std::size_t) { return v + 1; }, 0, "i32 x w + 1" + on);
    // Declined (matrix-vector): the product, then the pass; the same values.
    const auto v = operand<float>({k}, *dev);
    const product pv = reference(read(x), read(v));
    kiln::tensor<float> yv = kiln::zeros<float>({m}).to(*dev);
    yv = kiln::gelu(kiln::matmul(x, v));
    check_epilogue(
        yv, pv, [&](double q, std::size_t) { return gelu(q); }, 1.13, "gelu(x v)" + on);
  }
}

// cuBLAS as the provider of plain products on cuda:0, with KILN_TEST_CUBLAS=1: on a GPU the
// real library, in the `cuda-on-cpu: cuBLAS` test the stand-in's (device_on_cpu/cublas.cpp).
// Tagged apart from [cuda]: the other CUDA tests run without a provider (cuda_support.hpp sets
// KILN_CUBLAS_LIBRARY=none for them: they count kiln's launches).
TEST_CASE("device matmul: cuBLAS computes plain products on CUDA, kiln's kernel fused ones",
          "[provider]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  if (kiln::jit::cuda::cublas().path.empty()) {
    REQUIRE(std::getenv("KILN_TEST_CUBLAS") == nullptr);
    WARN("skipped: no cuBLAS on this machine (KILN_CUBLAS_LIBRARY)");
    return;
  }
  auto& provided = kiln::detail::device_products_provided();
  const bool small = test::stand_in(*dev);
  // Each layout the library reads in place: contiguous, transposed (either operand), rows of
  // a wider matrix (a leading dim past the columns), batches and a batch that broadcasts.
  auto wide = [&](const kiln::shape& s) { // s's rows within a matrix 3 columns wider
    kiln::shape w = s;
    w[s.size() - 1] += 3;
    return operand_of<float>(w, *dev, 0).slice(s.size() - 1, 1, s[s.size() - 1] + 1);
  };
  for (int i = 0; i < (small ? 6 : 20); ++i) {
    const std::int64_t m = tile_extent(), n = tile_extent(), k = test::draw(1, 150);
    const int how = i % 6;
    kiln::shape sa{m, k}, sb{k, n};
    if (how == 3) sa.insert(0, 3), sb.insert(0, 3);
    if (how == 4) sb.insert(0, 2);
    const kiln::tensor<float> a = how == 5 ? wide(sa) : operand_of<float>(sa, *dev, how == 1);
    const kiln::tensor<float> b = operand_of<float>(sb, *dev, how == 2);
    const std::string what = sa.str() + " @ " + sb.str() + " layout " + std::to_string(how);
    const std::uint64_t p0 = provided;
    const product want = reference(read(a), read(b));
    kiln::tensor<float> c = kiln::zeros<float>(want.shape).to(*dev);
    tune::launch_hook probe; // (kiln's own launches: none; the product's choice of provider)
    {
      const kiln::detail::hook_scope scope(probe);
      c = kiln::matmul(a, b);
    }
    INFO(what);
    CHECK(provided - p0 == 1);
    REQUIRE(probe.seen.size() == 1);
    CHECK(probe.seen[0].sp->family() == "matmul");
    CHECK(probe.seen[0].sp->defaults()[tune::mm::provider] == 1);
    check(c, want, what);
  }
  // Empty products and K = 0 stay kiln's (nothing to store, or zeros), whatever the library
  // would make of a leading dim of 0.
  for (const auto& [sa, sb] : {std::pair<kiln::shape, kiln::shape>{{0, 5}, {5, 3}},
                               {{4, 5}, {5, 0}},
                               {{4, 0}, {0, 3}},
                               {{2, 0, 5}, {2, 5, 3}},
                               {{0, 4, 5}, {5, 3}}}) {
    const auto a = operand_of<float>(sa, *dev, 0), b = operand_of<float>(sb, *dev, 0);
    const std::uint64_t p0 = provided;
    check(kiln::tensor<float>(kiln::matmul(a, b)), reference(read(a), read(b)),
          "empty: " + sa.str() + " @ " + sb.str());
    CHECK(provided == p0);
  }
  // A batch past the library's 65,535 per call (two calls), and einsum's and tensordot's
  // plain products (the statement's epilogue only stores them: cuBLAS stores into the target).
  {
    const std::uint64_t p0 = provided;
    const auto a = operand_of<float>({70000, 2, 3}, *dev, 0),
               b = operand_of<float>({3, 2}, *dev, 0);
    check(kiln::tensor<float>(kiln::matmul(a, b)), reference(read(a), read(b)), "batch 70000");
    const auto e = operand_of<float>({3, 17, 20}, *dev, 0),
               f = operand_of<float>({3, 20, 9}, *dev, 1);
    check(kiln::tensor<float>(kiln::einsum("bij,bjk->bik", e, f)), reference(read(e), read(f)),
          "einsum bij,bjk->bik");
    const auto w = operand_of<float>({20, 9}, *dev, 0);
    const product ew = reference(read(e), read(w));
    check(kiln::tensor<float>(kiln::tensordot(e, w, 1)), ew, "tensordot(e, w, 1)");
    CHECK(provided - p0 == 3);
  }
  // Each dtype the library takes, with its accumulator (f16/bf16 in f32).
  {
    const auto a16 = operand_of<kiln::half>({37, 70}, *dev, 1);
    const auto b16 = operand_of<kiln::half>({70, 45}, *dev, 0);
    const std::uint64_t p0 = provided;
    check(kiln::tensor<kiln::half>(kiln::matmul(a16, b16)), reference(read(a16), read(b16)), "f16");
    const auto abf = kiln::cast<kiln::bfloat16>(a16).eval(),
               bbf = kiln::cast<kiln::bfloat16>(b16).eval();
    check(kiln::tensor<kiln::bfloat16>(kiln::matmul(abf, bbf)), reference(read(abf), read(bbf)),
          "bf16");
    const auto a64 = operand_of<double>({3, 20, 33}, *dev, 0),
               b64 = operand_of<double>({33, 17}, *dev, 1);
    check(kiln::tensor<double>(kiln::matmul(a64, b64)), reference(read(a64), read(b64)), "f64");
    CHECK(provided - p0 == 3);
  }
  const auto x = operand_of<float>({40, 30}, *dev, 0), w = operand_of<float>({30, 50}, *dev, 0);
  const auto bias = operand_of<float>({50}, *dev, 0);
  const product xw = reference(read(x), read(w));
  product relu_xw = plus_row(xw, read(bias));
  for (double& e : relu_xw.v)
    e = std::max(0.0, e);
  kiln::tensor<float> y = kiln::zeros<float>({40, 50}).to(*dev);
  // Not plain: an operand expression, an integer product, a strided operand: kiln's kernel.
  {
    const std::uint64_t p0 = provided;
    auto fam = families_of([&] { y = kiln::matmul(x * 2.0f, w); });
    CHECK(fam == std::vector<std::string>{"matmul"});
    const auto xi = operand_of<std::int32_t>({9, 8}, *dev, 0),
               wi = operand_of<std::int32_t>({8, 7}, *dev, 0);
    check(kiln::tensor<std::int32_t>(kiln::matmul(xi, wi)), reference(read(xi), read(wi)), "i32");
    const auto xs = operand_of<float>({20, 30}, *dev, 2);
    check(kiln::tensor<float>(kiln::matmul(xs, w)), reference(read(xs), read(w)), "strided");
    CHECK(provided - p0 == 0);
  }
  // A fused epilogue stays in kiln's kernel (one launch); `always` sends the product to the
  // library, then the epilogue as a pass; `never` keeps plain products in kiln's kernel.
  {
    const std::uint64_t p0 = provided;
    auto fam = families_of([&] { y = kiln::relu(kiln::matmul(x, w) + bias); });
    CHECK(fam == std::vector<std::string>{"matmul"});
    CHECK(provided - p0 == 0);
    check(y, relu_xw, "fused, automatic");
    const kiln::blas_use was = kiln::set_blas_use(kiln::blas_use::always);
    y = kiln::relu(kiln::matmul(x, w) + bias);
    CHECK(provided - p0 == 1);
    check(y, relu_xw, "fused, always");
    kiln::set_blas_use(kiln::blas_use::never);
    fam = families_of([&] { y = kiln::matmul(x, w); });
    CHECK(fam == std::vector<std::string>{"matmul"});
    CHECK(provided - p0 == 1);
    check(y, xw, "plain, never");
    kiln::set_blas_use(was);
  }
  // Past provider_fused_least multiply-adds, automatic sends a fused product to the library
  // too, then its epilogue as one pass.
  {
    const std::int64_t s = 256;
    static_assert(256 * 256 * 256 >= kiln::detail::provider_fused_least);
    const auto x2 = operand_of<float>({s, s}, *dev, 0), w2 = operand_of<float>({s, s}, *dev, 1);
    const auto b2 = operand_of<float>({s}, *dev, 0);
    product want = plus_row(reference(read(x2), read(w2)), read(b2));
    for (double& e : want.v)
      e = std::max(0.0, e);
    kiln::tensor<float> y2 = kiln::zeros<float>({s, s}).to(*dev);
    const std::uint64_t p0 = provided;
    auto fused = [&] { y2 = kiln::relu(kiln::matmul(x2, w2) + b2); };
    // The fused kernel's choice (the library), the plain product's (the library), the pass.
    const auto sites = tune_test::launches_of(fused);
    std::vector<std::string> fam;
    for (const auto& site : sites)
      fam.push_back(site.sp->family());
    CHECK(fam == std::vector<std::string>{"matmul", "matmul", "elementwise"});
    CHECK(provided - p0 == 1);
    check(y2, want, "fused past the bound, automatic");
    // The matmul family's `provider` chooses per kernel: forced to 0 on the fused kernel,
    // kiln's kernel computes the product and its epilogue (one launch, no library call);
    // its one configuration for the library (the default tile) is what the rule picks.
    const tune::space& sp = *sites[0].sp;
    std::size_t by_library = 0;
    for (const auto& cfg : sp.legal())
      by_library += cfg[tune::mm::provider] == 1;
    CHECK(by_library == 1);
    CHECK(sp.defaults()[tune::mm::provider] == 1);
    tune::config kiln_kernel = sp.defaults();
    kiln_kernel[tune::mm::provider] = 0;
    const std::uint64_t p1 = provided;
    y2 = kiln::zeros<float>({s, s}).to(*dev);
    tune_test::forced(sites[0], kiln_kernel, [&] { return (fused(), 0); });
    CHECK(provided == p1);
    check(y2, want, "fused past the bound, provider forced to kiln's kernel");
    // kiln::tune measures both: the library's product with its pass, and kiln's kernel.
    const std::string db = std::filesystem::temp_directory_path().string() + "/kiln-cublas-tune-" +
                           std::to_string(::getpid()) + ".kdb";
    std::filesystem::remove(db);
    kiln::tune_options o;
    o.db = db;
    o.budget_seconds = 30;
    o.max_configs = 3;
    const kiln::tune_report r = kiln::tune([&] { return (fused(), y2); }, o);
    CHECK(r.family == "matmul");
    CHECK(r.result.rejected == 0);
    std::set<std::int64_t> measured;
    for (const auto& rec : tune::database(db).records())
      if (rec.kind == 'm' && rec.status == "ok")
        if (const auto c = sp.parse(rec.config)) measured.insert((*c)[tune::mm::provider]);
    CHECK(measured == std::set<std::int64_t>{0, 1});
    std::filesystem::remove(db);
  }
  // Below the bound, forced to 1: the library's product, then the epilogue as a pass.
  {
    const auto sites = tune_test::launches_of([&] { y = kiln::relu(kiln::matmul(x, w) + bias); });
    REQUIRE(sites.size() == 1);
    CHECK(sites[0].sp->defaults()[tune::mm::provider] == 0);
    tune::config library = sites[0].sp->defaults();
    library[tune::mm::provider] = 1;
    const std::uint64_t p0 = provided;
    y = kiln::zeros<float>({40, 50}).to(*dev);
    tune_test::forced(sites[0], library, [&] {
      y = kiln::relu(kiln::matmul(x, w) + bias);
      return 0;
    });
    CHECK(provided - p0 == 1);
    check(y, relu_xw, "fused, provider forced to the library");
  }
}
