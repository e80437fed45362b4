// kiln/mpi.hpp on every rank of MPI_COMM_WORLD (CTest runs it with `mpirun -np 2`, as the
// tests "mpi: ..."): each rank draws its own values from a seed rank 0 broadcasts, so every
// rank can build every other rank's values and check the collectives against
// double-precision loops of its own. With KILN_TEST_MPI_NO_INIT=1 MPI is not initialized and
// only the tests tagged [no-init] run.
#define CATCH_CONFIG_EXTERNAL_INTERFACES // Catch's listener base (mpi_run, below)
#include <catch2/catch.hpp>

#include "error_support.hpp"

#include <kiln/mpi.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace mpi = kiln::mpi;
using mpi::reduction;

// One seed for all ranks, drawn on rank 0 (printed with any failure).
std::uint64_t shared_seed() {
  std::uint64_t s = std::random_device{}();
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s;
}

// Host values of a tensor<T> (std::vector<bool> is not a contiguous array of bool).
template <class T>
using host_t = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
template <class T>
kiln::tensor<T> tensor_of(const std::vector<host_t<T>>& v, const kiln::shape& s) {
  if constexpr (std::is_same_v<T, bool>)
    return kiln::from(v, s) != std::uint8_t{0};
  else
    return kiln::from(v, s);
}

// Rank r's values for a test: n doubles drawn from (seed, r), as T would hold them.
template <class T>
std::vector<host_t<T>> values_of(std::uint64_t seed, int r, std::int64_t n) {
  std::mt19937_64 gen(seed * 1000003 + static_cast<std::uint64_t>(r));
  std::normal_distribution<double> normal(0, 10);
  std::vector<host_t<T>> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    const double d = normal(gen);
    if constexpr (std::is_same_v<T, bool>)
      x = d > 0 ? 1 : 0;
    else if constexpr (std::is_same_v<T, std::uint8_t>)
      x = static_cast<std::uint8_t>(std::min(std::fabs(d) * 2, 120.0)); // sums of 2 below 256
    else if constexpr (std::is_same_v<T, std::uint32_t>)
      x = static_cast<std::uint32_t>(std::fabs(d) * 1000);
    else if constexpr (std::is_integral_v<T>)
      x = static_cast<T>(d * 1000);
    else
      x = T(d);
  }
  return v;
}

template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, bool>)
    return x ? 1 : 0;
  else if constexpr (std::is_same_v<T, kiln::half> || std::is_same_v<T, kiln::bfloat16>)
    return static_cast<float>(x);
  else
    return static_cast<double>(x);
}

// The reference of reduction `r` over all ranks' values at i, in double.
template <class T>
double reference(const std::vector<std::vector<T>>& all, std::size_t i, reduction r) {
  double acc = as_double(all[0][i]);
  for (std::size_t k = 1; k < all.size(); ++k) {
    const double x = as_double(all[k][i]);
    if (r == reduction::sum)
      acc += x;
    else if (std::isnan(x) || std::isnan(acc))
      acc = std::nan("");
    else
      acc = r == reduction::max ? std::max(acc, x) : std::min(acc, x);
  }
  return acc;
}

// Within one rounding of the result type per rank (exact for integers).
template <class T>
double tolerance(double ref, int ranks) {
  if constexpr (std::is_integral_v<T>)
    return 0;
  else
    return ranks * as_double(std::numeric_limits<T>::epsilon()) * (std::fabs(ref) + 1);
}

template <class T>
void check_allreduce(reduction r) {
  const int ranks = mpi::size(), me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  INFO("dtype " << kiln::name(kiln::dtype_of<T>()) << ", " << mpi::name(r) << ", seed " << seed);
  const std::int64_t rows = 37, cols = 5, n = rows * cols;
  std::vector<std::vector<host_t<T>>> all;
  for (int k = 0; k < ranks; ++k) {
    all.push_back(values_of<T>(seed, k, n));
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, kiln::half> ||
                  std::is_same_v<T, kiln::bfloat16>)
      if (k == ranks - 1 && r != reduction::sum) all[k][11] = T(std::nanf("")); // NaN wins
  }
  const auto t = tensor_of<T>(all[static_cast<std::size_t>(me)], {rows, cols});
  const auto before = t.to_vector();
  const auto got = mpi::allreduce(t, r).to_vector();
  const auto after = t.to_vector(); // a tensor argument is not written (NaN stays NaN)
  if constexpr (std::is_same_v<T, bool>)
    CHECK(before == after);
  else
    for (std::size_t i = 0; i < before.size(); ++i)
      CHECK(std::memcmp(&before[i], &after[i], sizeof(T)) == 0);
  REQUIRE(got.size() == static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ref = reference(all, i, r), g = as_double(static_cast<T>(got[i]));
    INFO("element " << i << ": " << g << " vs " << ref);
    if (std::isnan(ref))
      REQUIRE(std::isnan(g));
    else
      REQUIRE(std::fabs(g - ref) <= tolerance<T>(ref, ranks));
  }
}

} // namespace

