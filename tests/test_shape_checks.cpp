// Issue 11, points 3, 4 and 7: shape arithmetic that cannot wrap (every creation function,
// view and allocation, host and vulkan:0), empty tensor handles refused where they are
// used, strict device strings, KILN_DEVICE as the creation functions' default device, and
// numpy's slice rules at the extremes (the other KILN_* settings: test_settings.cpp).
#include "vulkan_support.hpp"
// after vulkan_support.hpp, which configures Catch first
#include "error_support.hpp"

#include "kiln/jit/vulkan/backend.hpp"

#include <cstdlib>
#include <limits>
#include <typeinfo>

namespace {

constexpr std::int64_t big = std::int64_t{1} << 40;
constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t i64_min = std::numeric_limits<std::int64_t>::min();

} // namespace

// --- point 3: checked shape arithmetic

TEST_CASE("shape checks: a shape past 2^63 elements or bytes is an error, not size 0",
          "[shape_checks]") {
  expect_error(
      [] {
        kiln::empty<float>({big, big});
      },
      "empty", {"shape too large", "[1099511627776, 1099511627776]"});
  // 2^62 floats: the count fits, the bytes (2^64) do not.
  expect_error([] { kiln::empty<float>({std::int64_t{1} << 62}); }, "empty",
               {"shape too large", "bytes"});
  expect_error([] { kiln::zeros<double>({3, big, big}); }, "zeros", {"shape too large"});
  expect_error([] { kiln::ones<float>({big, big}); }, "ones", {"shape too large"});
  expect_error([] { kiln::full<float>({big, big}, 2.0f); }, "full", {"shape too large"});
  expect_error(
      [] {
        kiln::random::uniform<float>({big, big}, 1);
      },
      "random::uniform", {"shape too large"});
  expect_error(
      [] {
        kiln::random::normal<float>({big, big}, 1);
      },
      "random::normal", {"shape too large"});
  expect_error([] { kiln::from<float>({1, 2}, {big, big}); }, "from", {"shape too large"});
  // A zero extent makes any shape empty, however large the other extents.
  CHECK(kiln::empty<float>({big, 0, big}).size() == 0);
}

TEST_CASE("shape checks: negative extents are rejected by every creation function",
          "[shape_checks]") {
  const std::int64_t neg = -test::draw(1, 5);
  const kiln::shape s{neg, 5};
  expect_error([&] { kiln::empty<float>(s); }, "empty", {"negative extent", s.str()});
  expect_error([&] { kiln::zeros<float>(s); }, "zeros", {"negative extent"});
  expect_error([&] { kiln::ones<float>(s); }, "ones", {"negative extent"});
  expect_error([&] { kiln::full<int>(s, 1); }, "full", {"negative extent"});
  expect_error([&] { kiln::from<float>({}, s); }, "from", {"negative extent"});
  expect_error([&] { kiln::random::normal<double>(s, 3); }, "random::normal", {"negative extent"});
  expect_error([&] { kiln::eye<float>(neg); }, "eye", {"negative size"});
  expect_error([&] { kiln::eye<float>(3, neg - 1); }, "eye", {"negative size"});
  expect_error([&] { kiln::linspace<float>(0, 1, neg); }, "linspace", {"negative count"});
  expect_error([&] { kiln::tensor<float> t(s); }, "alloc", {"negative extent"});
}

TEST_CASE("shape checks: eye(2^32) is an error, not a segfault", "[shape_checks]") {
  expect_error([] { kiln::eye<float>(std::int64_t{1} << 32); }, "eye",
               {"shape too large", "[4294967296, 4294967296]"});
  // A small one is still right.
  const auto n = test::draw(1, 6), m = test::draw(1, 6);
  const auto v = kiln::eye<float>(n, m).to_vector();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j)
      CHECK(v[static_cast<std::size_t>(i * m + j)] == (i == j ? 1.0f : 0.0f));
}

