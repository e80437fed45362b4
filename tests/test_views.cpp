// Views: no copies, the right elements (checked by index arithmetic written here), and
// writes through a view land in the viewed storage.
#include "support.hpp"

namespace {
// Element (i, j, k) of a row-major [a, b, c] array holding 0, 1, 2, ...
double at3(std::int64_t b, std::int64_t c, std::int64_t i, std::int64_t j, std::int64_t k) {
  return double((i * b + j) * c + k);
}
} // namespace

TEST_CASE("reshape is a view when the layout allows, an error otherwise", "[views]") {
  const auto t = kiln::arange<double>(0, 24).reshape({2, 3, 4});
  REQUIRE(t.shape() == kiln::shape{2, 3, 4});
  const auto r = t.reshape({4, -1});
  CHECK(r.shape() == kiln::shape{4, 6});
  CHECK(r.data() == t.data());
  CHECK(r.at({3, 5}) == 23);
  // A transposed matrix regroups only along contiguous runs.
  const auto tt = t.permute({0, 2, 1}); // [2, 4, 3]
  CHECK(tt.reshape({2, 4, 3, 1}).data() == t.data());
  CHECK_THROWS_WITH(tt.reshape({2, 12}), Catch::Contains("contiguous()"));
  CHECK(tt.contiguous().reshape({2, 12}).at({1, 4}) == at3(3, 4, 1, 1, 1)); // (1, k=1, j=1)
  // Every other column: the elements are evenly spaced, so even a flat view exists.
  const auto s = t.slice(2, 0, 4, 2); // [2, 3, 2], strides [12, 4, 2]
  CHECK(s.reshape({6, 2}).at({5, 1}) == at3(3, 4, 1, 2, 2));
  CHECK(s.reshape({12}).at({11}) == 22);
  CHECK(s.reshape({12}).strides() == kiln::strides{2});
  // Dropping the first column leaves gaps between rows: rows can merge, not flatten.
  const auto g = t.slice(2, 1, 4); // [2, 3, 3], strides [12, 4, 1]
  CHECK_THROWS_WITH(g.reshape({18}), Catch::Contains("contiguous()"));
  CHECK(g.reshape({2, 3, 3, 1}).data() == g.data());
}

TEST_CASE("transpose, permute, narrow, slice and select pick the right elements", "[views]") {
  for (int rep = 0; rep < 20; ++rep) {
    const std::int64_t A = test::draw(1, 5), B = test::draw(1, 6), C = test::draw(1, 7);
    const auto t = kiln::arange<double>(0, double(A * B * C)).reshape({A, B, C});
    const auto p = t.permute({2, 0, 1});
    const auto tr = t.transpose();
    const std::int64_t st = test::draw(-3, 3) | 1; // odd, non-zero step
    const std::int64_t start = test::draw(-int(C), int(C)), stop = test::draw(-int(C), int(C) + 2);
    const auto sl = t.slice(2, start, stop, st);
    // numpy's slice length rule, written independently.
    auto norm = [&](std::int64_t v, bool is_stop) {
      if (v < 0) v += C;
      if (st > 0) return std::clamp<std::int64_t>(v, 0, C);
      return std::clamp<std::int64_t>(v, -1, C - 1) + (is_stop ? 0 : 0);
    };
    const std::int64_t s0 = norm(start, false), s1 = norm(stop, true);
    std::vector<std::int64_t> ks;
    for (std::int64_t k = s0; st > 0 ? k < s1 : k > s1; k += st)
      ks.push_back(k);
    REQUIRE(sl.shape() == kiln::shape{A, B, std::int64_t(ks.size())});
    const std::int64_t n0 = test::draw(0, int(B) - 1), len = test::draw(0, int(B - n0));
    const auto nr = t.narrow(1, n0, len);
    REQUIRE(nr.shape() == kiln::shape{A, len, C});
    for (std::int64_t i = 0; i < A; ++i)
      for (std::int64_t j = 0; j < B; ++j)
        for (std::int64_t k = 0; k < C; ++k) {
          REQUIRE(p.at({k, i, j}) == at3(B, C, i, j, k));
          REQUIRE(tr.at({k, j, i}) == at3(B, C, i, j, k));
          if (j < len) REQUIRE(nr.at({i, j, k}) == at3(B, C, i, n0 + j, k));
        }
    for (std::int64_t i = 0; i < A; ++i)
      for (std::int64_t j = 0; j < B; ++j)
        for (std::size_t q = 0; q < ks.size(); ++q)
          REQUIRE(sl.at({i, j, std::int64_t(q)}) == at3(B, C, i, j, ks[q]));
    // Values through an expression over the view match too.
    const auto v = kiln::tensor<double>(sl * 2.0).to_vector();
    for (std::size_t q = 0; q < v.size(); ++q) {
      const std::int64_t i = q / (B * ks.size()), j = (q / ks.size()) % B;
      REQUIRE(v[q] == 2 * at3(B, C, i, j, ks[q % ks.size()]));
    }
  }
}

