// The fusion JIT's contract on a Vulkan device (lavapipe here), against the host evaluator:
// kernels are specialized on types and access pattern only (new sizes and scalar values
// compile nothing), several outputs come from one kernel, too many leaves split into
// stages, threads share one compile, reductions and chains of kernels need no host round
// trip, devices do not mix. Runs with the validation layer on and every SPIR-V module
// through spirv-val; a validation message fails the test case it appears in.
#include "vulkan_support.hpp"

#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/backend/providers.hpp"

#include <filesystem>
#include <fstream>

#include <thread>

namespace {

// Kernels made (compiled from source, or loaded from the disk cache) so far.
std::uint64_t kernels_made() {
  return kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
}

template <class T>
std::vector<T> host_values(const kiln::tensor<T>& t) {
  return t.to(kiln::device{}).to_vector();
}

// A balanced sum tree over v[Lo, Hi), built at compile time.
template <std::size_t Lo, std::size_t Hi, class V>
auto sum_of(const V& v) {
  if constexpr (Hi - Lo == 1)
    return v[Lo];
  else
    return sum_of<Lo, (Lo + Hi) / 2>(v) + sum_of<(Lo + Hi) / 2, Hi>(v);
}

} // namespace

TEST_CASE("vulkan: equal scalars share one parameter, and a kernel made for equal scalars "
          "never runs on unequal ones",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto xh = kiln::random::uniform<double>({777}, test::draw(1, 1000), -2, 2);
  const auto x = xh.to(*dev);
  auto run = [&](double s1, double s2, double s3) {
    // Two copies of one subtree, as a gradient tree repeats them.
    const kiln::tensor<double> y = kiln::exp(x * s1) + kiln::exp(x * s2) * s3;
    const auto got = host_values(y), xv = xh.to_vector();
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const double want = std::exp(xv[i] * s1) + std::exp(xv[i] * s2) * s3;
      REQUIRE(std::abs(got[i] - want) <= 1e-15 * (std::exp(xv[i] * s1) + std::abs(want)));
    }
  };
  const auto made0 = kernels_made();
  run(0.5, 0.5, 0.25);
  const auto made1 = kernels_made();
  CHECK(made1 == made0 + 1);
  run(0.5, 0.75, 0.25); // s1 != s2: another pattern, another kernel
  const auto made2 = kernels_made();
  CHECK(made2 == made1 + 1);
  run(-1.5, -1.5, 3.0); // equal again: the first kernel, new values
  run(0.75, 0.5, 2.0);  // unequal again: the second kernel
  run(2.0, 2.0, 2.0);   // all three equal: a third kernel
  CHECK(kernels_made() == made2 + 1);
  run(1.0, 3.0, 2.0);
  run(0.0, -0.0, 1.0); // +0 and -0 differ in bits: two parameters, the second kernel
  CHECK(kernels_made() == made2 + 1);
}

TEST_CASE("vulkan: new sizes and new scalar values reuse the compiled kernel", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto run = [&](std::int64_t n, float s) {
    const auto xh = kiln::random::uniform<float>({n}, test::draw(1, 1000), -2, 2);
    const auto x = xh.to(*dev);
    const kiln::tensor<float> y = kiln::exp(x * s) - x / (s + 1.0f);
    const kiln::tensor<float> want = kiln::exp(xh * s) - xh / (s + 1.0f);
    // A difference of two rounded terms: its error is relative to the terms.
    const auto got = host_values(y), ref = want.to_vector(), xv = xh.to_vector();
    for (std::size_t i = 0; i < ref.size(); ++i)
      REQUIRE(std::abs(got[i] - ref[i]) <=
              1e-6f * (std::exp(xv[i] * s) + std::abs(xv[i] / (s + 1.0f))));
  };
  run(1000, 0.5f); // compiles (or loads) the kernel
  const auto before = kernels_made();
  const auto lowered = kiln::jit::lowering_count().load();
  for (int k = 0; k < 6; ++k)
    run(test::draw(1, 200000), static_cast<float>(test::uniform<float>(1, -3, 3)[0]));
  CHECK(kernels_made() == before);
  CHECK(kiln::jit::lowering_count().load() == lowered); // the memo hit: no IR, no source
  // A new expression type is a new kernel.
  const auto x = kiln::random::uniform<float>({64}, 3, -1, 1, *dev);
  const kiln::tensor<float> z = kiln::cos(x) * 3.0f;
  (void)z.at({0});
  CHECK(kernels_made() == before + 1);
}

