// The BLAS provider of host products (contractions/blas.hpp) and kiln's small-product kernel
// (gemm_small.hpp, operands read in place): products computed by the provider and by kiln's
// own kernel agree with a double reference over random shapes,
// layouts, dtypes and fusions (a test runs both, per draw); the default rule; the provider
// setting and a library that does not load; the host_matmul tuning family choosing between
// them, in process and from the database in a fresh one. Where no CBLAS loads on the machine
// (the test packages install OpenBLAS), the provider's half says so and checks the rest.
#include "child_process.hpp"
#include "matmul_support.hpp"
#include "tune_support.hpp"

#include "kiln/jit/tune.hpp"

#include <filesystem>
#include <unistd.h>

namespace tune = kiln::jit::tune;
using matmul_test::operand;

namespace {

struct use_scope {
  explicit use_scope(kiln::blas_use u) : prev(kiln::set_blas_use(u)) {}
  ~use_scope() { kiln::set_blas_use(prev); }
  kiln::blas_use prev;
};

std::uint64_t provided() { return kiln::detail::host_gemm_counts().provided.load(); }
std::uint64_t fused() { return kiln::detail::host_gemm_counts().fused.load(); }

bool have_provider() {
  static const bool b = [] {
    const bool loaded = !kiln::blas_library().empty();
    if (!loaded) WARN("no CBLAS loads on this machine: the provider's half is not run");
    return loaded;
  }();
  return b;
}

// y = p * 0.5 + c[j] against the reference product p, within half p's bound plus the
// epilogue's own roundings.
template <class T>
void check_epilogue(const kiln::tensor<T>& got, const matmul_test::product& p,
                    const std::vector<double>& c, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == p.shape);
  const auto g = matmul_test::read(got).v;
  constexpr double u = matmul_test::eps<T>();
  const std::size_t n = c.size();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size() && bad < 4; ++i) {
    const double want = 0.5 * p.v[i] + c[i % n];
    const double tol =
        (p.k + 2) * u * 0.5 * p.scale[i] + 2 * u * (std::fabs(want) + std::fabs(c[i % n]));
    if (!(std::fabs(g[i] - want) <= tol)) {
      ++bad;
      UNSCOPED_INFO("element " << i << ": " << g[i] << " vs " << want << " (tol " << tol << ")");
    }
  }
  CHECK(bad == 0);
}

template <class T>
std::string strides(const kiln::tensor<T>& t) {
  std::string s;
  for (auto x : t.layout().strides)
    s += (s.empty() ? "" : ",") + std::to_string(x);
  return "(" + s + ")";
}

template <class T>
void one_draw(int draw) {
  const std::int64_t m = matmul_test::extent(), n = matmul_test::extent(),
                     k = matmul_test::extent();
  kiln::shape ba, bb;
  if (test::draw(0, 2) == 0) { // batches that broadcast
    const std::int64_t b = test::draw(1, 3);
    ba = test::draw(0, 1) ? kiln::shape{b} : kiln::shape{1};
    bb = test::draw(0, 1) ? kiln::shape{b} : kiln::shape{};
  }
  kiln::shape sa = ba, sb = bb;
  // Now and then a vector operand (numpy's 1-D forms: a row on the left, a column on the right).
  const int vec = ba.size() || bb.size() ? 2 : test::draw(0, 5);
  if (vec != 0) sa.push_back(m);
  sa.push_back(k), sb.push_back(k);
  if (vec != 1) sb.push_back(n);
  const kiln::device host{};
  const kiln::tensor<T> a = operand<T>(sa, host), b = operand<T>(sb, host);
  // 0 plain, 1 epilogue (with a column operand: plain), 2 prologue
  const int kind = vec == 1 ? test::draw(0, 1) * 2 : test::draw(0, 2);
  matmul_test::values av = matmul_test::read(a);
  if (kind == 2)
    for (double& x : av.v)
      x = double(T(2) * T(x) - T(1));
  const matmul_test::product p = matmul_test::reference(av, matmul_test::read(b));
  std::vector<double> cv;
  const kiln::tensor<T> c =
      kiln::from(test::uniform<T>(std::size_t(std::max<std::int64_t>(n, 1)), -1, 1),
                 {std::max<std::int64_t>(n, 1)});
  for (T x : c.to_vector())
    cv.push_back(double(x));
  const std::string what = std::string(kiln::name(kiln::dtype_of<T>())) + " draw " +
                           std::to_string(draw) + ": " + sa.str() + " @ " + sb.str() + ", " +
                           (kind == 0   ? "plain"
                            : kind == 1 ? "p * 0.5 + c"
                                        : "(2a - 1) @ b") +
                           ", strides " + strides(a) + " / " + strides(b);
  for (const kiln::blas_use u : {kiln::blas_use::never, kiln::blas_use::always}) {
    if (u == kiln::blas_use::always && !have_provider()) continue;
    const use_scope s(u);
    const std::uint64_t before = provided();
    const std::string how = what + (u == kiln::blas_use::always ? ", provider" : ", kiln's kernel");
    if (kind == 1 && n > 0) {
      const kiln::tensor<T> y = kiln::matmul(a, b) * T(0.5) + c;
      check_epilogue(y, p, cv, how);
    } else {
      const kiln::tensor<T> y =
          kind == 2 ? kiln::tensor<T>(kiln::matmul(a * T(2) - T(1), b)) : kiln::matmul(a, b);
      matmul_test::check(y, p, how);
    }
    INFO(how);
    CHECK(provided() - before == (u == kiln::blas_use::always ? 1u : 0u));
  }
}