TEST_CASE("indexing with integers, ranges, all and newaxis", "[views]") {
  const auto t = kiln::arange<std::int32_t>(0, 60).reshape({3, 4, 5});
  const auto a = t(1, kiln::all, kiln::range{1, 5, 2}); // [4, 2]
  REQUIRE(a.shape() == kiln::shape{4, 2});
  for (int j = 0; j < 4; ++j)
    for (int q = 0; q < 2; ++q)
      CHECK(a.at({j, q}) == (1 * 4 + j) * 5 + 1 + 2 * q);
  const auto b = t(-1, kiln::newaxis, 2); // last block, new axis, row 2: [1, 5]
  REQUIRE(b.shape() == kiln::shape{1, 5});
  CHECK(b.at({0, 4}) == (2 * 4 + 2) * 5 + 4);
  const auto c = t(kiln::range{}, kiln::range{-1, -5, -1}); // reversed dim 1
  REQUIRE(c.shape() == kiln::shape{3, 4, 5});
  CHECK(c.at({0, 0, 0}) == 15);
  const auto d = t(2, 3, 4);
  CHECK(d.rank() == 0);
  CHECK(d.item() == 59);
  CHECK_THROWS_AS(t(0, 0, 0, 0), kiln::error);
  CHECK_THROWS_AS(t(3), kiln::error);
  CHECK_THROWS_AS(t(0, -5), kiln::error);
}

TEST_CASE("squeeze, unsqueeze, broadcast_to", "[views]") {
  const auto t = kiln::arange<float>(0, 6).reshape({1, 2, 1, 3});
  CHECK(t.squeeze().shape() == kiln::shape{2, 3});
  CHECK(t.squeeze(2).shape() == kiln::shape{1, 2, 3});
  CHECK(t.squeeze(-4).shape() == kiln::shape{2, 1, 3});
  const auto u = t.squeeze().unsqueeze(1).unsqueeze(-1);
  CHECK(u.shape() == kiln::shape{2, 1, 3, 1});
  CHECK(u.at({1, 0, 2, 0}) == 5);
  const auto row = kiln::arange<float>(0, 3);
  const auto bc = row.broadcast_to({4, 3});
  CHECK(bc.strides() == kiln::strides{0, 1});
  CHECK(bc.data() == row.data());
  CHECK(bc.at({3, 2}) == 2);
  CHECK_THROWS_AS(row.broadcast_to({4, 2}), kiln::error);
  CHECK_THROWS_AS(t.squeeze(1), kiln::error);
}

TEST_CASE("contiguous and clone", "[views]") {
  const auto t = kiln::arange<float>(0, 12).reshape({3, 4});
  CHECK(t.contiguous().data() == t.data());
  const auto tt = t.transpose();
  CHECK_FALSE(tt.is_contiguous());
  const auto c = tt.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.data() != t.data());
  CHECK(c.to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  auto k = t.clone();
  k = 1.0f;
  CHECK(t.at({0, 0}) == 0);
}

TEST_CASE("writing through a view writes the underlying storage", "[views]") {
  auto t = kiln::zeros<double>({4, 5});
  const auto src = test::uniform<double>(10, -1, 1);
  const auto s = kiln::from(src, kiln::shape{2, 5});
  t.narrow(0, 1, 2) = s * 2.0;                   // rows 1..2
  t(kiln::all, 0) = 7.0;                         // column 0 (a scalar fill)
  t.transpose()(4, kiln::range{0, 4, 3}) = -1.0; // t[0, 4] and t[3, 4]
  auto v = t(3, kiln::range{1, 3});
  v = v + 5.0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      double e = 0;
      if (i >= 1 && i <= 2) e = 2 * src[(i - 1) * 5 + j];
      if (j == 0) e = 7;
      if (j == 4 && (i == 0 || i == 3)) e = -1;
      if (i == 3 && (j == 1 || j == 2)) e = 5;
      INFO(i << "," << j);
      CHECK(t.at({i, j}) == e);
    }
  // A view of a view of a view still writes the original.
  auto w = t.reshape({20}).slice(0, 19, -21, -4)(kiln::range{0, 2}); // elements 19, 15
  w = 100.0;
  CHECK(t.at({3, 4}) == 100.0);
  CHECK(t.at({3, 0}) == 100.0);
}