TEST_CASE("shape checks: arange with a count past int64, or a zero or non-finite step",
          "[shape_checks]") {
  expect_error([] { kiln::arange<float>(0, 1e19); }, "arange", {"too many elements"});
  expect_error([] { kiln::arange<float>(-1e308, 1e308); }, "arange", {"too many elements"});
  expect_error([] { kiln::arange<float>(0, 1, 1e-300); }, "arange", {"too many elements"});
  expect_error([] { kiln::arange<double>(0, 2e18); }, "arange", {"shape too large"});
  expect_error([] { kiln::arange<float>(0, 5, 0); }, "arange", {"non-zero"});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  expect_error([&] { kiln::arange<float>(0, 5, nan); }, "arange", {"finite"});
  expect_error([&] { kiln::arange<float>(0, inf); }, "arange", {"finite"});
  expect_error([&] { kiln::arange<float>(nan, 5); }, "arange", {"finite"});
  CHECK(kiln::arange<float>(5, 0).size() == 0); // an empty range, not a negative extent
  CHECK(kiln::arange<float>(0, 5, -1).size() == 0);
}

TEST_CASE("shape checks: a huge but valid shape the host cannot hold is a kiln::error",
          "[shape_checks]") {
  // 2^50 floats (4 PiB) is past any address space: the allocation fails.
  const kiln::shape s{std::int64_t{1} << 50};
  expect_error([&] { kiln::empty<float>(s); }, "empty", {"out of host memory", s.str()});
  expect_error([&] { kiln::zeros<float>(s); }, "zeros", {"out of host memory"});
  expect_error([&] { kiln::linspace<float>(0, 1, std::int64_t{1} << 50); }, "linspace",
               {"out of host memory"});
}

TEST_CASE("shape checks: reshape to a shape whose count wraps is an error", "[shape_checks]") {
  const auto x = kiln::from<float>({1, 2, 3, 4});
  // (2^62 + 1) * 4 wraps to 4 in int64: it used to pass the size check and segfault.
  expect_error(
      [&] {
        x.reshape({(std::int64_t{1} << 62) + 1, 4});
      },
      "reshape", {"shape too large"});
  expect_error([&] { x.reshape({-1, big, big}); }, "reshape", {"shape too large"});
  expect_error([&] { x.reshape({-2, 2}); }, "reshape", {"negative extent"});
  CHECK(x.reshape({2, -1}).shape() == kiln::shape{2, 2});
  // An empty tensor reshapes to any shape with a zero extent, however large the others.
  CHECK(kiln::zeros<float>({0}).reshape({big, big, 0}).size() == 0);
}

TEST_CASE("shape checks: narrow with a length near INT64_MAX is out of bounds", "[shape_checks]") {
  const auto x = kiln::arange<float>(4);
  expect_error([&] { x.narrow(0, 1, i64_max); }, "narrow", {"out of bounds"});
  expect_error([&] { x.narrow(0, i64_max, 1); }, "narrow", {"out of bounds"});
  expect_error([&] { x.narrow(0, i64_min, 1); }, "narrow", {"out of bounds"});
  expect_error([&] { x.narrow(0, 5, 0); }, "narrow", {"out of bounds"});
  CHECK(x.narrow(0, 4, 0).size() == 0);
  CHECK(x.narrow(0, -3, 3).to_vector() == std::vector<float>{1, 2, 3});
}

TEST_CASE("shape checks: broadcast views and expressions past 2^63 elements", "[shape_checks]") {
  const auto x = kiln::ones<float>({1});
  expect_error([&] { x.broadcast_to({big, big}); }, "broadcast_to", {"shape too large"});
  const auto a = x.broadcast_to({big, 1}), b = x.broadcast_to({1, big});
  // Each view is valid; their broadcast is not: refused where the node is built.
  expect_error([&] { kiln::tensor<float> r = a + b; }, "add", {"shape too large"});
  expect_error([&] { (void)kiln::sum(a + b).item(); }, "add", {"shape too large"});
  CHECK(kiln::sum(x.broadcast_to({1000, 1000})).item() == 1e6f);
}

TEST_CASE("shape checks: slice with extreme steps keeps its strides in range", "[shape_checks]") {
  const auto x = kiln::arange<double>(6).reshape({2, 3});
  // One element: the stride (3 * INT64_MAX) is never used and must not overflow.
  const auto one = x.slice(0, 0, 2, i64_max);
  CHECK(one.shape() == kiln::shape{1, 3});
  CHECK(one.to_vector() == std::vector<double>{0, 1, 2});
  const auto back = x.slice(0, 1, i64_min, i64_min);
  CHECK(back.to_vector() == std::vector<double>{3, 4, 5});
}

// --- point 4: empty handles