TEST_CASE("mpi: allreduce sum, max and min of every dtype match double loops over all ranks' "
          "values (NaN propagates through max and min)",
          "[mpi]") {
  for (reduction r : {reduction::sum, reduction::max, reduction::min}) {
    check_allreduce<float>(r);
    check_allreduce<double>(r);
    check_allreduce<std::int32_t>(r);
    check_allreduce<std::int64_t>(r);
    check_allreduce<std::uint32_t>(r);
    check_allreduce<std::uint8_t>(r);
    check_allreduce<kiln::half>(r);
    check_allreduce<kiln::bfloat16>(r);
  }
  check_allreduce<bool>(reduction::max); // any
  check_allreduce<bool>(reduction::min); // all
}

TEST_CASE("mpi: allreduce_in_place on a strided view writes the view and nothing else, and an "
          "expression is evaluated first",
          "[mpi]") {
  const int ranks = mpi::size(), me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  INFO("seed " << seed);
  std::vector<std::vector<double>> all;
  for (int k = 0; k < ranks; ++k)
    all.push_back(values_of<double>(seed, k, 6 * 8));
  const auto base = kiln::from(all[static_cast<std::size_t>(me)], {6, 8});
  const auto view = base.transpose().narrow(0, 2, 4); // [4, 6], strides (1, 8), offset 2
  REQUIRE_FALSE(view.is_contiguous());
  mpi::allreduce_in_place(view);
  const auto got = base.to_vector();
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 8; ++j) {
      const auto at = static_cast<std::size_t>(i * 8 + j);
      const double ref = j >= 2 && j < 6 ? reference(all, at, reduction::sum)
                                         : all[static_cast<std::size_t>(me)][at];
      REQUIRE(std::fabs(got[at] - ref) <= 1e-12 * (std::fabs(ref) + 1));
    }
  // An expression: 2 x + 1 on each rank, summed.
  const auto x = kiln::from(all[static_cast<std::size_t>(me)], {48});
  const auto s = mpi::allreduce(x * 2.0 + 1.0).to_vector();
  for (std::size_t i = 0; i < s.size(); ++i) {
    double ref = 0;
    for (int k = 0; k < ranks; ++k)
      ref += all[static_cast<std::size_t>(k)][i] * 2 + 1;
    REQUIRE(std::fabs(s[i] - ref) <= 1e-12 * (std::fabs(ref) + 1));
  }
}