// The child: exits 10 when no provider is loaded and a product is right, 11 when a product
// is a kiln::error naming KILN_BLAS_LIBRARY, 12 when the fused product below ran on the
// provider (the database's choice), 13 when it ran in kiln's kernel; 30 otherwise.
const std::int64_t tuned_n = 96;

kiln::tensor<float> fused_product(const kiln::tensor<float>& x, const kiln::tensor<float>& w,
                                  const kiln::tensor<float>& bias) {
  return kiln::tensor<float>(kiln::gelu(kiln::matmul(x, w) + bias));
}

int child(const std::vector<std::string>& env, const std::string& tag = "[.blas_child]") {
  return test::run_child(env, tag);
}

} // namespace

TEST_CASE("blas child", "[.blas_child]") {
  const auto x = kiln::random::normal<float>({tuned_n, tuned_n}, 1);
  const auto w = kiln::random::normal<float>({tuned_n, tuned_n}, 2);
  const auto bias = kiln::random::normal<float>({tuned_n}, 3);
  try {
    const std::uint64_t before = provided();
    const kiln::tensor<float> y = fused_product(x, w, bias);
    const auto xs = x.to_vector(), ws = w.to_vector(), bs = bias.to_vector(), ys = y.to_vector();
    for (std::int64_t i = 0; i < tuned_n; i += 7)
      for (std::int64_t j = 0; j < tuned_n; j += 5) {
        double s = bs[j];
        for (std::int64_t q = 0; q < tuned_n; ++q)
          s += double(xs[i * tuned_n + q]) * ws[q * tuned_n + j];
        const double g = 0.5 * s * std::erfc(-s / std::sqrt(2.0));
        if (std::fabs(ys[i * tuned_n + j] - g) > 1e-4 * (1 + std::fabs(g))) std::_Exit(30);
      }
    if (kiln::blas_library().empty()) std::_Exit(10);
    std::_Exit(provided() - before == 1 ? 12 : 13);
  } catch (const kiln::error& e) {
    const std::string what = e.what();
    if (what.find("KILN_BLAS_LIBRARY=/no/such/libblas.so") != std::string::npos) std::_Exit(11);
    if (what.find("KILN_BLAS_LIBRARY=libm.so.6") != std::string::npos &&
        what.find("not a CBLAS") != std::string::npos)
      std::_Exit(14);
    std::_Exit(30);
  }
}