TEST_CASE("empty handles: as an operand, target, reduction input, view or source",
          "[shape_checks]") {
  kiln::tensor<float> t;
  const auto x = kiln::from<float>({1, 2, 3});
  expect_error([&] { kiln::tensor<float> r = t + 1.0f; }, "add", {"tensor is empty"});
  expect_error([&] { kiln::tensor<float> r = x * t; }, "mul", {"tensor is empty"});
  expect_error([&] { kiln::tensor<float> r = kiln::exp(t); }, "exp", {"tensor is empty"});
  expect_error([&] { (void)kiln::sum(t).item(); }, "sum", {"tensor is empty"});
  expect_error([&] { (void)kiln::argmax(t, 0); }, "argmax", {"tensor is empty"});
  expect_error([&] { (void)kiln::sum(t + 1.0f); }, "add", {"tensor is empty"});
  kiln::tensor<float> y = x.clone();
  expect_error([&] { y += t; }, "add", {"tensor is empty"});
  expect_error([&] { y = t; }, "assign", {"tensor is empty"});
  expect_error([&] { t += 1.0f; }, "add", {"tensor is empty"});
  expect_error([&] { t = 1.0f; }, "assign", {"tensor is empty"});
  expect_error([&] { std::move(t) = x + 1.0f; }, "assign", {"tensor is empty"});
  expect_error([&] { std::move(t) = x; }, "assign", {"tensor is empty"});
  kiln::tensor<float> u;
  expect_error([&] { kiln::eval(u = x + 1.0f, y = t * 2.0f); }, "mul", {"tensor is empty"});
  expect_error([&] { kiln::eval(std::move(t) = x + 1.0f); }, "assign", {"tensor is empty"});
  expect_error([&] { t.reshape({1}); }, "reshape", {"tensor is empty"});
  expect_error([&] { t.transpose(); }, "transpose", {"tensor is empty"});
  expect_error([&] { t.narrow(0, 0, 1); }, "narrow", {"tensor is empty"});
  expect_error([&] { t.broadcast_to({3}); }, "broadcast_to", {"tensor is empty"});
  expect_error([&] { t(kiln::newaxis); }, "index", {"tensor is empty"});
  expect_error([&] { t.to(kiln::device{}); }, "to", {"tensor is empty"});
  // y is unchanged by the failed statements; an empty handle still takes a value.
  CHECK(y.to_vector() == x.to_vector());
  u = x * 2.0f;
  CHECK(u.to_vector() == std::vector<float>{2, 4, 6});
  std::ostringstream os;
  os << t; // printing an empty handle says so (tested in test_print)
  CHECK(os.str() == "tensor(empty)");
}

// --- point 7: device strings, KILN_DEVICE and KILN_* settings

TEST_CASE("device strings are strict: backend:index, decimal, in int range", "[shape_checks]") {
  for (const char* bad :
       {"vulkan: 0", "vulkan:4294967296", "vulkan:2147483648", "vulkan:+0", "vulkan:-0",
        "vulkan:0 ", "vulkan:", "vulkan", "vulkan:0x1", "cuda:1e3"}) {
    INFO("\"" << bad << "\"");
    expect_error([&] { kiln::device d(bad); }, "device", {"malformed device index", bad});
  }
  for (const char* bad : {" vulkan:0", "Vulkan:0", "vulkan0", ""})
    expect_error([&] { kiln::device d(bad); }, "device", {"unknown device"});
  // "no such device" lists what exists, with availability.
  expect_error([] { kiln::device d("cuda:2147483647"); }, "device",
               {"no such device", "host (available)", "vulkan:", "cuda:"});
  CHECK(kiln::device("host").is_host());
}

TEST_CASE("KILN_DEVICE: a bad value is an error under its name", "[shape_checks]") {
  {
    env_override e("KILN_DEVICE", "vulkan: 0");
    expect_error([] { kiln::default_device(); }, "KILN_DEVICE", {"malformed", "vulkan: 0"});
    expect_error([] { kiln::zeros<float>({2}); }, "KILN_DEVICE", {"malformed"});
  }
  {
    env_override e("KILN_DEVICE", "metal:0"); // never usable off Apple platforms
    expect_error([] { kiln::arange<float>(3); }, "KILN_DEVICE", {"not available"});
    expect_error([] { kiln::from<float>({1}); }, "KILN_DEVICE", {"not available"});
  }
  env_override e("KILN_DEVICE", nullptr);
  CHECK(kiln::zeros<float>({2}).device().is_host());
  env_override h("KILN_DEVICE", "host");
  CHECK(kiln::ones<float>({2}).device().is_host());
}

