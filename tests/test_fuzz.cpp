// A differential fuzzer: random expression trees on the host and on vulkan:0 against a
// double-precision reference of its own (fuzz_reference.hpp, fuzz_reductions.hpp: dense
// arrays with explicit strides and an error bound per value, not kiln's evaluator).
//
// Each case draws, from its own seed: one of a compile-time set of ten tree shapes (its
// element type, f32 f64 f16 i32 i64 u8, and two reductions come with it, fuzz_trees.hpp),
// the output shape (rank 0-3, dims of 0 and 1 included), three source tensors of shapes
// that broadcast to it, each a view of a buffer (negative steps, narrows, transposes,
// stride-0 broadcasts, several views of one buffer, fuzz_views.hpp), which source stands at
// each of the tree's four leaves, the scalars, NaN/inf/-0 in some float cases, and what is
// evaluated: the tree into a new tensor, into a target view that may alias the inputs, one
// of its two reductions (over all elements, one axis or two, keepdims or not; some inside
// x - R(x, axes, true)), `tree1 - kiln::matmul(tree2, W) * c` (a product of a tree with a
// drawn matrix, the tree read in its prologue and the rest its epilogue: on a device the
// contraction kernel with both fused), or `kiln::eval(A = tree, B = tree2)` with targets that alias
// the inputs and each other, and tree2 reading another view of A's buffer (numpy semantics: every
// output is computed from the values before the call; overlapping targets are written in order).
// Every third case's assignment or two-output eval runs from a captured plan (kiln::capture)
// and is compared as replayed, not as captured (the buffers restored in between).
// After each case every buffer is compared whole, so a stray write is caught too. Sizes: most cases
// up to ~300 elements; every 5th (from the 2nd) 16k-240k (many workgroups); every 40th on a device,
// 150th on the host (from the 5th) past 2^22 elements, a reduction or a new tensor (beyond the 64 *
// 65535 elements one workgroup's loop covers on llvmpipe).
//
// Time: KILN_FUZZ_SECONDS (default 40), half on the host, half on vulkan:0 (skipped with a
// warning where there is none). A longer local run, e.g. ten minutes:
//   KILN_FUZZ_SECONDS=1200 ./build/release/tests/test_fuzz --rng-seed time
// A failure prints the seed, the case number and the whole case (the views as kiln calls,
// the expression, the buffers' values); replay one case with the same seed:
//   KILN_FUZZ_CASE=<n> ./build/release/tests/test_fuzz --rng-seed <seed>
// Categories of known bugs being fixed elsewhere can be switched off (default on):
//   KILN_FUZZ_BIG=0           no cases past 2^22 elements
//   KILN_FUZZ_DEVICE_ALIAS=0  on a device, two-output targets are new tensors that no
//                             input reads
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "fuzz_reductions.hpp"
#include "fuzz_trees.hpp"
#include "fuzz_views.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <tuple>