// A pending assignment holds a named target by reference and copies a temporary one (a
// view): kept in a variable, it still writes the view's elements after the view's handle
// is gone; assigning to std::move(t) leaves t's handle as it was.
TEST_CASE("a pending assignment outlives its view, and std::move(t) = e keeps t", "[views]") {
  const auto src = test::uniform<double>(6, -1, 1);
  const auto s = kiln::from(src, kiln::shape{2, 3});
  auto t = kiln::zeros<double>({4, 3});
  {
    const auto pending = (t.narrow(0, 2, 2) = s * 3.0); // the view handle ends here
    CHECK(t.at({2, 0}) == 0.0);                         // not run yet
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) {
      INFO(i << "," << j);
      CHECK(t.at({i, j}) == (i >= 2 ? 3.0 * src[std::size_t((i - 2) * 3 + j)] : 0.0));
    }
  auto u = kiln::zeros<double>({2, 3});
  const double* before = u.data();
  std::move(u) = s + 1.0;
  REQUIRE_FALSE(u.empty());
  CHECK(u.data() == before);
  for (int k = 0; k < 6; ++k)
    CHECK(u.data()[k] == src[std::size_t(k)] + 1.0);
}

// --- Random chains of views against a reference that tracks, for every element of the
// view, the storage offset numpy's semantics give it (index arithmetic written here).
namespace {

struct ref_view {
  kiln::shape shape;
  std::vector<std::int64_t> off; // storage offset of each element, row-major
};

ref_view identity_ref(const kiln::shape& s) {
  ref_view r{s, std::vector<std::int64_t>(std::size_t(kiln::numel(s)))};
  for (std::size_t k = 0; k < r.off.size(); ++k)
    r.off[k] = std::int64_t(k);
  return r;
}

std::int64_t flat(const kiln::shape& s, const std::vector<std::int64_t>& idx) {
  std::int64_t f = 0;
  for (int d = 0; d < s.size(); ++d)
    f = f * s[d] + idx[d];
  return f;
}

// A new view of shape ns whose element at `idx` is r's element at old_index(idx).
template <class F>
ref_view remap(const ref_view& r, const kiln::shape& ns, F old_index) {
  ref_view out{ns, {}};
  const std::int64_t n = kiln::numel(ns);
  out.off.reserve(std::size_t(n));
  std::vector<std::int64_t> idx(std::size_t(ns.size()), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    out.off.push_back(r.off[std::size_t(flat(r.shape, old_index(idx)))]);
    test::next_index(idx, ns);
  }
  return out;
}

// Whether any strides give the elements of r, in row-major order, the shape ns.
bool viewable(const ref_view& r, const kiln::shape& ns) {
  const std::int64_t n = kiln::numel(ns);
  if (n <= 1) return true;
  std::vector<std::int64_t> st(std::size_t(ns.size()), 0);
  std::vector<std::int64_t> idx(std::size_t(ns.size()), 0);
  for (int d = 0; d < ns.size(); ++d)
    if (ns[d] > 1) {
      idx[d] = 1;
      st[d] = r.off[std::size_t(flat(ns, idx))] - r.off[0];
      idx[d] = 0;
    }
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t o = r.off[0];
    for (int d = 0; d < ns.size(); ++d)
      o += idx[d] * st[d];
    if (o != r.off[std::size_t(k)]) return false;
    test::next_index(idx, ns);
  }
  return true;
}

// One view step, drawn for the current shape.
struct view_op {
  enum kind_t { transpose, permute, narrow, slice, select, unsqueeze, squeeze, reshape } kind;
  std::int64_t dim = 0, a = 0, b = 0, step = 1;
  std::vector<std::int64_t> perm;
  kiln::shape target;
};

// A random shape with numel n (n > 0): n's prime factors spread over 1..4 dims, with
// extents of 1 put in, and sometimes one extent given as -1.
kiln::shape random_factoring(std::int64_t n) {
  std::vector<std::int64_t> primes;
  for (std::int64_t p = 2; n > 1; ++p)
    while (n % p == 0) {
      primes.push_back(p);
      n /= p;
    }
  kiln::shape s(test::draw(1, 4), 1);
  for (auto p : primes)
    s[test::draw(0, s.size() - 1)] *= p;
  while (s.size() < 6 && test::draw(0, 2) == 0)
    s.insert(test::draw(0, s.size()), 1);
  if (test::draw(0, 3) == 0) s[test::draw(0, s.size() - 1)] = -1;
  return s;
}

