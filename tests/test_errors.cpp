// Every bad input gets a kiln::error naming the op, the reason and the details.
#include "support.hpp"

namespace {
// Runs f, requires a kiln::error from `op` whose message contains each of `parts`.
template <class F>
void expect_error(F&& f, const std::string& op, std::initializer_list<const char*> parts) {
  try {
    f();
  } catch (const kiln::error& e) {
    INFO("message: " << e.what());
    CHECK(e.op() == op);
    for (const char* p : parts)
      CHECK(std::string(e.what()).find(p) != std::string::npos);
    return;
  }
  FAIL("no kiln::error was thrown (expected one from " << op << ")");
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
  expect_error([] { kiln::device("vulkan:0"); }, "device", {"not available", "vulkan:0"});
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
  expect_error([] { kiln::default_device(); }, "device", {"nonsense"});
  ::unsetenv("KILN_DEVICE");
  CHECK(kiln::default_device().is_host());
}

TEST_CASE("creation errors", "[errors]") {
  expect_error(
      [] {
        kiln::from<float>({1, 2, 3}, kiln::shape{2, 2});
      },
      "from", {"3 values", "[2, 2]"});
  expect_error([] { kiln::zeros<float>({2, -1}); }, "full", {"negative"});
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
