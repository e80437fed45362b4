// Every bad input gets a kiln::error naming the op, the reason and the details.
#include "support.hpp"

#include <typeinfo>

namespace {
// Runs f, requires a kiln::error from `op` whose message contains each of `parts`, with
// a reason, and whose details() contain each of `details` (the shapes, most often).
template <class F>
void expect_error(F&& f, const std::string& op, std::initializer_list<std::string> parts,
                  std::initializer_list<std::string> details = {}) {
  try {
    f();
  } catch (const kiln::error& e) {
    INFO("message: " << e.what());
    CHECK(e.op() == op);
    CHECK_FALSE(e.reason().empty());
    // what() is "kiln::<op>: <reason>" and " (<details>)" when there are details.
    const std::string what = e.what();
    CHECK(what.rfind("kiln::" + e.op() + ": " + e.reason(), 0) == 0);
    if (!e.details().empty()) CHECK(what.find("(" + e.details() + ")") != std::string::npos);
    for (const auto& p : parts)
      CHECK(what.find(p) != std::string::npos);
    for (const auto& d : details)
      CHECK(e.details().find(d) != std::string::npos);
    return;
  } catch (const std::exception& e) {
    FAIL("a " << typeid(e).name() << " instead of a kiln::error: " << e.what());
  }
  FAIL("no kiln::error was thrown (expected one from " << op << ")");
}

// Two shapes that do not broadcast: some dim differs and neither extent is 1.
std::pair<kiln::shape, kiln::shape> incompatible_pair() {
  kiln::shape a = test::random_shape(1, 4, 5), b;
  const int lead = test::draw(0, a.size() - 1);
  for (int d = lead; d < a.size(); ++d)
    b.push_back(test::draw(0, 1) ? a[d] : 1);
  const int bad = test::draw(0, b.size() - 1);
  const std::int64_t ad = a[lead + bad];
  b[bad] = ad == 1 ? 2 : ad + test::draw(1, 3);
  if (ad == 1) a[lead + bad] = 3; // both above 1 and different
  return {a, b};
}
} // namespace

TEST_CASE("broadcast mismatch names both shapes", "[errors]") {
  const auto a = kiln::ones<float>({3, 4}), b = kiln::ones<float>({5});
  expect_error([&] { kiln::tensor<float> r = a + b; }, "add", {"[3, 4]", "[5]", "broadcast"});
  expect_error([&] { kiln::tensor<float> r = kiln::where(a > 0, a, b); }, "where", {"[5]"});
  auto t = kiln::zeros<float>({2, 2});
  expect_error([&] { t.narrow(0, 0, 1) = kiln::ones<float>({3}) * 1.0f; }, "assign",
               {"[3]", "[1, 2]"});
  expect_error([&] { kiln::ones<float>({3}).broadcast_to({2}); }, "broadcast_to", {"[3]", "[2]"});
}

TEST_CASE("reshape errors: size mismatch and a layout that cannot be viewed", "[errors]") {
  const auto t = kiln::ones<float>({2, 3});
  expect_error([&] { t.reshape({4, 2}); }, "reshape", {"size mismatch", "[2, 3]", "[4, 2]"});
  expect_error([&] { t.reshape({-1, 4}); }, "reshape", {"-1"});
  expect_error([&] { t.reshape({-1, -1}); }, "reshape", {"only one"});
  expect_error([&] { t.transpose().reshape({6}); }, "reshape", {"contiguous()", "[3, 2]"});
}

TEST_CASE("out-of-range narrow, slice, index and at", "[errors]") {
  const auto t = kiln::ones<float>({4, 5});
  expect_error([&] { t.narrow(1, 3, 3); }, "narrow", {"out of bounds", "[4, 5]"});
  expect_error([&] { t.narrow(0, -5, 1); }, "narrow", {"out of bounds"});
  expect_error([&] { t.slice(0, 0, 4, 0); }, "slice", {"step"});
  expect_error([&] { t(4); }, "index", {"index 4", "[4, 5]"});
  expect_error([&] { t(0, -6); }, "index", {"index -6"});
  expect_error([&] { t(0, 0, 0); }, "index", {"too many"});
  expect_error([&] { t.at({4, 0}); }, "at", {"out of range"});
  expect_error([&] { t.at({1}); }, "at", {"wrong number"});
}