TEST_CASE("vulkan: several outputs in one kernel, shapes broadcast, views as leaves and targets",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto ah = kiln::random::uniform<double>({5, 7}, test::draw(1, 99), -1, 1);
  const auto bh = kiln::random::uniform<double>({7}, test::draw(1, 99), -1, 1);
  const auto a = ah.to(*dev), b = bh.to(*dev);
  kiln::tensor<double> r1 = kiln::empty<double>({5, 7}, *dev);
  kiln::tensor<float> r2 = kiln::empty<float>({5, 7}, *dev);
  const auto before = kernels_made();
  kiln::eval(r1 = a * b + 1.0, r2 = kiln::cast<float>(kiln::sin(a) - b));
  CHECK(kernels_made() <= before + 1); // one kernel for both
  const kiln::tensor<double> w1 = ah * bh + 1.0;
  const kiln::tensor<float> w2 = kiln::cast<float>(kiln::sin(ah) - bh);
  // a * b + 1 may be one FMA on one side: the two differ by the product's rounding, which is
  // relative to the terms, not to the sum (many ulps of it where a * b is near -1).
  const auto g1 = host_values(r1), e1 = w1.to_vector(), av = ah.to_vector(), bv = bh.to_vector();
  for (std::size_t i = 0; i < e1.size(); ++i)
    CHECK(std::abs(g1[i] - e1[i]) <= 0x1p-52 * (std::abs(av[i] * bv[i % 7]) + 1.0));
  const auto g2 = host_values(r2), e2 = w2.to_vector();
  for (std::size_t i = 0; i < e2.size(); ++i)
    CHECK(test::ulp_distance(g2[i], e2[i]) <= 1);
  // A transposed, offset view as a leaf and a strided view as the target.
  kiln::tensor<double> t = kiln::zeros<double>({7, 10}, *dev);
  t.slice(1, 1, 10, 2) = a.transpose().narrow(1, 0, 5) * 2.0;
  kiln::tensor<double> th = kiln::zeros<double>({7, 10});
  th.slice(1, 1, 10, 2) = ah.transpose().narrow(1, 0, 5) * 2.0;
  CHECK(host_values(t) == th.to_vector());
  // In place, and through another layout (a temporary on the device).
  kiln::tensor<double> sq = kiln::random::uniform<double>({6, 6}, 5, -1, 1, *dev);
  kiln::tensor<double> sqh = sq.to(kiln::device{});
  sq = sq * 2.0 + 1.0; // exact: a power of two, then a sum
  sqh = sqh * 2.0 + 1.0;
  CHECK(host_values(sq) == sqh.to_vector());
  sq = sq.transpose() - sq;
  sqh = sqh.transpose() - sqh;
  CHECK(host_values(sq) == sqh.to_vector());
}

TEST_CASE("vulkan: an expression of 200 distinct leaves is split into stages", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  std::vector<kiln::tensor<std::int32_t>> hs, ds;
  for (int i = 0; i < 200; ++i) {
    std::vector<std::int32_t> v(33);
    for (auto& e : v)
      e = static_cast<std::int32_t>(test::draw(-1000, 1000));
    hs.push_back(kiln::from(v, kiln::shape{33}));
    ds.push_back(hs.back().to(*dev));
  }
  const kiln::tensor<std::int32_t> got = sum_of<0, 200>(ds);
  const kiln::tensor<std::int32_t> want = sum_of<0, 200>(hs);
  CHECK(host_values(got) == want.to_vector());
}

