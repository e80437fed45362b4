// Random expression trees on a GPU device against the host evaluator (run_trees), shared by
// the Vulkan and CUDA tests (test_device_trees.cpp). The tree shapes are drawn at compile time from
// a seed (C++ types are fixed at build time: 12 trees of depth 3, ops among + * - maximum where sin
// exp abs, scalars); each run draws which tensor stands at each leaf (so the same tensor recurs in
// random places: leaf dedup and CSE), the broadcast shapes, strided views, and the scalar values.
// Catch prints the seed.
#pragma once
#include "support.hpp"

#include <array>

namespace {

constexpr unsigned mix(unsigned s) { return (s * 2654435761u) ^ (s >> 13) ^ 0x9e3779b9u; }

template <unsigned S, int D, class V>
auto tree(const V& v, float c) {
  constexpr unsigned h = mix(S);
  if constexpr (D == 0) {
    return v[h % 4];
  } else {
    const auto a = tree<h + 1, D - 1>(v, c);
    const auto b = tree<h + 2, D - 1>(v, c);
    if constexpr (h % 8 == 0)
      return a + b;
    else if constexpr (h % 8 == 1)
      return a * b;
    else if constexpr (h % 8 == 2)
      return a - b * c;
    else if constexpr (h % 8 == 3)
      return kiln::sin(a) + b;
    else if constexpr (h % 8 == 4)
      return kiln::maximum(a, b);
    else if constexpr (h % 8 == 5)
      return kiln::where(a > b, a, tree<h + 3, D - 1>(v, c));
    else if constexpr (h % 8 == 6)
      return kiln::exp(-kiln::abs(a)) * b;
    else
      return (a + c) * kiln::abs(b);
  }
}

// The leaves: four slots filled from a pool of three tensors of random broadcastable
// shapes, some of them strided views (a transposed contiguous tensor).
struct leaves {
  std::array<kiln::tensor<float>, 4> host, dev;
};

leaves draw_leaves(const kiln::shape& out, const kiln::device& dev) {
  std::array<kiln::tensor<float>, 3> ph, pd;
  for (int k = 0; k < 3; ++k) {
    kiln::shape s;
    const int drop = test::draw(0, out.size()); // fewer leading dims broadcast
    for (int d = drop; d < out.size(); ++d)
      s.push_back(test::draw(0, 3) == 0 ? 1 : out[d]);
    const bool strided = s.size() >= 2 && test::draw(0, 1) == 1;
    kiln::shape base = s;
    if (strided) std::reverse(base.begin(), base.end());
    const auto h = kiln::random::uniform<float>(base, test::draw(1, 1 << 30), -2, 2);
    const auto d = h.to(dev);
    ph[k] = strided ? h.transpose() : h;
    pd[k] = strided ? d.transpose() : d;
  }
  leaves l;
  for (int i = 0; i < 4; ++i) {
    const int k = test::draw(0, 2);
    l.host[i] = ph[k];
    l.dev[i] = pd[k];
  }
  return l;
}

template <unsigned S>
void one_tree(const kiln::device& dev) {
  const kiln::shape out = test::random_shape(1, 3, 9);
  const leaves l = draw_leaves(out, dev);
  const float c = static_cast<float>(test::uniform<float>(1, -2, 2)[0]);
  const auto want = tree<S, 3>(l.host, c).eval();
  const auto got = tree<S, 3>(l.dev, c).eval();
  REQUIRE(got.device() == dev);
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector(), w = want.to_vector();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i) // float rounding differs in the last bits
    bad += !(std::abs(g[i] - w[i]) <= 1e-4f * (1 + std::abs(w[i])));
  INFO("tree " << S << ", shape " << out.str() << ", c " << c << ": " << bad << " of " << w.size()
               << " differ");
  CHECK(bad == 0);
}

template <unsigned... S>
void all_trees(const kiln::device& dev, std::integer_sequence<unsigned, S...>) {
  (one_tree<S>(dev), ...);
}

} // namespace

// Every tree, three times with fresh leaves, shapes and scalars.
inline void run_trees(const kiln::device& dev) {
  for (int rep = 0; rep < 3; ++rep)
    all_trees(dev, std::make_integer_sequence<unsigned, 12>{});
}