namespace {

using namespace fuzz;

// The compile-time set: tree S has element type T<S>, reductions red_a/red_b, and a second
// tree (depth 2) for two-output evaluations. The float trees cover all nine reductions,
// the integer trees all but any.
constexpr int n_trees = 10;
using types = std::tuple<float, std::int32_t, double, float, std::int64_t, float, std::int32_t,
                         double, std::uint8_t, kiln::half>;
template <int S>
using elem_t = std::tuple_element_t<S, types>;
using enum red;
constexpr red reductions[n_trees][2] = {{sum, min},    {prod, max},    {mean, argmin}, {max, all},
                                        {min, argmax}, {argmax, prod}, {argmin, all},  {any, sum},
                                        {sum, mean},   {mean, max}};
template <int S>
constexpr red red_a = reductions[S][0];
template <int S>
constexpr red red_b = reductions[S][1];
template <int S>
constexpr unsigned seed1 = 7919u * S + 17;
template <int S>
constexpr unsigned seed2 = 104729u * S + 3;

enum class kind { fresh, assign, reduce_a, reduce_b, multi, product };
const char* kind_name(kind k) {
  static const char* n[] = {"new tensor",  "assign to a target", "reduction A",
                            "reduction B", "two-output eval",    "a product between two trees"};
  return n[static_cast<int>(k)];
}

// A drawn number 0-6 as a case kind: 4 and 5 are two-output evals, 6 a product.
kind kind_of(int p) { return p == 6 ? kind::product : static_cast<kind>(std::min(p, 4)); }

long env_long(const char* name, long dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : dflt;
}

struct settings {
  double seconds = double(env_long("KILN_FUZZ_SECONDS", 40)) / 2;
  bool big = env_long("KILN_FUZZ_BIG", 1) != 0;
  bool device_alias = env_long("KILN_FUZZ_DEVICE_ALIAS", 1) != 0;
  long only = env_long("KILN_FUZZ_CASE", -1);
};

template <class T>
arith arith_of() {
  arith a;
  a.integer = !floating_v<T>;
  if constexpr (floating_v<T>) {
    a.u = double(std::numeric_limits<T>::epsilon()) / 2;
    a.maxv = double(std::numeric_limits<T>::max());
    a.tiny = double(std::numeric_limits<T>::min());
  } else {
    a.maxv = double(std::numeric_limits<T>::max());
    a.bits = std::is_same_v<T, bool> ? 1 : int(sizeof(T) * 8);
    a.is_signed = std::is_signed_v<T>;
  }
  return a;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, std::int32_t>) return "std::int32_t";
  if constexpr (std::is_same_v<T, std::int64_t>) return "std::int64_t";
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, std::uint8_t>) return "std::uint8_t";
  if constexpr (std::is_same_v<T, kiln::half>) return "kiln::half";
  return "?";
}