TEST_CASE("mpi: device tensors (vulkan:0) are staged through the host, views included", "[mpi]") {
  const kiln::device gpu(kiln::device_kind::vulkan, 0);
  bool here = false;
  for (const auto& d : kiln::devices())
    here = here || (d.device == gpu && d.available);
  int all_here = here ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_here, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_here) {
    WARN("skipped: vulkan:0 is not available on every rank");
    return;
  }
  const int ranks = mpi::size(), me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  INFO("seed " << seed);
  std::vector<std::vector<float>> all;
  for (int k = 0; k < ranks; ++k)
    all.push_back(values_of<float>(seed, k, 300));
  const auto d = kiln::from(all[static_cast<std::size_t>(me)], {30, 10}, gpu);
  const auto col = d.narrow(1, 3, 4); // a strided view on the device
  mpi::allreduce_in_place(col, reduction::max);
  const auto sum = mpi::allreduce(d * 0.5f);
  CHECK(sum.device() == gpu);
  const auto got = d.to_vector(), s = sum.to_vector();
  std::vector<float> root_d(got.size()); // rank 0's d after the max
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t j = i % 10;
    const double mine = all[static_cast<std::size_t>(me)][i];
    const double ref = j >= 3 && j < 7 ? reference(all, i, reduction::max) : mine;
    REQUIRE(got[i] == static_cast<float>(ref));
    root_d[i] = j >= 3 && j < 7 ? static_cast<float>(ref) : all[0][i];
    double half_sum = 0; // of the values after the max, as every rank holds them
    for (int k = 0; k < ranks; ++k)
      half_sum += 0.5 * (j >= 3 && j < 7 ? ref : all[static_cast<std::size_t>(k)][i]);
    REQUIRE(std::fabs(s[i] - half_sum) <= 4e-7 * (std::fabs(half_sum) + 1));
  }
  // broadcast and gather to and from the device
  const auto b = mpi::broadcast(me == 0 ? d : kiln::tensor<float>(kiln::shape{1}, gpu), 0);
  CHECK(b.device() == gpu);
  CHECK(b.to_vector() == root_d);
  const auto g = mpi::gather(d.narrow(0, 0, 2), 0);
  if (me == 0) {
    CHECK(g.device() == gpu);
    CHECK(g.shape() == kiln::shape{2 * ranks, 10});
  }
}