TEST_CASE("bad axes", "[errors]") {
  const auto t = kiln::ones<float>({2, 3});
  expect_error([&] { t.squeeze(2); }, "squeeze", {"axis 2", "rank 2"});
  expect_error([&] { t.squeeze(0); }, "squeeze", {"extent 1"});
  expect_error([&] { t.unsqueeze(4); }, "unsqueeze", {"axis 4"});
  expect_error([&] { t.permute({0, 0}); }, "permute", {"repeated"});
  expect_error([&] { t.permute({1}); }, "permute", {"length"});
  expect_error([&] { t.slice(-3, 0, 1); }, "slice", {"axis -3"});
  expect_error([&] { kiln::mean(t, 5).eval(); }, "mean", {"axis 5"});
  expect_error([&] { t.dim(2); }, "dim", {"axis 2"});
}

TEST_CASE("item on a non-scalar, empty tensors", "[errors]") {
  expect_error([] { kiln::ones<float>({2}).item(); }, "item", {"not a scalar", "[2]"});
  expect_error([] { (kiln::ones<float>({2, 2}) * 2.0f).item(); }, "item", {"[2, 2]"});
  expect_error([] { kiln::tensor<float>().item(); }, "item", {"empty"});
  expect_error(
      [] {
        kiln::tensor<float> e;
        e = 1.0f;
      },
      "assign", {"empty"});
  CHECK(kiln::ones<float>({1, 1}).item() == 1.0f);
}

TEST_CASE("unknown and unavailable devices", "[errors]") {
  expect_error([] { kiln::device("foo"); }, "device", {"unknown device", "foo"});
  expect_error([] { kiln::device("vulkan:x"); }, "device", {"malformed"});
  expect_error([] { kiln::device("vulkan:99"); }, "device", {"no such device", "vulkan:99"});
  expect_error([] { kiln::device("cuda:1"); }, "device", {"cuda:1"});
  CHECK(kiln::device("host").is_host());
  bool host_listed = false;
  for (const auto& d : kiln::devices()) {
    if (d.device.is_host())
      host_listed = d.available;
    else
      CHECK_FALSE(d.description.empty()); // an unavailable backend says why
  }
  CHECK(host_listed);
  ::setenv("KILN_DEVICE", "nonsense", 1);
  expect_error([] { kiln::default_device(); }, "KILN_DEVICE", {"nonsense"});
  ::unsetenv("KILN_DEVICE");
  CHECK(kiln::default_device().is_host());
}

TEST_CASE("creation errors", "[errors]") {
  expect_error(
      [] {
        kiln::from<float>({1, 2, 3}, kiln::shape{2, 2});
      },
      "from", {"3 values", "[2, 2]"});
  expect_error([] { kiln::zeros<float>({2, -1}); }, "zeros", {"negative"});
  expect_error([] { kiln::arange<float>(0, 1, 0); }, "arange", {"step"});
  expect_error([] { kiln::linspace<float>(0, 1, -1); }, "linspace", {"negative"});
  expect_error([] { kiln::zeros<float>({1, 1, 1, 1, 1, 1, 1, 1, 1}); }, "shape", {"rank 9"});
  expect_error([] { kiln::random::uniform<float>({2}, 0, 1, 1); }, "random::uniform", {"low"});
}

TEST_CASE("scalars that do not fit the tensor's type", "[errors]") {
  const auto u = kiln::ones<std::uint8_t>({2});
  expect_error(
      [&] {
        auto e = u + 300;
        (void)e;
      },
      "scalar", {"300", "u8"});
  const auto i = kiln::ones<std::int32_t>({2});
  expect_error(
      [&] {
        auto e = i * 5'000'000'000LL;
        (void)e;
      },
      "scalar", {"i32"});
}

TEST_CASE("writing through a broadcast view is refused", "[errors]") {
  const auto row = kiln::zeros<float>({3});
  auto b = row.broadcast_to({4, 3});
  expect_error([&] { b = kiln::ones<float>({4, 3}) * 1.0f; }, "assign", {"broadcast view"});
  CHECK(row.to_vector() == std::vector<float>{0, 0, 0});
}