// The child with the provider off: an f32 and an i64 product, while launches are recorded
// (the tuning lookup runs); exits 15 when both are right and nothing opened a library.
TEST_CASE("blas child, provider off", "[.blas_child_never]") {
  kiln::set_blas_use(kiln::blas_use::never);
  try {
    const auto x = kiln::random::normal<float>({20, 30}, 1),
               w = kiln::random::normal<float>({30, 10}, 2);
    const auto xi = kiln::from(test::integers<std::int64_t>(600, -9, 9), {20, 30});
    const auto wi = kiln::from(test::integers<std::int64_t>(300, -9, 9), {30, 10});
    const kiln::tensor<float> y = kiln::matmul(x, w);
    const kiln::tensor<std::int64_t> yi = kiln::matmul(xi, wi);
    const auto xs = x.to_vector(), ws = w.to_vector(), ys = y.to_vector();
    const auto xis = xi.to_vector(), wis = wi.to_vector(), yis = yi.to_vector();
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < 10; ++j) {
        double s = 0;
        std::int64_t si = 0;
        for (int q = 0; q < 30; ++q) {
          s += double(xs[i * 30 + q]) * ws[q * 10 + j];
          si += xis[i * 30 + q] * wis[q * 10 + j];
        }
        if (std::fabs(ys[i * 10 + j] - s) > 1e-4 * (1 + std::fabs(s)) || yis[i * 10 + j] != si)
          std::_Exit(30);
      }
    std::_Exit(provided() == 0 ? 15 : 30);
  } catch (const kiln::error&) {
    std::_Exit(31);
  }
}

TEST_CASE("blas provider: products by the provider and by kiln's kernel match double "
          "references over random shapes, layouts, batches, fusions and dtypes",
          "[matmul][blas]") {
  for (int d = 0; d < 40; ++d)
    one_draw<float>(d);
  for (int d = 0; d < 20; ++d)
    one_draw<double>(d);
}

TEST_CASE("blas provider: the default rule takes small plain products and leaves larger, "
          "fused and batched ones to kiln's kernel",
          "[matmul][blas]") {
  if (!have_provider()) return;
  const use_scope s(kiln::blas_use::automatic);
  const auto x = kiln::random::normal<float>({60, 50}, 4);
  const auto w = kiln::random::normal<float>({50, 70}, 5);
  const auto bias = kiln::random::normal<float>({70}, 6);
  std::uint64_t p0 = provided(), f0 = fused();
  kiln::tensor<float> y = kiln::matmul(x, w); // 210,000 multiply-adds
  CHECK(provided() - p0 == 1);
  // Transposed operands are read in place by the provider.
  p0 = provided();
  const kiln::tensor<float> yt = kiln::matmul(w.transpose(), x.transpose());
  CHECK(provided() - p0 == 1);
  p0 = provided();
  y = kiln::gelu(kiln::matmul(x, w) + bias); // an epilogue: fused in kiln's kernel
  CHECK(provided() - p0 == 0);
  CHECK(fused() - f0 == 1);
  p0 = provided();
  y = kiln::matmul(kiln::relu(x), w); // a prologue
  CHECK(provided() - p0 == 0);
  const auto xl = kiln::random::normal<float>({160, 130}, 7),
             wl = kiln::random::normal<float>({130, 150}, 8);
  p0 = provided();
  kiln::tensor<float> z = kiln::matmul(xl, wl); // 3.1M multiply-adds: kiln's kernel
  CHECK(provided() - p0 == 0);
  const auto xb = kiln::random::normal<float>({8, 16, 16}, 9); // a batch
  p0 = provided();
  kiln::tensor<float> yb = kiln::matmul(xb, xb);
  CHECK(provided() - p0 == 0);
  // Integer products are kiln's.
  const auto xi = kiln::from(test::integers<std::int32_t>(60 * 50, -9, 9), {60, 50});
  const auto wi = kiln::from(test::integers<std::int32_t>(50 * 70, -9, 9), {50, 70});
  p0 = provided();
  kiln::tensor<std::int32_t> yi = kiln::matmul(xi, wi);
  CHECK(provided() - p0 == 0);
}