// More buffers than one kernel binds, over two outputs that each read the other's target:
// each output gets kernels of its own, and neither may see the other's new values.
TEST_CASE("vulkan: outputs split over kernels read the old values of each other's targets",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto draw = [] {
    std::vector<std::int32_t> v(33);
    for (auto& e : v)
      e = static_cast<std::int32_t>(test::draw(-1000, 1000));
    return kiln::from(v, kiln::shape{33});
  };
  std::vector<kiln::tensor<std::int32_t>> hs, ds;
  for (int i = 0; i < 40; ++i) {
    hs.push_back(draw());
    ds.push_back(hs.back().to(*dev));
  }
  const auto v0 = draw(), p0 = draw();
  kiln::tensor<std::int32_t> v = v0.to(*dev), p = p0.to(*dev);
  kiln::eval(v = sum_of<0, 40>(ds) + p, p = p * 2 + v);
  const kiln::tensor<std::int32_t> want_v = sum_of<0, 40>(hs) + p0, want_p = p0 * 2 + v0;
  CHECK(host_values(v) == want_v.to_vector());
  CHECK(host_values(p) == want_p.to_vector());
}

TEST_CASE("vulkan: 8 threads needing one new kernel share one compile", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto x = kiln::random::uniform<float>({4096}, 9, 0.5, 2, *dev);
  const auto before = kernels_made();
  std::vector<std::thread> ts;
  std::vector<std::vector<float>> out(8);
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      const kiln::tensor<float> y = kiln::log2(x) * kiln::rsqrt(x) + float(t);
      out[t] = y.to_vector();
    });
  for (auto& t : ts)
    t.join();
  CHECK(kernels_made() == before + 1);
  const auto xh = x.to(kiln::device{});
  for (int t = 0; t < 8; ++t) {
    const auto want = kiln::tensor<float>(kiln::log2(xh) * kiln::rsqrt(xh) + float(t)).to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) // two functions, a product and a sum
      REQUIRE(std::abs(out[t][i] - want[i]) <= 1e-6f * (std::abs(want[i]) + float(t) + 1));
  }
}

TEST_CASE("vulkan: reductions, and a chain of kernels with no host round trip", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const kiln::shape s = test::random_shape(2, 3, 40);
  const auto xh = kiln::random::uniform<float>(s, test::draw(1, 999), -3, 3);
  const auto x = xh.to(*dev);
  auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(std::abs(a[i] - b[i]) <= 1e-5f * (1 + std::abs(b[i])));
  };
  const std::int64_t ax = test::draw(0, s.size() - 1);
  close(kiln::tensor<float>(kiln::sum(kiln::exp(x) * 0.5f, ax)).to_vector(),
        kiln::tensor<float>(kiln::sum(kiln::exp(xh) * 0.5f, ax)).to_vector());
  close(kiln::tensor<float>(kiln::mean(x)).to_vector(),
        kiln::tensor<float>(kiln::mean(xh)).to_vector());
  CHECK(kiln::tensor<float>(kiln::max(x, ax, true)).to_vector() ==
        kiln::tensor<float>(kiln::max(xh, ax, true)).to_vector());
  CHECK(kiln::tensor<std::int64_t>(kiln::argmin(x, ax)).to_vector() ==
        kiln::tensor<std::int64_t>(kiln::argmin(xh, ax)).to_vector());
  CHECK(kiln::tensor<bool>(kiln::any(x > 2.5f, ax)).to_vector() ==
        kiln::tensor<bool>(kiln::any(xh > 2.5f, ax)).to_vector());
  // x - max(x, axis, keepdims): the reduction's kernel, then the elementwise one, queued.
  const kiln::tensor<float> y = x - kiln::max(x, ax, true);
  CHECK(y.device() == *dev);
  CHECK(host_values(y) == kiln::tensor<float>(xh - kiln::max(xh, ax, true)).to_vector());
}