TEST_CASE("random incompatible shapes: the error names both, where the node is built", "[errors]") {
  for (int iter = 0; iter < 30; ++iter) {
    const auto [sa, sb] = incompatible_pair();
    const auto a = kiln::ones<float>(sa);
    const auto b = kiln::ones<float>(sb);
    INFO(sa.str() << " with " << sb.str());
    // Building the node throws (as numpy does at the op), not its later evaluation.
    expect_error([&] { (void)(a * 2.0f + kiln::sin(b)); }, "add", {"broadcast"},
                 {sa.str(), sb.str()});
    expect_error([&] { kiln::tensor<float> r = a * 2.0f + kiln::sin(b); }, "add", {"broadcast"},
                 {sa.str(), sb.str()});
    expect_error([&] { kiln::tensor<float> r = kiln::maximum(b, a); }, "maximum", {},
                 {sa.str(), sb.str()});
    // Into a target: the target's shape and the value's are named; nothing is written.
    // (A view: a whole tensor assigned another shape takes new storage instead.)
    kiln::shape bigger = sa;
    bigger[0] += 1;
    const auto holder = kiln::zeros<float>(bigger);
    auto t = holder.narrow(0, 0, sa[0]);
    expect_error([&] { t = b * 1.0f; }, "assign", {"broadcast"}, {sa.str(), sb.str()});
    CHECK(kiln::sum(kiln::abs(holder)).item() == 0.0f);
  }
}

TEST_CASE("reshape: sizes that differ and layouts that cannot be viewed", "[errors]") {
  for (int iter = 0; iter < 20; ++iter) {
    const kiln::shape s = test::random_shape(1, 4, 5);
    const auto t = kiln::ones<float>(s);
    kiln::shape bad{kiln::numel(s) + test::draw(1, 5)};
    expect_error([&] { t.reshape(bad); }, "reshape", {"size mismatch"}, {s.str(), bad.str()});
  }
  const auto m = kiln::ones<float>({4, 6});
  expect_error([&] { m.reshape({5, -1}); }, "reshape", {"-1"}, {"[5, -1]"});
  expect_error([&] { m.reshape({-2, 12}); }, "reshape", {"negative"}, {"[-2, 12]"});
  expect_error([&] { m.transpose().reshape({24}); }, "reshape", {"contiguous()"},
               {"[6, 4]", "[1, 6]", "[24]"});
  expect_error([&] { m.slice(1, 0, 6, 4).reshape({8}); }, "reshape", {"contiguous()"});
  CHECK_NOTHROW(m.transpose().contiguous().reshape({24}));
}

TEST_CASE("narrow, slice, select and at outside the tensor", "[errors]") {
  const kiln::shape s = test::random_shape(1, 4, 6);
  const auto t = kiln::ones<float>(s);
  const int d = test::draw(0, s.size() - 1);
  const std::int64_t n = s[d];
  expect_error([&] { t.narrow(d, n, 1); }, "narrow", {"out of bounds"}, {s.str()});
  expect_error([&] { t.narrow(d, 0, n + 1); }, "narrow", {"out of bounds"}, {s.str()});
  expect_error([&] { t.narrow(d, 1, -1); }, "narrow", {"out of bounds"}, {s.str()});
  expect_error([&] { t.narrow(s.size(), 0, 1); }, "narrow", {"axis"}, {"rank"});
  expect_error([&] { t.slice(d, 0, n, 0); }, "slice", {"step must not be zero"});
  expect_error([&] { t(kiln::range{0, 1, 0}); }, "slice", {"step"});
  expect_error([&] { t.slice(-s.size() - 1, 0, 1); }, "slice", {"axis"});
  expect_error([&] { t(s[0]); }, "index", {"index " + std::to_string(s[0])}, {s.str()});
  expect_error([&] { t(-s[0] - 1); }, "index", {"out of range"}, {s.str()});
  expect_error([&] { t(kiln::all, kiln::all, kiln::all, kiln::all, kiln::all); }, "index",
               {"too many"}, {s.str()});
  expect_error([&] { kiln::full<float>({}, 1.0f)(0); }, "index", {"too many"});
  expect_error([&] { t.at({}); }, "at", {"wrong number"});
  std::vector<std::int64_t> idx(std::size_t(s.size()), 0);
  idx[d] = n;
  expect_error(
      [&] {
        switch (s.size()) {
        case 1:
          t.at({idx[0]});
          break;
        case 2:
          t.at({idx[0], idx[1]});
          break;
        case 3:
          t.at({idx[0], idx[1], idx[2]});
          break;
        default:
          t.at({idx[0], idx[1], idx[2], idx[3]});
        }
      },
      "at", {"out of range"}, {s.str()});
  expect_error([&] { kiln::tensor<float>().at({}); }, "at", {"empty"});
}