std::string num(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
std::string str(const dims& s) {
  std::string r = "{";
  for (std::size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

// One drawn case: everything a failure report prints.
struct drawn {
  long number = 0;
  bool big = false, medium = false, specials = false;
  kind k = kind::fresh;
  dims out;
  std::vector<std::vector<val>> bufs; // the reference's buffers (initial values)
  std::array<view_spec, 4> src;       // src[3]: a view of A's buffer, for B's leaves only
  std::array<int, 4> slot{}, slot2{}; // the trees' leaves: which source stands at each
  double c = 0, cpos = 1;
  // kind::product: W, [q, n] (q: the operand tree's last dim, n: the output's), row-major.
  dims wshape;
  std::vector<double> w;
  view_spec ta, tb; // targets: assign uses ta, two-output eval both
  std::string reduction;
};

struct runner {
  std::mt19937_64 g;
  drawn c;
  const kiln::device& dev;
  const settings& set;
  long compared = 0, unbounded = 0;
  bool captured = false; // the case's statement was replayed from a captured plan
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }

  dims draw_out() {
    dims s;
    if (c.big) {
      const std::int64_t n = std::uniform_int_distribution<std::int64_t>(4200000, 5500000)(g);
      const int r = pick(1, 3);
      if (r == 1) return {n};
      if (r == 2) return pick(0, 1) ? dims{2, n / 2} : dims{n / 3, 3};
      return {2, n / 6, 3};
    }
    if (c.medium) { // many workgroups: where writes and reads of several outputs may race
      const std::int64_t n = pick(256, 600);
      return pick(0, 1) ? dims{n * pick(64, 400)} : dims{n, pick(64, 400)};
    }
    const int r = pick(0, 3);
    if (r == 1 && pick(0, 1)) return {pick(0, 300)};
    for (int d = 0; d < r; ++d) {
      const int x = pick(0, 19);
      s.push_back(x == 0 ? 0 : x <= 4 ? 1 : pick(2, 7));
    }
    return s;
  }
  // A source's shape: drops some leading dims, sets some to 1 (they broadcast).
  dims draw_source_shape() {
    dims s;
    const int drop = pick(0, 3) == 0 ? pick(0, int(c.out.size())) : 0;
    for (std::size_t d = drop; d < c.out.size(); ++d)
      s.push_back(pick(0, 3) == 0 ? 1 : c.out[d]);
    return s;
  }

  template <class T>
  void draw_case(bool floating) {
    c.k = c.big ? (pick(0, 3) == 0 ? kind::fresh
                   : pick(0, 1)    ? kind::reduce_a
                                   : kind::reduce_b)
                : kind_of(pick(0, 6));
    c.out = draw_out();
    if (c.k == kind::product && c.out.empty()) c.k = kind::fresh; // no matrix in a rank-0 output
    c.specials = floating && pick(0, 3) == 0;
    std::vector<view_spec*> views;
    for (int k = 0; k < 3; ++k) {
      c.src[k] = draw_view(g, draw_source_shape(), true, c.big);
      c.src[k].buffer = pick(0, k); // views of one buffer overlap
      views.push_back(&c.src[k]);
    }
    for (auto& s : c.slot)
      s = pick(0, 2);
    int nbuf = 3;
    const bool alias = dev.is_host() || set.device_alias || c.k != kind::multi;
    // A target is a new buffer, a view of a source's buffer, the very view of a source (in
    // place), or for B: A's view again or another view of A's buffer.
    int ta_src = -1, tb_src = -1;
    bool tb_is_a = false;
    auto draw_target = [&](view_spec& t, int& same_src, bool* same_a) {
      const int how = alias ? pick(0, 4) : 0;
      const int k = pick(0, 2);
      if (how == 1 && c.src[k].shape == c.out && !c.src[k].needs_broadcast()) {
        same_src = k;
        return;
      }
      if (how == 2 && same_a) {
        *same_a = true;
        return;
      }
      t = draw_view(g, c.out, false, c.big);
      t.buffer = how == 0             ? nbuf++
                 : how == 3 && same_a ? (ta_src >= 0 ? c.src[ta_src].buffer : c.ta.buffer)
                                      : c.src[k].buffer;
      views.push_back(&t);
    };
    if (c.k == kind::assign || c.k == kind::multi) draw_target(c.ta, ta_src, nullptr);
    if (c.k == kind::multi) {
      draw_target(c.tb, tb_src, &tb_is_a);
      // B's tree reads sources and another view of A's buffer (where A writes), which A's
      // tree does not read: the outputs must be planned together, not each on its own.
      c.src[3] = draw_view(g, draw_source_shape(), true, c.big);
      c.src[3].buffer = !alias ? pick(0, 2) : ta_src >= 0 ? c.src[ta_src].buffer : c.ta.buffer;
      views.push_back(&c.src[3]);
      for (auto& s : c.slot2)
        s = pick(0, 3);
    }
    // Buffer lengths, then where each view starts in its buffer.
    std::vector<std::int64_t> len(nbuf, 0);
    for (auto* v : views)
      len[v->buffer] = std::max(len[v->buffer], v->base_count());
    for (auto& l : len)
      l += pick(1, 4);
    for (auto* v : views)
      v->offset =
          std::uniform_int_distribution<std::int64_t>(0, len[v->buffer] - v->base_count())(g);
    if (ta_src >= 0) c.ta = c.src[ta_src];
    if (tb_src >= 0) c.tb = c.src[tb_src];
    if (tb_is_a) c.tb = c.ta;
    c.bufs.resize(nbuf);
    std::uniform_real_distribution<double> u(-2, 2);
    for (int b = 0; b < nbuf; ++b) {
      c.bufs[b].resize(static_cast<std::size_t>(len[b]));
      for (auto& x : c.bufs[b]) {
        double v = floating ? double(T(u(g))) : double(pick(std::is_signed_v<T> ? -4 : 0, 4));
        if (c.specials && pick(0, 29) == 0) {
          static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
          v = sp[pick(0, 4)];
        }
        x = {v, 0};
      }
    }
    c.c = floating ? double(T(u(g))) : double(pick(std::is_signed_v<T> ? -3 : 0, 3));
    c.cpos = floating ? double(T(std::uniform_real_distribution<double>(0.5, 2)(g))) : 1;
  }
};

// kiln's reduction R over e.
template <red R, class E>
auto kreduce(const E& e, const kiln::axes& ax, bool keep) {
  if constexpr (R == red::sum) return kiln::sum(e, ax, keep);
  if constexpr (R == red::prod) return kiln::prod(e, ax, keep);
  if constexpr (R == red::mean) return kiln::mean(e, ax, keep);
  if constexpr (R == red::max) return kiln::max(e, ax, keep);
  if constexpr (R == red::min) return kiln::min(e, ax, keep);
  if constexpr (R == red::argmax) return kiln::argmax(e, ax, keep);
  if constexpr (R == red::argmin) return kiln::argmin(e, ax, keep);
  if constexpr (R == red::all) return kiln::all(e, ax, keep);
  if constexpr (R == red::any) return kiln::any(e, ax, keep);
}

// The differences found in one case: the first few, and how many.
struct differences {
  std::string text;
  long n = 0;
  long compared = 0, unbounded = 0; // elements; unbounded: the reference allows any value
  void count(const val& want) {
    ++compared;
    unbounded += std::isinf(want.e) || std::isnan(want.e);
  }
  void add(const std::string& where, double got, const val& want) {
    if (n++ < 8)
      text += "  " + where + ": kiln " + num(got) + ", reference " + num(want.v) + " +- " +
              num(want.e) + "\n";
  }
  void note(const std::string& s) {
    ++n;
    text += "  " + s + "\n";
  }
};

// ok: for argmax/argmin, the answers the bounds allow per output.
template <class R>
void compare_tensor(const kiln::tensor<R>& got, const dense& want, const arith& t, differences& d,
                    const std::vector<std::vector<char>>* ok = nullptr) {
  const dims gs(got.shape().begin(), got.shape().end());
  if (gs != want.shape) {
    d.note("result shape " + str(gs) + ", reference " + str(want.shape));
    return;
  }
  const auto v = got.to_vector();
  for (std::size_t i = 0; i < want.x.size(); ++i) {
    const double x = static_cast<double>(v[i]);
    if (!ok) d.count(want.x[i]);
    const bool good = ok ? x >= 0 && x < double((*ok)[i].size()) && (*ok)[i][std::size_t(x)]
                         : close(x, want.x[i], t);
    if (!good) d.add("result element " + std::to_string(i), x, want.x[i]);
  }
}

// Every buffer, whole: the targets' writes and nothing else.
template <class T>
void compare_buffers(const std::vector<kiln::tensor<T>>& kb,
                     const std::vector<std::vector<val>>& ref, const arith& t, differences& d) {
  for (std::size_t b = 0; b < kb.size(); ++b) {
    const auto v = kb[b].to_vector();
    for (std::size_t i = 0; i < v.size(); ++i, d.count(ref[b][i]))
      if (!close(static_cast<double>(v[i]), ref[b][i], t))
        d.add("b" + std::to_string(b) + "[" + std::to_string(i) + "]", double(v[i]), ref[b][i]);
  }
}

template <int S>
std::string describe(const drawn& c, const kiln::device& dev) {
  using T = elem_t<S>;
  constexpr bool fl = floating_v<T>;
  std::ostringstream o;
  const auto seed = Catch::rngSeed();
  o << "fuzz case " << c.number << " of --rng-seed " << seed << " on " << dev.str()
    << " (replay: KILN_FUZZ_CASE=" << c.number << " test_fuzz --rng-seed " << seed << ")\n"
    << "tree " << S << ", " << type_name<T>() << ", " << kind_name(c.k)
    << (c.big      ? " (large)"
        : c.medium ? " (medium)"
                   : "")
    << (c.specials ? ", NaN/inf drawn" : "") << ", output shape " << str(c.out) << "\n";
  const char* tn = type_name<T>();
  o << "  kiln::device dev(\"" << dev.str() << "\");\n  const " << tn << " c = " << num(c.c)
    << ", cpos = " << num(c.cpos) << ";\n";
  for (std::size_t b = 0; b < c.bufs.size(); ++b) {
    o << "  auto b" << b << " = kiln::from<" << tn << ">(";
    if (c.bufs[b].size() <= 1000) {
      o << "{";
      for (std::size_t i = 0; i < c.bufs[b].size(); ++i)
        o << (i ? ", " : "") << num(c.bufs[b][i].v);
      o << "}";
    } else {
      o << "/* " << c.bufs[b].size() << " values drawn from the seed */";
    }
    o << ", kiln::shape{" << c.bufs[b].size() << "}, dev);\n";
  }
  for (int i = 0; i < 4; ++i) {
    const view_spec& v = c.src[c.slot[i]];
    o << "  auto L" << i << " = " << v.code("b" + std::to_string(v.buffer)) << ";\n";
  }
  if (c.k == kind::multi)
    for (int i = 0; i < 4; ++i) {
      const view_spec& v = c.src[c.slot2[i]];
      o << "  auto M" << i << " = " << v.code("b" + std::to_string(v.buffer)) << ";\n";
    }
  const std::string e1 = tree<seed1<S>, 3>(print_dom<fl>{}, leaf_names);
  auto target = [&](const char* name, const view_spec& v) {
    o << "  kiln::tensor<" << tn << "> " << name << " = " << v.code("b" + std::to_string(v.buffer))
      << ";\n";
  };
  switch (c.k) {
  case kind::fresh:
    o << "  kiln::tensor<" << tn << "> r = " << e1 << ";\n";
    break;
  case kind::assign:
    target("A", c.ta);
    o << "  A = " << e1 << ";\n";
    break;
  case kind::reduce_a:
  case kind::reduce_b:
    o << "  auto r = " << c.reduction << ".eval();\n";
    break;
  case kind::product:
    if (c.wshape.empty()) {
      o << "  kiln::tensor<" << tn << "> r = " << e1 << ";\n";
      break;
    }
    o << "  auto W = kiln::from<" << tn << ">({";
    for (std::size_t i = 0; i < c.w.size(); ++i)
      o << (i ? ", " : "") << num(c.w[i]);
    o << "}, kiln::shape" << str(c.wshape) << ", dev);\n  kiln::tensor<" << tn
      << "> r = " << tree<seed1<S>, 1>(print_dom<fl>{}, leaf_names) << " - kiln::matmul("
      << tree<seed2<S>, 2>(print_dom<fl>{}, leaf_names) << ", W) * c;\n";
    break;
  case kind::multi:
    target("A", c.ta);
    target("B", c.tb);
    o << "  kiln::eval(A = " << e1
      << ",\n             B = " << tree<seed2<S>, 2>(print_dom<fl>{}, leaf_names2) << ");\n";
    break;
  }
  return o.str();
}

template <red RK, int S, class KD, class RD, class KL, class RL>
void run_reduce(runner& r, const KD& kd, const RD& rd, const KL& L, const RL& R, const arith& t,
                differences& d) {
  constexpr bool fl = RD::floating;
  const dense x = tree<seed1<S>, 3>(rd, R);
  const int rank = int(x.shape.size());
  kiln::axes ax;
  std::vector<bool> mask(rank, true);
  std::string axes_text = "{}";
  const int mode = rank == 0 ? 0 : r.pick(0, rank >= 2 ? 2 : 1);
  if (mode > 0) {
    ax.everything = false;
    mask.assign(rank, false);
    axes_text = "{";
    for (int k = 0; k < mode; ++k) {
      int a = r.pick(0, rank - 1);
      while (mask[a])
        a = (a + 1) % rank;
      mask[a] = true;
      const std::int64_t named = r.pick(0, 1) ? a : a - rank; // either way round
      ax.list.push_back(named);
      axes_text += (k ? ", " : "") + std::to_string(named);
    }
    axes_text += "}";
  }
  bool keep = r.pick(0, 1);
  // Sometimes the reduction stands inside an expression, x - R(x, axes, true): kiln computes
  // it first, then fuses the rest.
  constexpr bool same_kind =
      RK == red::sum || RK == red::prod || RK == red::mean || RK == red::max || RK == red::min;
  const bool inside = same_kind && r.pick(0, 2) == 0;
  keep |= inside;
  const std::string e1 = tree<seed1<S>, 3>(print_dom<fl>{}, leaf_names);
  r.c.reduction = std::string("kiln::") + red_name(RK) + "(" + e1 + ", kiln::axes" + axes_text +
                  ", " + (keep ? "true" : "false") + ")";
  auto e = kreduce<RK>(tree<seed1<S>, 3>(kd, L), ax, keep);
  using Res = typename decltype(e)::value_type;
  const reduced want = reduce(x, RK, mask, keep, t, arith_of<Res>());
  auto expect_error = [&](const auto& expr) {
    try {
      const kiln::tensor<kiln::value_t<decltype(expr)>> got = expr;
      d.note("no error for a reduction over an empty axis");
    } catch (const kiln::error&) {
    }
  };
  if constexpr (same_kind) {
    if (inside) {
      r.c.reduction = "(" + e1 + " - " + r.c.reduction + ")";
      const auto e2 = tree<seed1<S>, 3>(kd, L) - e;
      using V = kiln::value_t<decltype(e2)>;
      if (want.error) return expect_error(e2);
      const ops o{arith_of<V>()};
      const dense want2 =
          map_n({&x, &want.out}, [&](const std::vector<val>& v) { return o.sub(v[0], v[1]); });
      const kiln::tensor<V> got = e2;
      return compare_tensor(got, want2, arith_of<V>(), d);
    }
  }
  if (want.error) return expect_error(e);
  const kiln::tensor<Res> got = e;
  compare_tensor(got, want.out, arith_of<Res>(), d, want.ok.empty() ? nullptr : &want.ok);
}

// Runs a statement over views of the buffers kb as a captured plan (kiln::capture, the
// buffers its arguments): the capture computes it once, the buffers get their first values
// back, and a replay computes it again, to be compared as the statement run as written (on
// the host and on the device alike).
template <class T, class F>
void replay_captured(std::vector<kiln::tensor<T>>& kb, F&& statement) {
  std::vector<kiln::tensor<T>> first;
  for (const auto& b : kb)
    first.push_back(b.clone()); // (on the buffers' device)
  using t = kiln::tensor<T>;
  auto plan = kiln::capture([&](t&, t&, t&, t&, t&) { statement(); }, {.name = "fuzz case"});
  REQUIRE(kb.size() <= 5); // (three sources, two targets at most: draw_case)
  const auto at = [&](std::size_t i) -> t& { return kb[std::min(i, kb.size() - 1)]; };
  plan(at(0), at(1), at(2), at(3), at(4));
  for (std::size_t i = 0; i < kb.size(); ++i)
    kb[i] = first[i]; // (values written back into the same memory)
  plan(at(0), at(1), at(2), at(3), at(4));
}

template <int S>
void run_case(runner& r, std::string& problem, std::string& description) {
  using T = elem_t<S>;
  constexpr bool fl = floating_v<T>;
  drawn& c = r.c;
  r.draw_case<T>(fl);
  const arith t = arith_of<T>();
  std::vector<kiln::tensor<T>> kb;
  differences d;
  auto refbufs = c.bufs;
  try {
    for (auto& b : c.bufs) {
      std::vector<T> v(b.size());
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<T>(b[i].v);
      kb.push_back(kiln::from(v, kiln::shape{std::int64_t(v.size())}).to(r.dev));
    }
    std::array<kiln::tensor<T>, 4> L;
    std::array<dense, 4> R;
    for (int i = 0; i < 4; ++i) {
      const view_spec& v = c.src[c.slot[i]];
      L[i] = v.make(kb[v.buffer]);
      R[i] = read_view(c.bufs[v.buffer], v);
    }
    std::array<kiln::tensor<T>, 4> M; // the second tree's leaves
    std::array<dense, 4> RM;
    if (c.k == kind::multi)
      for (int i = 0; i < 4; ++i) {
        const view_spec& v = c.src[c.slot2[i]];
        M[i] = v.make(kb[v.buffer]);
        RM[i] = read_view(c.bufs[v.buffer], v);
      }
    const kiln_dom<T> kd{static_cast<T>(c.c), static_cast<T>(c.cpos)};
    const ref_dom<fl> rd{ops{t}, c.c, c.cpos};
    switch (c.k) {
    case kind::fresh: {
      const dense want = tree<seed1<S>, 3>(rd, R);
      const kiln::tensor<T> got = tree<seed1<S>, 3>(kd, L);
      compare_tensor(got, want, t, d);
      break;
    }
    case kind::assign: {
      kiln::tensor<T> A = c.ta.make(kb[c.ta.buffer]);
      const dense want = tree<seed1<S>, 3>(rd, R);
      if (r.captured)
        replay_captured(kb, [&] { A = tree<seed1<S>, 3>(kd, L); });
      else
        A = tree<seed1<S>, 3>(kd, L);
      write_view(refbufs[c.ta.buffer], c.ta, want);
      break;
    }
    case kind::reduce_a:
      run_reduce<red_a<S>, S>(r, kd, rd, L, R, t, d);
      break;
    case kind::reduce_b:
      run_reduce<red_b<S>, S>(r, kd, rd, L, R, t, d);
      break;
    case kind::product: {
      // tree1 - matmul(tree2, W) * c: tree2 read by the product's prologue, the rest its
      // epilogue. A rank-0 or too large an operand: the first tree alone.
      const dense x = tree<seed2<S>, 2>(rd, R);
      const std::int64_t q = x.shape.empty() ? 0 : x.shape.back(), n = c.out.back();
      c.wshape.clear();
      if (x.shape.empty() || q * n > (1 << 16) || count(x.shape) * n > (1 << 24)) {
        compare_tensor(kiln::tensor<T>(tree<seed1<S>, 3>(kd, L)), tree<seed1<S>, 3>(rd, R), t, d);
        break;
      }
      c.wshape = {q, n};
      c.w.assign(std::size_t(q * n), 0);
      std::vector<T> wv;
      dense wd{c.wshape, {}};
      for (auto& v : c.w) {
        v = fl ? r.pick(-8, 8) / 8.0 : r.pick(std::is_signed_v<T> ? -3 : 0, 3);
        wv.push_back(static_cast<T>(v));
        wd.x.push_back({v, 0});
      }
      const auto W = kiln::from(wv, kiln::shape{q, n}).to(r.dev);
      const double u_acc = std::is_same_v<T, double> ? 0x1p-53 : 0x1p-24;
      const dense want = rd.scale_sub(tree<seed1<S>, 1>(rd, R), matmul_ref(ops{t}, x, wd, u_acc));
      const kiln::tensor<T> got =
          kd.scale_sub(tree<seed1<S>, 1>(kd, L), kiln::matmul(tree<seed2<S>, 2>(kd, L), W));
      compare_tensor(got, want, t, d);
      break;
    }
    case kind::multi: {
      kiln::tensor<T> A = c.ta.make(kb[c.ta.buffer]);
      kiln::tensor<T> B = c.tb.make(kb[c.tb.buffer]);
      const dense want1 = tree<seed1<S>, 3>(rd, R), want2 = tree<seed2<S>, 2>(rd, RM);
      const auto both = [&] {
        kiln::eval(A = tree<seed1<S>, 3>(kd, L), B = tree<seed2<S>, 2>(kd, M));
      };
      if (r.captured)
        replay_captured(kb, both);
      else
        both();
      write_view(refbufs[c.ta.buffer], c.ta, want1); // in order: B's writes win
      write_view(refbufs[c.tb.buffer], c.tb, want2);
      break;
    }
    }
    compare_buffers(kb, refbufs, t, d);
  } catch (const std::exception& e) {
    d.note(std::string("threw: ") + e.what());
  }
  r.compared += d.compared;
  r.unbounded += d.unbounded;
  if (d.n > 0) {
    description = describe<S>(c, r.dev);
    problem = std::string(r.captured ? "(replayed from a captured plan) " : "") +
              std::to_string(d.n) + " difference(s):\n" + d.text;
  }
}

template <int... S>
void dispatch(int tree, runner& r, std::string& problem, std::string& description,
              std::integer_sequence<int, S...>) {
  ((tree == S ? run_case<S>(r, problem, description) : void()), ...);
}

std::uint64_t case_seed(long i) {
  std::uint64_t z = std::uint64_t(Catch::rngSeed()) * 0x9e3779b97f4a7c15ull + std::uint64_t(i);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <int... S>
std::string describe_any(int tree, const drawn& c, const kiln::device& dev,
                         std::integer_sequence<int, S...>) {
  std::string s;
  ((tree == S ? (void)(s = describe<S>(c, dev)) : void()), ...);
  return s;
}

// Cases until the time is up (or only case KILN_FUZZ_CASE); at most three failures reported.
void fuzz_on(const kiln::device& dev) {
  const settings set;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::array<long, 6> per_kind{};
  long n = 0, large = 0, failures = 0, compared = 0, unbounded = 0, replayed = 0;
  // Cases with more than 10% of values unbounded (a product over millions of elements
  // overflows in every output) are counted apart: one such large case outweighs a thousand.
  long degenerate = 0, compared_rest = 0, unbounded_rest = 0;
  for (long i = std::max(0L, set.only);; ++i) {
    if (set.only >= 0 ? i > set.only : elapsed() > set.seconds) break;
    runner r{std::mt19937_64(case_seed(i)), {}, dev, set};
    r.c.number = i;
    r.c.big = set.big && i % (dev.is_host() ? 150 : 40) == 5;
    r.c.medium = i % 5 == 2;
    r.captured = i % 3 == 1; // (assignments and two-output evals)
    const int tree = r.pick(0, n_trees - 1);
    std::string problem, description;
    dispatch(tree, r, problem, description, std::make_integer_sequence<int, n_trees>{});
    ++n;
    ++per_kind[static_cast<int>(r.c.k)];
    replayed += r.captured && (r.c.k == kind::assign || r.c.k == kind::multi);
    large += r.c.big;
    compared += r.compared;
    unbounded += r.unbounded;
    if (r.unbounded * 10 > r.compared) {
      ++degenerate;
    } else {
      compared_rest += r.compared;
      unbounded_rest += r.unbounded;
    }
    if (set.only >= 0)
      std::cout << describe_any(tree, r.c, dev, std::make_integer_sequence<int, n_trees>{});
    if (!problem.empty()) {
      FAIL_CHECK(description << problem);
      if (++failures == 3) break;
    }
  }
  std::cout << "fuzz on " << dev.str() << ": " << n << " cases in " << elapsed() << " s (" << large
            << " large; new tensor " << per_kind[0] << ", assign " << per_kind[1] << ", reductions "
            << per_kind[2] + per_kind[3] << ", two-output " << per_kind[4] << ", products "
            << per_kind[5] << "; " << replayed << " replayed from captured plans); " << compared
            << " values compared, " << unbounded
            << " with no bound (a comparison too close to call); " << degenerate
            << " cases with over 10% without bounds" << std::endl;
  CHECK(n > 0);
  // The bounds must leave most values checked, or the fuzzer checks little: in all but a few
  // cases, and in those most values. (Counted over all values, one large case whose every
  // value overflows, of 5 million values, failed a run of few cases on a loaded machine; with
  // "mostly" at one half, x - prod(x) over 4.6 million floats, half its values unbounded, failed
  // a run of 1056 cases.)
  CHECK(degenerate <= 1 + n / 50); // one allowed however few cases the time allowed
  CHECK(unbounded_rest * 50 <= compared_rest);
}

} // namespace

TEST_CASE("fuzz: random expressions on the host against a double-precision reference", "[fuzz]") {
  fuzz_on(kiln::device{});
}

TEST_CASE("fuzz: random expressions on vulkan:0 against a double-precision reference",
          "[fuzz][vulkan]") {
  if (const kiln::device* dev = vulkan_or_skip()) fuzz_on(*dev);
}