// numpy's slice.indices (CPython's PySlice_GetIndicesEx), in 128-bit arithmetic so that it
// needs none of the clamping the code under test does; the indices a slice selects.
std::vector<std::int64_t> numpy_slice(std::int64_t n, std::int64_t start_, std::int64_t stop_,
                                      std::int64_t step_) {
  using i128 = __int128;
  const i128 step = step_, lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
  auto fix = [&](i128 v) {
    if (v < 0) {
      v += n;
      if (v < lower) v = lower;
    } else if (v > upper) {
      v = upper;
    }
    return v;
  };
  const i128 start = fix(start_), stop = fix(stop_);
  std::vector<std::int64_t> out;
  for (i128 i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(static_cast<std::int64_t>(i));
  return out;
}

TEST_CASE("slice follows numpy at extreme starts, stops and steps", "[shape_checks]") {
  const auto five = kiln::arange<int>(5);
  CHECK(five.slice(0, 0, 5, i64_max).to_vector() == std::vector<int>{0}); // x[0:5:2**63-1]
  CHECK(five.slice(0, 4, -6, i64_min).to_vector() == std::vector<int>{4});
  CHECK(five.slice(0, -1, i64_min, -2).to_vector() == std::vector<int>{4, 2, 0});
  for (int trial = 0; trial < 2000; ++trial) {
    const std::int64_t n = test::draw(0, 7);
    auto bound = [&] {
      switch (test::draw(0, 4)) {
      case 0:
        return i64_min + test::draw(0, 1);
      case 1:
        return i64_max - test::draw(0, 1);
      default:
        return std::int64_t{test::draw(-10, 10)};
      }
    };
    std::int64_t step = 0;
    while (step == 0)
      step = test::draw(0, 3) == 0
                 ? (test::draw(0, 1) ? i64_max - test::draw(0, 1) : i64_min + test::draw(0, 1))
                 : test::draw(-9, 9);
    const std::int64_t start = bound(), stop = bound();
    INFO("n " << n << " start " << start << " stop " << stop << " step " << step);
    const auto x = kiln::arange<std::int64_t>(static_cast<double>(n));
    const auto ref = numpy_slice(n, start, stop, step);
    const auto got = x.slice(0, start, stop, step);
    REQUIRE(got.size() == static_cast<std::int64_t>(ref.size()));
    REQUIRE(got.to_vector() == ref);
    // Through operator() too: range{start, stop, step}.
    REQUIRE(x(kiln::range{start, stop, step}).to_vector() == ref);
  }
  expect_error([&] { five.slice(0, 0, 5, 0); }, "slice", {"step must not be zero"});
}

// --- on vulkan:0

TEST_CASE("vulkan: allocation past 2^63 bytes or past one buffer is an error naming the shape",
          "[shape_checks][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  expect_error(
      [&] {
        kiln::zeros<float>({big, big}, *dev);
      },
      "zeros", {"shape too large", "[1099511627776, 1099511627776]"});
  // 2^33 floats = 32 GiB: past any maxStorageBufferRange (a 32-bit byte count).
  const kiln::shape s{std::int64_t{1} << 33};
  expect_error([&] { kiln::empty<float>(s, *dev); }, "empty", {"one Vulkan buffer", s.str()});
  expect_error([&] { kiln::ones<float>(s, *dev); }, "ones", {"one Vulkan buffer", s.str()});
  expect_error([&] { kiln::eye<float>(std::int64_t{1} << 32, -1, *dev); }, "eye",
               {"shape too large"});
  expect_error([&] { kiln::arange<float>(0, 1e19, 1, *dev); }, "arange", {"too many elements"});
  const auto x = kiln::ones<float>({4}, *dev);
  expect_error([&] { x.narrow(0, 1, i64_max); }, "narrow", {"out of bounds"});
  expect_error([&] { x.broadcast_to({big, big}); }, "broadcast_to", {"shape too large"});
  CHECK(kiln::sum(x).item() == 4.0f);
}