TEST_CASE("blas provider: KILN_BLAS_LIBRARY=none runs without one, a library that does not "
          "load or is not a CBLAS is a kiln::error naming it",
          "[matmul][blas]") {
  CHECK(child({"KILN_BLAS_LIBRARY=none"}) == 10);
  CHECK(child({"KILN_BLAS_LIBRARY=/no/such/libblas.so"}) == 11);
  CHECK(child({"KILN_BLAS_LIBRARY=libm.so.6"}) == 14);
  // With the provider off nothing opens the library, a bad one included, even while the
  // tuning lookup runs for every product (launches recorded).
  const std::string record = std::filesystem::temp_directory_path().string() +
                             "/kiln-blas-record-" + std::to_string(::getpid());
  CHECK(child({"KILN_BLAS_LIBRARY=/no/such/libblas.so", "KILN_TUNE_RECORD=" + record},
              "[.blas_child_never]") == 15);
  std::filesystem::remove(record);
  try {
    (void)kiln::detail::open_blas("/no/such/libblas.so");
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(std::string(e.what()).find("does not load") != std::string::npos);
    CHECK(std::string(e.what()).find("/no/such/libblas.so") != std::string::npos);
  }
  try {
    (void)kiln::detail::open_blas("libm.so.6");
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(std::string(e.what()).find("not a CBLAS") != std::string::npos);
    CHECK(std::string(e.what()).find("cblas_sgemm") != std::string::npos);
  }
}

TEST_CASE("host_matmul tuning: kiln::tune measures the provider against kiln's fused kernel, "
          "and a fresh process takes the database's choice",
          "[matmul][blas][tune]") {
  const auto x = kiln::random::normal<float>({tuned_n, tuned_n}, 1);
  const auto w = kiln::random::normal<float>({tuned_n, tuned_n}, 2);
  const auto bias = kiln::random::normal<float>({tuned_n}, 3);
  const std::string dir = std::filesystem::temp_directory_path().string() + "/kiln-blas-tune-" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string db = dir + "/tuning.kdb";
  std::filesystem::remove(db);
  kiln::tune_options o;
  o.db = db;
  o.budget_seconds = 3;
  const kiln::tune_report r = kiln::tune([&] { return fused_product(x, w, bias); }, o);
  CHECK(r.family == "host_matmul");
  CHECK(r.result.measured >= 2);
  INFO("default " << r.fallback << ", chosen " << r.chosen);
  // The provider was among the measured configurations where one loads.
  if (have_provider()) {
    tune::database d(db);
    bool saw_provider = false;
    for (const auto& rec : d.records())
      saw_provider = saw_provider || (rec.kind != 'c' && rec.family == "host_matmul" &&
                                      rec.config.rfind("provider=1", 0) == 0 && rec.status == "ok");
    CHECK(saw_provider);
  }
  // A choice of the provider for this fused kernel, written as kiln-tune would; a fresh
  // process takes it (12), and runs kiln's kernel where the choice is kiln's (13).
  tune::launch_hook probe;
  {
    kiln::detail::hook_scope s(probe);
    (void)fused_product(x, w, bias);
  }
  const tune::launch_site* site = nullptr;
  for (const auto& ls : probe.seen)
    if (ls.sp->family() == "host_matmul") site = &ls;
  REQUIRE(site);
  for (const int choice : {1, 0}) {
    std::filesystem::remove(db);
    {
      tune::database d(db);
      tune::config c = site->sp->defaults();
      c[tune::hm::provider] = choice;
      tune::record rec;
      rec.kind = 'c';
      rec.device = site->device;
      rec.family = "host_matmul";
      rec.kernel = site->kernel;
      rec.size = tune::format_bucket(site->bucket);
      rec.config = site->sp->format(c);
      rec.median_ns = 1000;
      rec.runs = 5;
      d.append(rec);
    }
    if (have_provider())
      CHECK(child({"KILN_TUNE_DB=" + db, "-KILN_TUNE", "-KILN_BLAS_LIBRARY"}) ==
            (choice ? 12 : 13));
  }
  std::filesystem::remove_all(dir);
}