view_op random_op(const kiln::shape& s) {
  view_op op{};
  const int r = s.size();
  const int pick = test::draw(0, 7);
  auto any_dim = [&] { return std::int64_t(test::draw(-r, r - 1)); };
  auto at = [&](std::int64_t d) { return s[int(d < 0 ? d + r : d)]; };
  if (r == 0 || (pick == 5 && r < 7)) { // at most rank 7 (permute below spells out 7)
    op.kind = view_op::unsqueeze;
    op.dim = test::draw(-r - 1, r);
  } else if (pick == 0 || pick == 5) {
    op.kind = view_op::transpose;
  } else if (pick == 1) {
    op.kind = view_op::permute;
    for (int d = 0; d < r; ++d)
      op.perm.push_back(d);
    std::shuffle(op.perm.begin(), op.perm.end(), test::rng());
    for (auto& p : op.perm)
      if (test::draw(0, 1)) p -= r; // negative axes too
  } else if (pick == 2) {
    op.kind = view_op::narrow;
    op.dim = any_dim();
    const std::int64_t n = at(op.dim);
    op.a = test::draw(0, int(n));
    op.b = test::draw(0, int(n - op.a));
    if (op.a < n && test::draw(0, 1)) op.a -= n; // negative start
  } else if (pick == 3) {
    op.kind = view_op::slice;
    op.dim = any_dim();
    const int n = int(at(op.dim));
    op.a = test::draw(-n - 3, n + 3);
    op.b = test::draw(-n - 3, n + 3);
    do
      op.step = test::draw(-4, 4);
    while (op.step == 0);
  } else if (pick == 4) {
    op.kind = view_op::select;
    op.dim = any_dim();
    const int n = int(at(op.dim));
    if (n == 0) return random_op(kiln::shape{}); // nothing to select: unsqueeze instead
    op.a = test::draw(-n, n - 1);
  } else if (pick == 6) {
    op.kind = view_op::squeeze;
    op.dim = -100; // all extent-1 dims, unless one is picked below
    for (int d = 0; d < r; ++d)
      if (s[d] == 1 && test::draw(0, 1)) op.dim = d;
  } else {
    op.kind = view_op::reshape;
    const std::int64_t n = kiln::numel(s);
    op.target = n > 0 ? random_factoring(n) : kiln::shape{test::draw(1, 3), 0, test::draw(1, 3)};
  }
  return op;
}

kiln::shape resolved(kiln::shape t, std::int64_t n) {
  std::int64_t known = 1;
  for (auto e : t)
    if (e != -1) known *= e;
  for (auto& e : t)
    if (e == -1) e = n / known;
  return t;
}