TEST_CASE("vulkan: moving data, creation on the device, mixed devices, memory stats", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto h = kiln::random::normal<double>({3, 5}, 11);
  const auto d = h.to(*dev);
  CHECK(d.device() == *dev);
  CHECK(d.to(kiln::device{}).to_vector() == h.to_vector());
  CHECK(kiln::tensor<double>(d.transpose()).to_vector() ==
        kiln::tensor<double>(h.transpose()).to_vector());
  CHECK(kiln::arange<std::int64_t>(0, 10, 3, *dev).to_vector() ==
        std::vector<std::int64_t>{0, 3, 6, 9});
  CHECK(kiln::full<std::uint8_t>({4}, 7, *dev).to_vector() == std::vector<std::uint8_t>(4, 7));
  CHECK(kiln::eye<float>(3, 3, *dev).at({1, 1}) == 1.0f);
  try {
    const kiln::tensor<double> bad = d + h;
    FAIL("no error for mixed devices");
  } catch (const kiln::error& e) {
    CHECK(e.reason() == "operands live on different devices");
    CHECK(std::string(e.what()).find("vulkan:0") != std::string::npos);
    CHECK(std::string(e.what()).find("host") != std::string::npos);
  }
  const auto m0 = kiln::memory_stats(*dev);
  {
    const auto big = kiln::empty<float>({1 << 20}, *dev);
    const auto m1 = kiln::memory_stats(*dev);
    CHECK(m1.in_use >= m0.in_use + (4u << 20));
    CHECK(m1.peak >= m1.in_use);
    CHECK(m1.reserved >= m1.in_use);
  }
  CHECK(kiln::memory_stats(*dev).in_use == m0.in_use);
  kiln::empty_cache(*dev);
  CHECK(kiln::memory_stats(*dev).reserved <= kiln::memory_stats(*dev).in_use + (64u << 20));
  // Many evaluations queued, then one read.
  kiln::tensor<float> acc = kiln::zeros<float>({1000}, *dev);
  for (int i = 0; i < 300; ++i)
    acc = acc + 1.0f;
  CHECK(acc.to_vector() == std::vector<float>(1000, 300.0f));
}

TEST_CASE("vulkan: KILN_DEVICE names the default device, and devices() lists vulkan:0 as usable",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  bool listed = false;
  for (const auto& d : kiln::devices())
    if (d.device == *dev) {
      listed = true;
      CHECK(d.available);
      CHECK_FALSE(d.description.empty()); // the driver's device name
    }
  CHECK(listed);
  ::setenv("KILN_DEVICE", "vulkan:0", 1);
  const kiln::device chosen = kiln::default_device();
  ::unsetenv("KILN_DEVICE");
  CHECK(chosen == *dev);
  // Creation on the default device, and an expression there.
  const auto x = kiln::random::uniform<float>({257}, 5, -1, 1, chosen);
  CHECK(x.device() == *dev);
  const kiln::tensor<float> y = x * 2.0f + 1.0f;
  const auto xs = host_values(x), ys = host_values(y);
  for (std::size_t i = 0; i < xs.size(); ++i)
    CHECK(ys[i] == xs[i] * 2.0f + 1.0f);
}