// host_matmul's `small`: 1 and 2 force the small kernel and the packed one on a product the
// small kernel can read (values against double loops either way, the kernel that ran
// counted); a transposed B, which it cannot read, stays packed when 1 is forced.
TEST_CASE("host_matmul tuning: small forces the small or the packed kernel", "[matmul][tune]") {
  const kiln::blas_use was = kiln::set_blas_use(kiln::blas_use::never);
  auto& counts = kiln::detail::host_gemm_counts();
  for (int draw = 0; draw < 3; ++draw) {
    const std::int64_t m = test::draw(70, 200), n = test::draw(70, 200), k = test::draw(70, 200);
    for (const bool trans_b : {false, true}) {
      const auto a = matmul_test::operand_of<float>({m, k}, kiln::device{}, 0);
      const auto b = matmul_test::operand_of<float>({k, n}, kiln::device{}, trans_b ? 1 : 0);
      const auto want = matmul_test::reference(matmul_test::read(a), matmul_test::read(b));
      const auto sites =
          tune_test::launches_of([&] { return kiln::tensor<float>(kiln::matmul(a, b)); });
      REQUIRE(sites.size() == 1);
      for (const int choice : {1, 2}) {
        tune::config c = sites[0].sp->defaults();
        c[tune::hm::small] = choice;
        const std::uint64_t s0 = counts.small;
        const auto got =
            tune_test::forced(sites[0], c, [&] { return kiln::tensor<float>(kiln::matmul(a, b)); });
        const std::string what = std::to_string(m) + " x " + std::to_string(n) + " x " +
                                 std::to_string(k) + (trans_b ? ", B transposed" : "") +
                                 ", small = " + std::to_string(choice);
        CHECK(counts.small - s0 == (choice == 1 && !trans_b ? 1u : 0u));
        matmul_test::check(got, want, what);
      }
    }
  }
  kiln::set_blas_use(was);
}

TEST_CASE("blas provider: the gradients of a product with a transposed operand (an adjoint "
          "stored transposed) match the analytic ones, with and without the provider",
          "[matmul][blas][grad]") {
  // loss = sum((x^T w) * r): dx = w r^T (x's own [k, m] shape), dw = x r.
  for (int draw = 0; draw < 6; ++draw) {
    const std::int64_t m = test::draw(1, 70), n = test::draw(1, 70), k = test::draw(1, 70);
    const auto xv = test::uniform<double>(std::size_t(k * m), -1, 1);
    const auto wv = test::uniform<double>(std::size_t(k * n), -1, 1);
    const auto rv = test::uniform<double>(std::size_t(m * n), -1, 1);
    const auto x = kiln::from(xv, {k, m}), w = kiln::from(wv, {k, n}), r = kiln::from(rv, {m, n});
    std::vector<double> dx(std::size_t(k * m), 0), dw(std::size_t(k * n), 0);
    for (std::int64_t q = 0; q < k; ++q)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          dx[std::size_t(q * m + i)] += wv[std::size_t(q * n + j)] * rv[std::size_t(i * n + j)];
          dw[std::size_t(q * n + j)] += xv[std::size_t(q * m + i)] * rv[std::size_t(i * n + j)];
        }
    for (const kiln::blas_use u : {kiln::blas_use::never, kiln::blas_use::always}) {
      if (u == kiln::blas_use::always && !have_provider()) continue;
      const use_scope s(u);
      const auto loss = kiln::sum(kiln::matmul(x.transpose(), w) * r);
      const auto grads = kiln::grad(loss, x, w);
      const auto gx = kiln::tensor<double>(std::get<0>(grads)).to_vector();
      const auto gw = kiln::tensor<double>(std::get<1>(grads)).to_vector();
      INFO("m " << m << ", n " << n << ", k " << k
                << (u == kiln::blas_use::always ? ", provider" : ", kiln's kernel"));
      REQUIRE(gx.size() == dx.size());
      REQUIRE(gw.size() == dw.size());
      for (std::size_t i = 0; i < dx.size(); ++i)
        CHECK(std::fabs(gx[i] - dx[i]) <= 1e-12 * (n + 2) * (1 + std::fabs(dx[i])));
      for (std::size_t i = 0; i < dw.size(); ++i)
        CHECK(std::fabs(gw[i] - dw[i]) <= 1e-12 * (m + 2) * (1 + std::fabs(dw[i])));
    }
  }
}