// The reference of one step; false if kiln must refuse it (a reshape that no strides give).
bool apply_ref(ref_view& r, const view_op& op) {
  const kiln::shape s = r.shape;
  const int rank = s.size();
  auto norm = [&](std::int64_t d, int n) { return int(d < 0 ? d + n : d); };
  switch (op.kind) {
  case view_op::transpose: {
    kiln::shape ns(s.begin(), s.end());
    std::reverse(ns.begin(), ns.end());
    r = remap(r, ns, [&](const auto& idx) {
      std::vector<std::int64_t> o(idx.rbegin(), idx.rend());
      return o;
    });
    return true;
  }
  case view_op::permute: {
    kiln::shape ns = s;
    for (int i = 0; i < rank; ++i)
      ns[i] = s[norm(op.perm[i], rank)];
    r = remap(r, ns, [&](const auto& idx) {
      std::vector<std::int64_t> o(idx.size());
      for (int i = 0; i < rank; ++i)
        o[norm(op.perm[i], rank)] = idx[i];
      return o;
    });
    return true;
  }
  case view_op::narrow: {
    const int d = norm(op.dim, rank);
    const std::int64_t start = op.a < 0 ? op.a + s[d] : op.a;
    kiln::shape ns = s;
    ns[d] = op.b;
    r = remap(r, ns, [&](auto idx) {
      idx[d] += start;
      return idx;
    });
    return true;
  }
  case view_op::slice: {
    const int d = norm(op.dim, rank);
    const auto ks = test::slice_indices(s[d], op.a, op.b, op.step);
    kiln::shape ns = s;
    ns[d] = std::int64_t(ks.size());
    r = remap(r, ns, [&](auto idx) {
      idx[d] = ks[std::size_t(idx[d])];
      return idx;
    });
    return true;
  }
  case view_op::select: {
    const int d = norm(op.dim, rank);
    const std::int64_t i = op.a < 0 ? op.a + s[d] : op.a;
    kiln::shape ns = s;
    ns.erase(d);
    r = remap(r, ns, [&](auto idx) {
      idx.insert(idx.begin() + d, i);
      return idx;
    });
    return true;
  }
  case view_op::unsqueeze: {
    const int d = norm(op.dim, rank + 1);
    kiln::shape ns = s;
    ns.insert(d, 1);
    r = remap(r, ns, [&](auto idx) {
      idx.erase(idx.begin() + d);
      return idx;
    });
    return true;
  }
  case view_op::squeeze: {
    kiln::shape ns;
    std::vector<int> kept;
    for (int d = 0; d < rank; ++d)
      if (!(s[d] == 1 && (op.dim == -100 || op.dim == d))) {
        ns.push_back(s[d]);
        kept.push_back(d);
      }
    r = remap(r, ns, [&](const auto& idx) {
      std::vector<std::int64_t> o(std::size_t(rank), 0);
      for (std::size_t i = 0; i < kept.size(); ++i)
        o[kept[i]] = idx[i];
      return o;
    });
    return true;
  }
  case view_op::reshape: {
    const kiln::shape ns = resolved(op.target, kiln::numel(s));
    if (!viewable(r, ns)) return false;
    r.shape = ns;
    return true;
  }
  }
  return true;
}

kiln::tensor<double> apply_op(const kiln::tensor<double>& t, const view_op& op) {
  switch (op.kind) {
  case view_op::transpose:
    return t.transpose();
  case view_op::permute:
    switch (op.perm.size()) { // permute takes an initializer_list
    case 1:
      return t.permute({op.perm[0]});
    case 2:
      return t.permute({op.perm[0], op.perm[1]});
    case 3:
      return t.permute({op.perm[0], op.perm[1], op.perm[2]});
    case 4:
      return t.permute({op.perm[0], op.perm[1], op.perm[2], op.perm[3]});
    case 5:
      return t.permute({op.perm[0], op.perm[1], op.perm[2], op.perm[3], op.perm[4]});
    case 6:
      return t.permute({op.perm[0], op.perm[1], op.perm[2], op.perm[3], op.perm[4], op.perm[5]});
    default:
      return t.permute(
          {op.perm[0], op.perm[1], op.perm[2], op.perm[3], op.perm[4], op.perm[5], op.perm[6]});
    }
  case view_op::narrow:
    return t.narrow(op.dim, op.a, op.b);
  case view_op::slice: {
    // Through slice() or through operator() with kiln::all before the range.
    const kiln::range rg{op.a, op.b, op.step};
    const std::int64_t d = op.dim < 0 ? op.dim + t.rank() : op.dim;
    if (test::draw(0, 1)) return t.slice(op.dim, op.a, op.b, op.step);
    if (d == 0) return t(rg);
    if (d == 1) return t(kiln::all, rg);
    if (d == 2) return t(kiln::all, kiln::all, rg);
    if (d == 3) return t(kiln::all, kiln::all, kiln::all, rg);
    return t.slice(op.dim, op.a, op.b, op.step);
  }
  case view_op::select: {
    const std::int64_t d = op.dim < 0 ? op.dim + t.rank() : op.dim;
    if (test::draw(0, 1)) return t.narrow(op.dim, op.a, 1).squeeze(op.dim);
    if (d == 0) return t(op.a);
    if (d == 1) return t(kiln::all, op.a);
    if (d == 2) return t(kiln::all, kiln::all, op.a);
    if (d == 3) return t(kiln::all, kiln::all, kiln::all, op.a);
    return t.narrow(op.dim, op.a, 1).squeeze(op.dim);
  }
  case view_op::unsqueeze:
    return t.unsqueeze(op.dim);
  case view_op::squeeze:
    return op.dim == -100 ? t.squeeze() : t.squeeze(op.dim);
  case view_op::reshape:
    return t.reshape(op.target);
  }
  return t;
}

} // namespace