TEST_CASE("vulkan: providers registered for an op run first, the first that accepts wins",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  // Two providers for prod: "first" takes f32 only, "second" anything; both compute the
  // product over the reduced dims through host copies (a stand-in for a hand-written
  // kernel: what is tested is who runs).
  static std::vector<std::string> calls;
  auto host_prod = [](const kiln::jit::reduce_call& c, const char* who) {
    calls.push_back(who);
    auto* be = kiln::backend_for(c.device).get();
    const auto n = c.input.layout.size();
    auto run = [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> in(static_cast<std::size_t>(n));
      be->read(c.input.handle, c.input.layout.offset * sizeof(T), in.data(), in.size() * sizeof(T));
      const kiln::shape& s = c.input.layout.shape;
      std::vector<T> out(static_cast<std::size_t>(c.output.layout.size()), T(1));
      for (std::int64_t i = 0; i < n; ++i) { // row-major input index -> output index
        std::int64_t rem = i, o = 0, scale = 1;
        for (int d = s.size() - 1; d >= 0; --d) {
          const std::int64_t k = rem % s[d];
          rem /= s[d];
          if (!c.mask[d]) {
            o += k * scale;
            scale *= s[d];
          }
        }
        out[static_cast<std::size_t>(o)] *= in[static_cast<std::size_t>(i)];
      }
      be->write(c.output.handle, 0, out.data(), out.size() * sizeof(T));
    };
    if (c.input.type == kiln::dtype::f32)
      run(0.0f);
    else
      run(0.0);
    return true;
  };
  kiln::jit::register_provider(
      {"first", kiln::device_kind::vulkan, "prod", [&](const kiln::jit::reduce_call& c) {
         return c.input.type == kiln::dtype::f32 && host_prod(c, "first");
       }});
  kiln::jit::register_provider(
      {"second", kiln::device_kind::vulkan, "prod",
       [&](const kiln::jit::reduce_call& c) { return host_prod(c, "second"); }});
  kiln::jit::register_provider(
      {"third", kiln::device_kind::vulkan, "prod",
       [&](const kiln::jit::reduce_call& c) { return host_prod(c, "third"); }});
  const auto xh = kiln::random::uniform<float>({4, 6}, 21, 0.5, 1.5);
  const auto x = xh.to(*dev);
  const auto got = kiln::tensor<float>(kiln::prod(x * 2.0f, 1)).to_vector();
  const auto want = kiln::tensor<float>(kiln::prod(xh * 2.0f, 1)).to_vector();
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(std::abs(got[i] - want[i]) <= 1e-5f * std::abs(want[i]));
  const auto dh = kiln::random::uniform<double>({3, 5}, 22, 0.5, 1.5);
  const auto gd = kiln::tensor<double>(kiln::prod(dh.to(*dev), 0)).to_vector();
  const auto wd = kiln::tensor<double>(kiln::prod(dh, 0)).to_vector();
  for (std::size_t i = 0; i < wd.size(); ++i)
    CHECK(std::abs(gd[i] - wd[i]) <= 1e-12 * std::abs(wd[i]));
  CHECK(calls == std::vector<std::string>{"first", "second"});
}

TEST_CASE("vulkan: parameters too big for push constants go in a buffer, and KILN_DUMP_KERNELS",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  namespace fs = std::filesystem;
  const fs::path dump = fs::temp_directory_path() / ("kiln-dump-" + std::to_string(::getpid()));
  ::setenv("KILN_DUMP_KERNELS", dump.c_str(), 1);
  // Nine strided rank-3 operands: 1 + 3 + 10 x 4 index fields of 4 bytes > 128 bytes.
  std::vector<kiln::tensor<float>> hs, ds;
  for (int i = 0; i < 9; ++i) {
    hs.push_back(kiln::random::uniform<float>({4, 5, 6}, 30 + i, -1, 1).permute({2, 0, 1}));
    ds.push_back(hs.back().to(*dev).permute({0, 1, 2}));
  }
  // ds are contiguous copies in the permuted shape; view them strided again.
  std::vector<kiln::tensor<float>> dv;
  for (int i = 0; i < 9; ++i)
    dv.push_back(ds[i].transpose());
  auto e = [](const auto& v) {
    return (v[0] - v[1]) * v[2] + (v[3] - v[4]) * v[5] + (v[6] - v[7]) * v[8] * 0.5f;
  };
  std::vector<kiln::tensor<float>> hv;
  for (int i = 0; i < 9; ++i)
    hv.push_back(hs[i].contiguous().transpose());
  const kiln::tensor<float> got = e(dv);
  const kiln::tensor<float> want = e(hv);
  const auto g = got.to_vector(), w = want.to_vector();
  for (std::size_t i = 0; i < w.size(); ++i)
    CHECK(std::abs(g[i] - w[i]) <= 1e-6f);
  ::unsetenv("KILN_DUMP_KERNELS");
  bool found = false;
  for (const auto& f : fs::directory_iterator(dump)) {
    std::ifstream in(f.path());
    const std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    found = found || src.find("readonly buffer kiln_params") != std::string::npos;
  }
  CHECK(found); // the parameter block went to a storage buffer
  fs::remove_all(dump);
}