TEST_CASE("vulkan: an empty handle combined with a device tensor is an error",
          "[shape_checks][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  kiln::tensor<float> t;
  const auto x = kiln::ones<float>({8}, *dev);
  expect_error([&] { kiln::tensor<float> r = x + t; }, "add", {"tensor is empty"});
  expect_error([&] { (void)kiln::sum(t).item(); }, "sum", {"tensor is empty"});
  expect_error(
      [&] {
        kiln::tensor<float> y = x.clone();
        y = t;
      },
      "assign", {"tensor is empty"});
  expect_error([&] { t.to(*dev); }, "to", {"tensor is empty"});
  kiln::tensor<float> y = x * 3.0f;
  CHECK(kiln::sum(y).item() == 24.0f);
}

TEST_CASE("vulkan: data() of a device tensor is an error, not a pointer to read through",
          "[shape_checks][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto h = kiln::random::normal<float>({test::draw(1, 100)}, test::draw(1, 1000));
  const auto x = h.to(*dev);
  expect_error([&] { (void)x.data(); }, "data", {"lives on a device", dev->str(), ".to("});
  const auto back = x.to(kiln::device{});
  REQUIRE(back.data() != nullptr);
  for (std::int64_t i = 0; i < h.size(); ++i)
    CHECK(back.data()[i] == h.data()[i]);
  CHECK(kiln::tensor<float>().data() == nullptr); // an empty handle: no memory, no error
}

TEST_CASE("vulkan: KILN_DEVICE places every creation function's tensor there",
          "[shape_checks][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  env_override e("KILN_DEVICE", dev->str().c_str());
  CHECK(kiln::default_device() == *dev);
  const kiln::shape s{2, 3};
  CHECK(kiln::empty<float>(s).device() == *dev);
  CHECK(kiln::zeros<float>(s).device() == *dev);
  CHECK(kiln::ones<float>(s).device() == *dev);
  CHECK(kiln::full<float>(s, 2.5f).device() == *dev);
  CHECK(kiln::from<float>({1, 2, 3}).device() == *dev);
  CHECK(kiln::from<float>({1, 2, 3, 4, 5, 6}, s).device() == *dev);
  CHECK(kiln::arange<float>(4).device() == *dev);
  CHECK(kiln::linspace<float>(0, 1, 5).device() == *dev);
  CHECK(kiln::eye<float>(3).device() == *dev);
  CHECK(kiln::random::uniform<float>(s, 7).device() == *dev);
  CHECK(kiln::random::normal<float>(s, 7).device() == *dev);
  // The values are the host's: KILN_DEVICE changes where, not what.
  const auto r = kiln::random::uniform<float>(s, 7);
  CHECK(r.to_vector() == kiln::random::uniform<float>(s, 7, 0, 1, kiln::device{}).to_vector());
  CHECK(kiln::eye<float>(3).to_vector() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(kiln::sum(kiln::full<float>(s, 2.5f)).item() == 15.0f);
  // An explicit device still wins.
  CHECK(kiln::zeros<float>(s, kiln::device{}).device().is_host());
}

// --- point 5: shape and axis errors where the expression is written

TEST_CASE("broadcast and axis errors are raised when the node is built", "[shape_checks]") {
  const auto a = kiln::ones<float>({3, 4}), b = kiln::ones<float>({5});
  bool built = false;
  // The error comes from the line that builds the node, before any evaluation.
  expect_error(
      [&] {
        auto e = a + b;
        built = true;
        (void)e;
      },
      "add", {"broadcast", "[3, 4]", "[5]"});
  CHECK_FALSE(built);
  // Deep in a tree: the op whose operands clash is named, not the root.
  expect_error([&] { (void)kiln::exp((a * 2.0f - b) + 1.0f); }, "sub", {"broadcast"});
  expect_error([&] { (void)kiln::where(a > 0.0f, a, b); }, "where", {"broadcast"});
  expect_error([&] { (void)kiln::sum(a, 2); }, "sum", {"axis 2", "rank 2"});
  expect_error([&] { (void)kiln::max(a * 2.0f, {0, -3}); }, "max", {"axis -3"});
  expect_error([&] { (void)kiln::mean(a, {1, -1}); }, "mean", {"axis repeated"});
  expect_error([&] { (void)(kiln::sum(a, 0) + kiln::ones<float>({3})); }, "add", {"[4]", "[3]"});
  // A valid tree knows its shape from the build.
  const auto e = kiln::sum(a * kiln::ones<float>({2, 1, 4}), 1, true) + b(kiln::newaxis, 0);
  CHECK(e.shape() == kiln::shape{2, 1, 4});
  kiln::tensor<float> r = e;
  CHECK(r.to_vector() == std::vector<float>(8, 4.0f));
}