namespace {

// The view's elements sit at the reference's storage offsets, and read back (through the
// evaluator) as the values stored there (the base holds 0, 1, 2, ...).
void check_view(const kiln::tensor<double>& v, const ref_view& r,
                const kiln::tensor<double>& base) {
  REQUIRE(v.shape() == r.shape);
  REQUIRE(v.size() == std::int64_t(r.off.size()));
  if (v.size() == 0) return;
  REQUIRE(v.storage() == base.storage());
  std::vector<std::int64_t> idx(std::size_t(v.rank()), 0);
  for (std::size_t k = 0; k < r.off.size(); ++k) {
    std::int64_t o = v.data() - base.data();
    for (int d = 0; d < v.rank(); ++d)
      o += idx[d] * v.strides()[d];
    REQUIRE(o == r.off[k]);
    test::next_index(idx, v.shape());
  }
  // Values through the evaluator (clone() runs a strided pass into a new tensor).
  const auto vals = v.clone().to_vector();
  for (std::size_t k = 0; k < r.off.size(); ++k)
    REQUIRE(vals[k] == double(r.off[k]));
}

std::string describe(const view_op& op) {
  const char* names[] = {"transpose", "permute",   "narrow",  "slice",
                         "select",    "unsqueeze", "squeeze", "reshape"};
  std::string s = names[op.kind];
  s += "(dim " + std::to_string(op.dim) + ", " + std::to_string(op.a) + ", " +
       std::to_string(op.b) + ", step " + std::to_string(op.step);
  if (!op.perm.empty()) s += ", perm " + kiln::shape(op.perm.begin(), op.perm.end()).str();
  if (op.kind == view_op::reshape) s += ", to " + op.target.str();
  return s + ")";
}

kiln::tensor<double> iota(const kiln::shape& s) {
  std::vector<double> v(std::size_t(kiln::numel(s)));
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = double(k);
  return kiln::from(v, s);
}

} // namespace

TEST_CASE("random chains of views address the elements numpy's rules give", "[views]") {
  for (int iter = 0; iter < 400; ++iter) {
    const kiln::shape s = test::random_shape(1, 4, 6);
    const auto base = iota(s);
    ref_view r = identity_ref(s);
    // Handles are rebound by keeping each step's view (assigning a tensor writes values).
    std::vector<kiln::tensor<double>> views{base};
    std::string chain = "base " + s.str();
    const int steps = test::draw(1, 5);
    for (int k = 0; k < steps; ++k) {
      const view_op op = random_op(r.shape);
      chain += " -> " + describe(op);
      INFO(chain);
      ref_view next = r;
      if (!apply_ref(next, op)) {
        // No strides give this reshape: kiln must refuse, naming contiguous().
        const auto& t = views.back();
        REQUIRE_THROWS_WITH(apply_op(t, op), Catch::Contains("contiguous()"));
        const auto c = t.contiguous().reshape(op.target);
        REQUIRE(c.shape() == resolved(op.target, t.size()));
        const auto vals = c.to_vector();
        for (std::size_t q = 0; q < r.off.size(); ++q)
          REQUIRE(vals[q] == double(r.off[q]));
        break;
      }
      views.push_back(apply_op(views.back(), op));
      r = next;
      check_view(views.back(), r, base);
    }
    const auto& t = views.back();
    // clone() copies; contiguous() copies only when it must.
    INFO(chain);
    const auto c = t.clone();
    REQUIRE(c.is_contiguous());
    REQUIRE(c.shape() == t.shape());
    if (t.size() > 0) REQUIRE(c.storage() != t.storage());
    const auto cv = c.to_vector();
    for (std::size_t q = 0; q < r.off.size(); ++q)
      REQUIRE(cv[q] == double(r.off[q]));
    const auto ct = t.contiguous();
    REQUIRE(ct.is_contiguous());
    REQUIRE(ct.to_vector() == cv);
    bool dense = true; // row-major with unit steps, by the reference
    for (std::size_t q = 0; q < r.off.size() && t.storage() == base.storage(); ++q)
      dense = dense && r.off[q] == r.off[0] + std::int64_t(q);
    if (t.size() > 0 && t.storage() == base.storage() && dense) REQUIRE(ct.data() == t.data());
  }
}