TEST_CASE("mpi: broadcast gives every rank root's dtype, shape and values, whatever it passed",
          "[mpi]") {
  const int me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  const std::int64_t n = 3 * 4 * 5;
  const auto root_values = values_of<std::int64_t>(seed, 0, n);
  for (int root = 0; root < mpi::size(); ++root) {
    const auto mine =
        me == root ? kiln::from(root_values, {3, 4, 5}) : kiln::tensor<std::int64_t>();
    const auto got = mpi::broadcast(mine, root);
    CHECK(got.shape() == kiln::shape{3, 4, 5});
    CHECK(got.to_vector() == root_values);
    if (me == root) CHECK(got.storage() != mine.storage()); // a copy, not the argument
  }
  // A strided view and an expression on the root.
  const auto m = kiln::from(root_values, {3, 20});
  const auto got = mpi::broadcast(me == 0 ? m.transpose() * std::int64_t{2} : m, 0);
  REQUIRE(got.shape() == kiln::shape{20, 3});
  for (std::int64_t i = 0; i < 20; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      REQUIRE(got.at({i, j}) == 2 * root_values[static_cast<std::size_t>(j * 20 + i)]);
}

TEST_CASE("mpi: gather concatenates shards of unequal length in rank order, and scatter splits "
          "root's rows as evenly as they go",
          "[mpi]") {
  const int ranks = mpi::size(), me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  INFO("seed " << seed);
  std::vector<std::vector<float>> all;
  std::int64_t total = 0;
  for (int k = 0; k < ranks; ++k) {
    all.push_back(values_of<float>(seed, k, (3 + k) * 4));
    total += 3 + k;
  }
  const auto mine = kiln::from(all[static_cast<std::size_t>(me)], {3 + me, 4});
  const auto g = mpi::gather(mine + 0.0f, 0);
  if (me == 0) {
    REQUIRE(g.shape() == kiln::shape{total, 4});
    std::vector<float> ref;
    for (const auto& v : all)
      ref.insert(ref.end(), v.begin(), v.end());
    CHECK(g.to_vector() == ref);
  } else {
    CHECK_FALSE(g.storage());
  }
  // scatter of root's [total, 4] back: rank k gets total/p rows, one more for k < total % p
  const auto rows = me == 0 ? g : kiln::tensor<float>();
  const auto part = mpi::scatter(rows, 0);
  const std::int64_t want = total / ranks + (me < total % ranks ? 1 : 0);
  REQUIRE(part.shape() == kiln::shape{want, 4});
  std::int64_t first = 0;
  for (int k = 0; k < me; ++k)
    first += total / ranks + (k < total % ranks ? 1 : 0);
  std::vector<float> flat;
  for (const auto& v : all)
    flat.insert(flat.end(), v.begin(), v.end());
  CHECK(part.to_vector() ==
        std::vector<float>(flat.begin() + first * 4, flat.begin() + (first + want) * 4));
  // Scalars gather as one element each; an empty shard takes part.
  const auto sc = mpi::gather(kiln::full<double>({}, double(me)), 0);
  if (me == 0)
    CHECK(sc.to_vector() == [&] {
      std::vector<double> v;
      for (int k = 0; k < ranks; ++k)
        v.push_back(k);
      return v;
    }());
  const auto e = mpi::gather(kiln::zeros<float>({me == 0 ? 0 : 2, 3}), 0);
  if (me == 0) CHECK(e.shape() == kiln::shape{2 * (ranks - 1), 3});
}

TEST_CASE("mpi: send and recv carry dtype, shape and values, the wrong dtype is a clear error "
          "and the next message still arrives",
          "[mpi]") {
  const int ranks = mpi::size(), me = mpi::rank();
  if (ranks < 2) return;
  const std::uint64_t seed = shared_seed();
  const auto v = values_of<kiln::half>(seed, 0, 12);
  if (me == 0) {
    const auto t = kiln::from(v, {3, 4});
    mpi::send(t.transpose(), 1, 7);
    mpi::send(t, 1, 8);
    mpi::send(kiln::cast<float>(t), 1, 9);
  } else if (me == 1) {
    const auto a = mpi::recv<kiln::half>(0, 7);
    REQUIRE(a.shape() == kiln::shape{4, 3});
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        REQUIRE(a.at({i, j}).bits == v[static_cast<std::size_t>(j * 4 + i)].bits);
    expect_error([] { (void)mpi::recv<float>(0, 8); }, "mpi::recv",
                 {"dtype is not the receiver's", "f16 sent", "f32 expected", "tag 8"});
    const auto c = mpi::recv<float>(MPI_ANY_SOURCE, MPI_ANY_TAG);
    REQUIRE(c.shape() == kiln::shape{3, 4});
    for (std::size_t i = 0; i < v.size(); ++i)
      REQUIRE(c.to_vector()[i] == static_cast<float>(v[i]));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: counts past what one MPI call moves travel in pieces", "[mpi]") {
  const int ranks = mpi::size(), me = mpi::rank();
  const std::uint64_t seed = shared_seed();
  INFO("seed " << seed);
  struct lowered {
    lowered() { mpi::detail::max_count = 7; }
    ~lowered() { mpi::detail::max_count = INT_MAX; }
  } at_seven;
  std::vector<std::vector<float>> all;
  for (int k = 0; k < ranks; ++k)
    all.push_back(values_of<float>(seed, k, 50));
  const auto mine = kiln::from(all[static_cast<std::size_t>(me)], {10, 5});
  const auto s = mpi::allreduce(mine).to_vector();
  for (std::size_t i = 0; i < s.size(); ++i)
    REQUIRE(std::fabs(s[i] - reference(all, i, reduction::sum)) <= 1e-5 * (std::fabs(s[i]) + 1));
  CHECK(mpi::broadcast(mine, 0).to_vector() == all[0]);
  const auto g = mpi::gather(mine, 0);
  if (me == 0) {
    const auto gv = g.to_vector();
    for (int k = 0; k < ranks; ++k)
      CHECK(std::vector<float>(gv.begin() + k * 50, gv.begin() + (k + 1) * 50) ==
            all[static_cast<std::size_t>(k)]);
  }
  const auto part = mpi::scatter(me == 0 ? g : kiln::tensor<float>(), 0);
  CHECK(part.shape() == kiln::shape{10, 5}); // 10 ranks' rows each, evenly
  if (ranks >= 2) {
    if (me == 0) mpi::send(mine, 1, 3);
    if (me == 1) CHECK(mpi::recv<float>(0, 3).to_vector() == all[0]);
    if (me == 1) mpi::send(mine, 0, 4); // and a dtype mismatch drains every piece
    if (me == 0) expect_error([] { (void)mpi::recv<double>(1, 4); }, "mpi::recv", {"f32 sent"});
    if (me == 1) mpi::send(mine * 2.0f, 0, 5);
    if (me == 0) {
      std::vector<float> twice = all[1];
      for (auto& x : twice)
        x *= 2;
      CHECK(mpi::recv<float>(1, 5).to_vector() == twice);
    }
  }
}

TEST_CASE("mpi: a tensor of 2^31 + 3 bytes is reduced across the int boundary", "[mpi][big]") {
  const int me = mpi::rank();
  const std::int64_t n = (std::int64_t{1} << 31) + 3;
  auto t = kiln::full<std::uint8_t>({n}, std::uint8_t(me == 0 ? 3 : 5));
  std::uint8_t* p = t.data();
  if (me == 0) {
    p[INT_MAX - 1] = 100; // the last element of the first piece
    p[INT_MAX] = 200;     // the first of the second
    p[n - 1] = 9;
  }
  mpi::allreduce_in_place(t, reduction::max);
  CHECK(p[0] == (mpi::size() > 1 ? 5 : 3));
  CHECK(p[INT_MAX - 1] == 100);
  CHECK(p[INT_MAX] == 200);
  CHECK(p[n - 1] == 9);
  CHECK(kiln::min(t).item() == (mpi::size() > 1 ? 5 : 3));
}

TEST_CASE("mpi: mismatched shapes, dtypes, empty tensors, bool sums and bad roots are "
          "kiln::errors on every rank, not hangs",
          "[mpi]") {
  const int ranks = mpi::size(), me = mpi::rank();
  if (ranks < 2) return;
  expect_error([&] { mpi::allreduce(kiln::zeros<float>({me == 0 ? 3 : 4})); }, "mpi::allreduce",
               {"shapes differ"});
  expect_error(
      [&] {
        if (me == 0)
          mpi::allreduce(kiln::zeros<float>({3}));
        else
          mpi::allreduce(kiln::zeros<double>({3}));
      },
      "mpi::allreduce", {"dtypes differ"});
  expect_error([&] { mpi::allreduce(me == 0 ? kiln::tensor<float>() : kiln::zeros<float>({3})); },
               "mpi::allreduce", {me == 0 ? "empty" : "another rank could not take part"});
  expect_error([&] { mpi::allreduce(kiln::zeros<float>({2}) > 0.0f); }, "mpi::allreduce",
               {"sum of bool"});
  expect_error([&] { mpi::broadcast(kiln::zeros<float>({2}), ranks + 3); }, "mpi::broadcast",
               {"no such root"});
  expect_error(
      [&] {
        if (me == 0)
          mpi::broadcast(kiln::zeros<float>({2}), 0);
        else
          mpi::broadcast(kiln::tensor<std::int32_t>(), 0);
      },
      "mpi::broadcast", {"dtypes differ"});
  expect_error(
      [&] {
        mpi::gather(kiln::zeros<float>({2, me + 1}), 0);
      },
      "mpi::gather", {"shapes differ"});
  expect_error([&] { mpi::scatter(kiln::full<float>({}, 1.0f), 0); }, "mpi::scatter",
               {me == 0 ? "rank-0 tensor" : "root could not take part"});
  // MPI's own checks, with MPI's words: a negative tag.
  expect_error([&] { mpi::send(kiln::zeros<float>({2}), (me + 1) % ranks, -5); }, "mpi::send",
               {"MPI failed", "MPI_Send", "tag"});
  // After all of that the ranks are still in step.
  CHECK(mpi::allreduce(kiln::full<std::int32_t>({1}, 1)).item() == ranks);
}

TEST_CASE("mpi: a call before MPI is initialized is a kiln::error", "[no-init]") {
  expect_error([] { mpi::allreduce(kiln::zeros<float>({2})); }, "mpi::allreduce",
               {"MPI is not running", "MPI_Init"});
}

// MPI for the whole run, from a listener: the suite's prebuilt Catch main runs this file
// (its own main compiled Catch's implementation, about half of this file's build). Listing
// the tests (CTest's discovery) starts no run, and the [no-init] tests run without MPI.
struct mpi_run : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(const Catch::TestRunInfo& info) override {
    TestEventListenerBase::testRunStarting(info);
    const char* no_init = std::getenv("KILN_TEST_MPI_NO_INIT");
    if (no_init && std::string(no_init) == "1") return;
    int argc = 0;
    char** argv = nullptr;
    env_.emplace(argc, argv);
  }
  void testRunEnded(const Catch::TestRunStats& stats) override {
    TestEventListenerBase::testRunEnded(stats);
    env_.reset();
  }

private:
  std::optional<mpi::environment> env_;
};
CATCH_REGISTER_LISTENER(mpi_run)