TEST_CASE("bad axes for squeeze, unsqueeze, permute, dim, broadcast_to", "[errors]") {
  const auto t = kiln::ones<float>({2, 1, 3});
  expect_error([&] { t.squeeze(3); }, "squeeze", {"axis 3"}, {"rank 3"});
  expect_error([&] { t.squeeze(-4); }, "squeeze", {"axis -4"});
  expect_error([&] { t.squeeze(2); }, "squeeze", {"extent 1"}, {"[2, 1, 3]"});
  expect_error([&] { t.unsqueeze(4); }, "unsqueeze", {"axis 4"});
  expect_error([&] { t.unsqueeze(-5); }, "unsqueeze", {"axis -5"});
  expect_error([&] { t.permute({0, 1, 3}); }, "permute", {"axis 3"});
  expect_error([&] { t.permute({0, 1, -2}); }, "permute", {"repeated"});
  expect_error([&] { t.permute({0, 1}); }, "permute", {"length"}, {"[2, 1, 3]"});
  expect_error([&] { t.dim(-4); }, "dim", {"axis -4"});
  expect_error([&] { t.broadcast_to({3}); }, "broadcast_to", {"lower rank"}, {"[2, 1, 3]"});
  expect_error(
      [&] {
        t.broadcast_to({2, 4, 4});
      },
      "broadcast_to", {"broadcast"}, {"[2, 1, 3]", "[2, 4, 4]"});
  CHECK(t.squeeze(-2).shape() == kiln::shape{2, 3});
  CHECK(t.unsqueeze(-1).shape() == kiln::shape{2, 1, 3, 1});
}

TEST_CASE("rank above 8 is refused wherever a shape grows", "[errors]") {
  expect_error([] { kiln::zeros<float>({1, 1, 1, 1, 1, 1, 1, 1, 1}); }, "shape", {"rank 9"}, {"8"});
  const auto r8 = kiln::ones<float>({1, 2, 1, 2, 1, 2, 1, 2});
  expect_error([&] { r8.unsqueeze(0); }, "shape", {"rank 9"});
  expect_error([&] { r8(kiln::newaxis); }, "shape", {"rank 9"});
  expect_error([&] { r8.reshape({1, 1, 1, 1, 2, 2, 2, 2, 1}); }, "shape", {"rank 9"});
  expect_error([&] { r8.broadcast_to({1, 1, 2, 1, 2, 1, 2, 1, 2}); }, "shape", {"rank 9"});
  CHECK(r8.squeeze().unsqueeze(0).rank() == 5);
}

TEST_CASE("item on a non-scalar names the shape", "[errors]") {
  kiln::shape s = test::random_shape(1, 4, 5);
  if (kiln::numel(s) == 1) s.push_back(2);
  expect_error([&] { kiln::ones<float>(s).item(); }, "item", {"not a scalar"}, {s.str()});
  expect_error([&] { (kiln::ones<double>(s) + 1.0).item(); }, "item", {}, {s.str()});
  expect_error([&] { kiln::zeros<float>({0}).item(); }, "item", {"not a scalar"}, {"[0]"});
  CHECK(kiln::full<float>({1, 1, 1}, 3.0f).item() == 3.0f);
  CHECK(kiln::full<float>({}, 4.0f).item() == 4.0f);
}

TEST_CASE("device names: unknown, malformed, unavailable, and allocating on one", "[errors]") {
  expect_error([] { kiln::device("vulkan:99"); }, "device", {"no such device"}, {"vulkan:99"});
  expect_error([] { kiln::device("metal:0"); }, "device", {"not available"}, {"metal:0", "Apple"});
  expect_error([] { kiln::device("metal:2"); }, "device", {"no such device"}, {"metal:2"});
  expect_error([] { kiln::device("foo"); }, "device", {"unknown device"}, {"foo"});
  expect_error([] { kiln::device("gpu:0"); }, "device", {"unknown device"}, {"gpu:0"});
  expect_error([] { kiln::device("cuda:-1"); }, "device", {"malformed"}, {"cuda:-1"});
  expect_error([] { kiln::device("cuda:"); }, "device", {"malformed"});
  expect_error([] { kiln::device("vulkan:1x"); }, "device", {"malformed"});
  CHECK(kiln::device("cpu").is_host());
  // A device that is never available here (Metal off Apple platforms; cuda:0 may well be).
  const kiln::device gpu(kiln::device_kind::metal, 0);
  // Allocation errors name the creation function and the shape.
  expect_error([&] { kiln::zeros<float>({2}, gpu); }, "zeros", {"not available"},
               {"metal:0", "[2]"});
  expect_error([&] { kiln::empty<float>({2}, gpu); }, "empty", {"not available"});
  expect_error([&] { kiln::from<float>({1, 2}, gpu); }, "from", {"not available"});
}