TEST_CASE("writing through random views writes exactly the viewed elements", "[views]") {
  for (int iter = 0; iter < 300; ++iter) {
    const kiln::shape s = test::random_shape(1, 4, 6);
    const auto base = iota(s);
    ref_view r = identity_ref(s);
    std::vector<view_op> ops;
    const int steps = test::draw(1, 4);
    for (int k = 0; k < steps; ++k) {
      const view_op op = random_op(r.shape);
      ref_view next = r;
      if (!apply_ref(next, op)) break;
      ops.push_back(op);
      r = next;
    }
    auto replay = [&] {
      std::vector<kiln::tensor<double>> views{base};
      for (const auto& op : ops)
        views.push_back(apply_op(views.back(), op));
      return views.back();
    };
    std::string chain = "base " + s.str();
    for (const auto& op : ops)
      chain += " -> " + describe(op);
    const int mode = test::draw(0, 3);
    INFO(chain << ", write mode " << mode);
    auto v = replay();
    const auto vals = test::uniform<double>(std::size_t(v.size()), -100, 100);
    const auto src = kiln::from(vals, v.shape());
    const double* before = v.data();
    std::vector<double> expect = iota(s).to_vector();
    for (std::size_t k = 0; k < r.off.size(); ++k) {
      double& e = expect[std::size_t(r.off[k])];
      e = mode == 0 || mode == 1 ? vals[k] * 2.0 + 1.0 : mode == 2 ? 3.5 : e + vals[k];
    }
    if (mode == 0)
      v = src * 2.0 + 1.0; // through a named view
    else if (mode == 1)
      replay() = src * 2.0 + 1.0; // through a temporary view
    else if (mode == 2)
      v = 3.5;
    else
      v += src;
    REQUIRE(v.data() == before); // the view was written, not re-pointed
    REQUIRE(base.to_vector() == expect);
  }
}

namespace {
// The reference of one operator() argument, applied at `dim` as kiln documents it: an
// integer selects (dropping the dim), a range slices, all keeps a dim, newaxis inserts.
void ref_index(ref_view& r, int& dim, std::int64_t i) {
  view_op op{view_op::select, dim, i, 0, 1, {}, {}};
  apply_ref(r, op);
}
void ref_index(ref_view& r, int& dim, kiln::range g) {
  view_op op{view_op::slice, dim++, g.start, g.stop, g.step, {}, {}};
  apply_ref(r, op);
}
void ref_index(ref_view&, int& dim, kiln::all_t) { ++dim; }
void ref_index(ref_view& r, int& dim, kiln::newaxis_t) {
  view_op op{view_op::unsqueeze, dim++, 0, 0, 1, {}, {}};
  apply_ref(r, op);
}
// Whether kiln must accept the argument at `dim` (ref_index then moves dim on).
bool valid_index(const ref_view& r, int dim, std::int64_t i) {
  return dim < r.shape.size() && i >= -r.shape[dim] && i < r.shape[dim];
}
bool valid_index(const ref_view& r, int dim, kiln::range g) {
  return g.step != 0 && dim < r.shape.size();
}
bool valid_index(const ref_view& r, int dim, kiln::all_t) { return dim < r.shape.size(); }
bool valid_index(const ref_view&, int, kiln::newaxis_t) { return true; }

std::string arg(std::int64_t i) { return std::to_string(i); }
std::string arg(kiln::range g) {
  return "range{" + std::to_string(g.start) + ", " + std::to_string(g.stop) + ", " +
         std::to_string(g.step) + "}";
}
std::string arg(kiln::all_t) { return "all"; }
std::string arg(kiln::newaxis_t) { return "newaxis"; }

template <class... I>
void check_indexing(const kiln::tensor<double>& base, I... idx) {
  std::string call;
  ((call += arg(idx) + " "), ...);
  INFO("t(" << call << ") on shape " << base.shape().str());
  ref_view r = identity_ref(base.shape());
  int dim = 0;
  bool ok = true;
  {
    ref_view probe = r;
    int d = 0;
    // Validity first (left to right, as kiln applies them), then the reference.
    ((ok = ok && valid_index(probe, d, idx) && (ref_index(probe, d, idx), true)), ...);
  }
  if (!ok) {
    REQUIRE_THROWS_AS(base(idx...), kiln::error);
    return;
  }
  (ref_index(r, dim, idx), ...);
  check_view(base(idx...), r, base);
}

kiln::range random_range(const kiln::shape& s, int dim) {
  const int n = dim < s.size() ? int(s[dim]) : 3;
  kiln::range g{test::draw(-n - 2, n + 2), test::draw(-n - 2, n + 2), test::draw(-3, 3)};
  if (test::draw(0, 4) == 0) g.step = 0; // an error
  if (test::draw(0, 4) == 0) g = kiln::range{};
  if (test::draw(0, 4) == 0) g.stop = std::numeric_limits<std::int64_t>::min(); // numpy's None
  return g;
}
std::int64_t random_int(const kiln::shape& s, int dim) {
  const int n = dim < s.size() ? int(s[dim]) : 3;
  return test::draw(-n - 1, n); // sometimes out of range
}
} // namespace