TEST_CASE("vulkan: dtypes need their device features, else a clear error", "[vulkan]") {
  using kiln::dtype;
  auto used = [](std::initializer_list<dtype> ds) {
    std::array<bool, 9> u{};
    for (dtype d : ds)
      u[static_cast<int>(d)] = true;
    return u;
  };
  kiln::jit::vk::device_features all;
  all.f64 = all.i64 = all.i8 = all.storage_buffer_8bit = all.storage_buffer_16bit = true;
  const auto every = used({dtype::b8, dtype::u8, dtype::i32, dtype::u32, dtype::i64, dtype::f16,
                           dtype::bf16, dtype::f32, dtype::f64});
  CHECK(kiln::jit::vk::missing_feature(all, every).empty());
  kiln::jit::vk::device_features f = all;
  f.f64 = false;
  CHECK(kiln::jit::vk::missing_feature(f, used({dtype::f64})).find("shaderFloat64") !=
        std::string::npos);
  CHECK(kiln::jit::vk::missing_feature(f, used({dtype::f32, dtype::i64})).empty());
  f = all;
  f.i64 = false;
  CHECK(kiln::jit::vk::missing_feature(f, used({dtype::i64})).find("shaderInt64") !=
        std::string::npos);
  f = all;
  f.storage_buffer_16bit = false;
  CHECK(kiln::jit::vk::missing_feature(f, used({dtype::bf16})).find("16Bit") != std::string::npos);
  f = all;
  f.i8 = false;
  CHECK(kiln::jit::vk::missing_feature(f, used({dtype::b8})).find("shaderInt8") !=
        std::string::npos);
  // On this device (lavapipe: every feature), each dtype allocates and computes.
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto h =
      kiln::tensor<kiln::half>(kiln::full<kiln::half>({8}, kiln::half(1.5f), *dev) * 2.0f);
  CHECK(static_cast<float>(h.at({3})) == 3.0f);
  // The driver's pipeline cache exists and has at least its header (lavapipe: only that,
  // so kiln saves nothing for it).
  const auto blob = kiln::jit::vk::context::get(dev->index())->pipeline_cache_data();
  CHECK(blob.size() >= 16 + VK_UUID_SIZE);
}

// Run by the next test in a child process with KILN_LOG=jit (hidden from normal runs).
TEST_CASE("vulkan log child", "[.log_child]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto x = kiln::full<float>({16}, 0.25f, *dev);
  const kiln::tensor<float> y = kiln::atanh(x) + kiln::asinh(x);
  CHECK(y.at({0}) > 0.0f);
}