TEST_CASE("from() with the wrong number of values", "[errors]") {
  const kiln::shape s = test::random_shape(1, 4, 5);
  const auto n = std::size_t(kiln::numel(s));
  const std::vector<double> v(n + std::size_t(test::draw(1, 3)), 1.0);
  expect_error([&] { kiln::from(v, s); }, "from", {"does not match"},
               {std::to_string(v.size()) + " values", s.str(), std::to_string(n) + " elements"});
  expect_error([&] { kiln::from(std::vector<double>{}, kiln::shape{1}); }, "from", {},
               {"0 values"});
  expect_error([&] { kiln::from(v, kiln::shape{-1, -1}); }, "from", {"negative"});
}

TEST_CASE("integer scalars out of the tensor's range", "[errors]") {
  const auto u8 = kiln::ones<std::uint8_t>({3});
  const auto i32 = kiln::ones<std::int32_t>({3});
  const auto u32 = kiln::ones<std::uint32_t>({3});
  const auto i64 = kiln::ones<std::int64_t>({3});
  expect_error([&] { (void)(u8 + 300); }, "scalar", {"does not fit"}, {"300", "u8"});
  expect_error([&] { (void)(u8 * -1); }, "scalar", {}, {"u8"});
  expect_error([&] { (void)kiln::maximum(u8, 256); }, "scalar", {}, {"256"});
  expect_error([&] { (void)kiln::where(u8 > 0, u8, 1000); }, "scalar", {}, {"1000"});
  expect_error([&] { (void)(i32 - 2147483648LL); }, "scalar", {}, {"i32"});
  expect_error([&] { (void)(u32 + -1); }, "scalar", {}, {"u32"});
  expect_error([&] { (void)(i64 + 18446744073709551615ull); }, "scalar", {}, {"i64"});
  CHECK_NOTHROW(u8 + 255);
  CHECK_NOTHROW(u8 + 300.0); // a float scalar promotes instead
}

TEST_CASE("incompatible assignments into views, and writes through broadcast views", "[errors]") {
  auto t = kiln::zeros<float>({4, 5});
  const auto before = t.clone();
  expect_error(
      [&] {
        t.narrow(1, 0, 2) = kiln::ones<float>({4, 3}) * 1.0f;
      },
      "assign", {}, {"[4, 3]", "[4, 2]"});
  expect_error(
      [&] {
        t.transpose() = kiln::ones<float>({4, 5});
      },
      "assign", {}, {"[4, 5]", "[5, 4]"});
  auto v = t(kiln::all, 1);
  expect_error([&] { v += kiln::ones<float>({5}); }, "add", {}, {"[5]", "[4]"});
  auto row = kiln::zeros<float>({5});
  auto b = row.broadcast_to({4, 5});
  expect_error([&] { b = 2.0f; }, "assign", {"broadcast view"}, {"[4, 5]"});
  expect_error([&] { b += 1.0f; }, "assign", {"broadcast view"});
  expect_error(
      [&] {
        row.unsqueeze(0).broadcast_to({3, 5}) = t.narrow(0, 0, 3) * 1.0f;
      },
      "assign", {"broadcast view"});
  auto ok = kiln::zeros<float>({4, 5});
  expect_error([&] { kiln::eval(ok = t * 1.0f, b = t * 2.0f); }, "eval", {"broadcast view"});
  CHECK(t.to_vector() == before.to_vector());
  // Outputs of two shapes on the host: one pass per shape (test_grad_trees.cpp has more).
  kiln::tensor<float> w = kiln::from<float>({1, 2, 3, 4}, {4});
  kiln::eval(ok = t + 1.0f, w = w * 2.0f);
  CHECK(ok.to_vector() == std::vector<float>(20, 1.0f));
  CHECK(w.to_vector() == std::vector<float>{2, 4, 6, 8});
  CHECK(row.to_vector() == std::vector<float>(5, 0.0f));
  // A broadcast view with extent-1 stretched dims only is a plain view: writable.
  auto single = kiln::zeros<float>({1}).broadcast_to({1, 1});
  CHECK_NOTHROW(single = 5.0f);
}