TEST_CASE("operator() with random integers, ranges, all and newaxis", "[views]") {
  for (int iter = 0; iter < 300; ++iter) {
    const kiln::shape s = test::random_shape(0, 4, 6);
    const auto base = iota(s);
    INFO("shape " << s.str());
    switch (test::draw(0, 6)) {
    case 0:
      check_indexing(base, random_int(s, 0));
      break;
    case 1:
      check_indexing(base, random_range(s, 0));
      break;
    case 2:
      check_indexing(base, kiln::all, random_int(s, 1));
      break;
    case 3:
      check_indexing(base, kiln::newaxis, random_range(s, 0), random_int(s, 1));
      break;
    case 4:
      check_indexing(base, random_int(s, 0), kiln::newaxis, kiln::all, random_range(s, 2));
      break;
    case 5:
      check_indexing(base, random_range(s, 0), random_range(s, 1), kiln::newaxis, kiln::newaxis);
      break;
    default:
      check_indexing(base, kiln::all, kiln::all, kiln::all, random_int(s, 3));
      break;
    }
  }
}

TEST_CASE("broadcast_to random shapes: stride 0, shared storage, right values", "[views]") {
  for (int iter = 0; iter < 200; ++iter) {
    const kiln::shape s = test::random_shape(0, 3, 4);
    kiln::shape target;
    const int lead = test::draw(0, 2);
    for (int d = 0; d < lead; ++d)
      target.push_back(test::draw(1, 4));
    bool valid = true;
    for (auto e : s) {
      std::int64_t t = e;
      if (e == 1 && test::draw(0, 1)) t = test::draw(1, 5);
      if (e != 1 && test::draw(0, 9) == 0) t = e + 1, valid = false;
      target.push_back(t);
    }
    const auto base = iota(s);
    INFO(s.str() << " to " << target.str());
    if (!valid) {
      REQUIRE_THROWS_AS(base.broadcast_to(target), kiln::error);
      continue;
    }
    const auto b = base.broadcast_to(target);
    ref_view r = remap(identity_ref(s), target, [&](const auto& idx) {
      std::vector<std::int64_t> o(std::size_t(s.size()));
      for (int d = 0; d < s.size(); ++d)
        o[d] = s[d] == 1 ? 0 : idx[lead + d];
      return o;
    });
    check_view(b, r, base);
    for (int d = 0; d < target.size(); ++d)
      if (d < lead || s[d - lead] != target[d]) REQUIRE(b.strides()[d] == 0);
    // A broadcast view is read-only: writing through it is refused and changes nothing.
    bool stretched = false;
    for (int d = 0; d < target.size(); ++d)
      stretched = stretched || (b.strides()[d] == 0 && target[d] > 1);
    if (stretched) {
      auto w = b;
      REQUIRE_THROWS_AS(w = 1.0, kiln::error);
      REQUIRE(base.to_vector() == iota(s).to_vector());
    }
  }
}

// to_vector() on a view reads the view's elements, in row-major order of the view, and
// leaves the view's storage alone (a broadcast view included: reading it is fine).
TEST_CASE("to_vector of a non-contiguous view gives the view's elements in order", "[views]") {
  for (int iter = 0; iter < 3; ++iter) {
    const std::int64_t a = test::draw(2, 7), b = test::draw(2, 7);
    const auto base = iota({a, b});
    const auto tr = base.transpose();
    const auto st = base.slice(1, -1, std::numeric_limits<std::int64_t>::min(), -2);
    const auto bc = base(kiln::all, 0).unsqueeze(1).broadcast_to({a, b});
    std::vector<double> want_tr, want_st, want_bc;
    for (std::int64_t j = 0; j < b; ++j)
      for (std::int64_t i = 0; i < a; ++i)
        want_tr.push_back(double(i * b + j));
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = b - 1; j >= 0; j -= 2)
        want_st.push_back(double(i * b + j));
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j)
        want_bc.push_back(double(i * b));
    INFO("shape [" << a << ", " << b << "]");
    CHECK(tr.to_vector() == want_tr);
    CHECK(st.to_vector() == want_st);
    std::vector<double> got_bc;
    CHECK_NOTHROW(got_bc = bc.to_vector());
    CHECK(got_bc == want_bc);
    CHECK(base.to_vector() == iota({a, b}).to_vector());
  }
}