TEST_CASE("vulkan: KILN_LOG=jit logs each compile and disk-cache hit with its milliseconds",
          "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-log-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string self = fs::canonical("/proc/self/exe").string();
  auto run = [&](int k) {
    const std::string out = (dir / ("log" + std::to_string(k))).string();
    const std::string cmd = "KILN_LOG=jit KILN_CACHE_DIR='" + dir.string() + "/cache' '" + self +
                            "' '[.log_child]' > /dev/null 2> '" + out + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string first = run(1), second = run(2);
  INFO(first << "\n---\n" << second);
  CHECK(first.find("kiln[jit] compiled ") != std::string::npos);
  CHECK(first.find(" ms") != std::string::npos);
  CHECK(second.find("kiln[jit] disk cache hit ") != std::string::npos);
  CHECK(second.find("kiln[jit] compiled ") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("vulkan: all nine reductions over all, one and several axes, with keepdims", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const kiln::shape s = test::random_shape(3, 3, 70);
  const auto xh = kiln::random::uniform<double>(s, test::draw(1, 999), -3, 3);
  const auto x = xh.to(*dev);
  const bool keep = test::draw(0, 1) == 1;
  const std::int64_t a = test::draw(0, 2), b = (a + 1 + test::draw(0, 1)) % 3;
  const std::vector<kiln::axes> over{kiln::axes{}, kiln::axes{a}, kiln::axes{a, b}};
  auto near = [](const std::vector<double>& g, const std::vector<double>& w) {
    REQUIRE(g.size() == w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      CHECK(std::abs(g[i] - w[i]) <= 1e-12 * (1 + std::abs(w[i])));
  };
  for (const auto& ax : over) {
    INFO("shape " << s.str() << ", keepdims " << keep);
    near(kiln::sum(x * 2.0, ax, keep).eval().to_vector(),
         kiln::sum(xh * 2.0, ax, keep).eval().to_vector());
    near(kiln::prod(x * 0.5 + 1.0, ax, keep).eval().to_vector(),
         kiln::prod(xh * 0.5 + 1.0, ax, keep).eval().to_vector());
    near(kiln::mean(x, ax, keep).eval().to_vector(), kiln::mean(xh, ax, keep).eval().to_vector());
    CHECK(kiln::max(x, ax, keep).eval().to_vector() == kiln::max(xh, ax, keep).eval().to_vector());
    CHECK(kiln::min(x, ax, keep).eval().to_vector() == kiln::min(xh, ax, keep).eval().to_vector());
    CHECK(kiln::argmax(x, ax, keep).eval().to_vector() ==
          kiln::argmax(xh, ax, keep).eval().to_vector());
    CHECK(kiln::argmin(x, ax, keep).eval().to_vector() ==
          kiln::argmin(xh, ax, keep).eval().to_vector());
    CHECK(kiln::all(x > -2.9, ax, keep).eval().to_vector() ==
          kiln::all(xh > -2.9, ax, keep).eval().to_vector());
    CHECK(kiln::any(x > 2.9, ax, keep).eval().to_vector() ==
          kiln::any(xh > 2.9, ax, keep).eval().to_vector());
  }
  // Integer sums give i64, as on the host; NaN propagates through max.
  const auto ih = kiln::cast<std::int32_t>(xh * 1000.0).eval();
  CHECK(kiln::sum(ih.to(*dev), 0).eval().to_vector() == kiln::sum(ih, 0).eval().to_vector());
  kiln::tensor<double> withnan = kiln::where(xh > 2.99, std::nan(""), xh).eval();
  const auto mg = kiln::max(withnan.to(*dev), 2).eval().to_vector();
  const auto mw = kiln::max(withnan, 2).eval().to_vector();
  for (std::size_t i = 0; i < mw.size(); ++i)
    CHECK(test::same_value(mg[i], mw[i]));
}

TEST_CASE("vulkan: freed device blocks are reused", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  { const auto warm = kiln::empty<float>({3000}, *dev); }
  const auto before = kiln::memory_stats(*dev);
  for (int i = 0; i < 200; ++i) {
    const auto t = kiln::empty<float>({3000}, *dev); // freed at the end of each iteration
    (void)t;
  }
  const auto after = kiln::memory_stats(*dev);
  CHECK(after.reserved == before.reserved); // no new device memory
  CHECK(after.in_use == before.in_use);
}
