#pragma once
// einsum's index algebra: definitions (declared in einsum_plan.hpp; kiln/linkage.hpp says
// where they are compiled).
#include "kiln/contractions/einsum_plan.hpp"
#include "kiln/error.hpp"

#include <algorithm>

namespace kiln {

namespace detail {

inline std::string label_name(int label) {
  if (label < 26) return std::string(1, char('a' + label));
  if (label < 52) return std::string(1, char('A' + label - 26));
  return "... dim " + std::to_string(label - 52);
}

// One term's letters as labels, with the position of its ellipsis (-1: none).
struct einsum_term {
  std::vector<int> letters; // labels, with -1 where the ellipsis stands
  bool ellipsis = false;
};

inline einsum_term parse_term(const char* op, std::string_view t, const std::string& spec) {
  einsum_term r;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c >= 'a' && c <= 'z') {
      r.letters.push_back(c - 'a');
    } else if (c >= 'A' && c <= 'Z') {
      r.letters.push_back(26 + c - 'A');
    } else if (c == '.' && t.substr(i, 3) == "...") {
      if (r.ellipsis)
        throw error(op, "an ellipsis appears twice in one term", "subscripts \"" + spec + "\"");
      r.ellipsis = true;
      r.letters.push_back(-1);
      i += 2;
    } else {
      throw error(op, "subscripts are letters, commas, one \"->\" and \"...\"",
                  "subscripts \"" + spec + "\": '" + std::string(1, c) + "'");
    }
  }
  return r;
}

// The term's labels for an operand of rank r whose ellipsis stands for the last
// `r - letters` of the `e` ellipsis dims (right-aligned).
inline einsum_labels expand_term(const char* op, const einsum_term& t, int r, int e,
                                 const std::string& spec, const kiln::shape* s) {
  const int named = int(t.letters.size()) - (t.ellipsis ? 1 : 0);
  const int in_ellipsis = s ? r - named : e;
  if (s && (in_ellipsis < 0 || (!t.ellipsis && in_ellipsis != 0)))
    throw error(op, "a term names another number of dims than its operand has",
                "subscripts \"" + spec + "\": " + std::to_string(named) +
                    " dims named for an operand of shape " + s->str());
  einsum_labels l;
  for (const int x : t.letters)
    if (x >= 0)
      l.push_back(std::int8_t(x));
    else
      for (int d = e - in_ellipsis; d < e; ++d)
        l.push_back(std::int8_t(52 + d));
  return l;
}

} // namespace detail

KILN_CORE_INLINE einsum_plan parse_einsum(const char* op, std::string_view spec_in,
                                          const kiln::shape& a, const kiln::shape* b) {
  std::string spec;
  for (const char c : spec_in)
    if (c != ' ') spec.push_back(c);
  const std::size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string_view> terms;
  for (std::size_t s = 0;;) {
    const std::size_t comma = lhs.find(',', s);
    terms.push_back(
        std::string_view(lhs).substr(s, comma == std::string::npos ? comma : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  const int n = b ? 2 : 1;
  if (int(terms.size()) != n)
    throw error(op, "the subscripts name another number of operands than were given",
                "subscripts \"" + spec + "\" name " + std::to_string(terms.size()) + ", " +
                    std::to_string(n) + " given");
  if (arrow != std::string::npos && spec.find("->", arrow + 2) != std::string::npos)
    throw error(op, "\"->\" appears twice", "subscripts \"" + spec + "\"");
  const kiln::shape* shapes[2] = {&a, b};
  detail::einsum_term t[2];
  int e = 0; // the ellipsis dims: the most any operand's ellipsis stands for
  for (int i = 0; i < n; ++i) {
    t[i] = detail::parse_term(op, terms[i], spec);
    if (t[i].ellipsis) e = std::max(e, shapes[i]->size() - (int(t[i].letters.size()) - 1));
  }
  einsum_labels l[2];
  for (int i = 0; i < n; ++i)
    l[i] = detail::expand_term(op, t[i], shapes[i]->size(), e, spec, shapes[i]);
  einsum_labels out;
  if (arrow != std::string::npos) {
    const detail::einsum_term to =
        detail::parse_term(op, std::string_view(spec).substr(arrow + 2), spec);
    // As numpy: the dims an input's "..." stands for must be in the output.
    if (e > 0 && !to.ellipsis)
      throw error(op, "the inputs' \"...\" stands for dims the output does not name",
                  "subscripts \"" + spec + "\": " + std::to_string(e) +
                      " dims (write \"...\" in the output, or sum them with kiln::sum)");
    out = detail::expand_term(op, to, 0, e, spec, nullptr);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (std::count(out.begin(), out.end(), out[i]) > 1)
        throw error(op, "an output label appears twice",
                    "subscripts \"" + spec + "\": " + detail::label_name(out[i]));
      if (!einsum_plan::has(l[0], out[i]) && (n < 2 || !einsum_plan::has(l[1], out[i])))
        throw error(op, "an output label is in no operand",
                    "subscripts \"" + spec + "\": " + detail::label_name(out[i]));
    }
  } else {
    // Implicit output: the ellipsis dims, then the labels used once, in character order
    // (capitals first, as numpy orders them).
    for (int d = 0; d < e; ++d)
      out.push_back(std::int8_t(52 + d));
    std::vector<std::int8_t> once;
    for (int i = 0; i < n; ++i)
      for (const std::int8_t x : l[i])
        if (x < 52 && std::count(l[0].begin(), l[0].end(), x) +
                              (n == 2 ? std::count(l[1].begin(), l[1].end(), x) : 0) ==
                          1)
          once.push_back(x);
    std::sort(once.begin(), once.end(), [](std::int8_t x, std::int8_t y) {
      return (x >= 26 ? x - 26 : x + 26) < (y >= 26 ? y - 26 : y + 26);
    });
    out.insert(out.end(), once.begin(), once.end());
  }
  return make_einsum_plan(op, l[0], a, n == 2 ? &l[1] : nullptr, b, out, nullptr, spec);
}

KILN_CORE_INLINE einsum_plan make_einsum_plan(
    const char* op, einsum_labels la, const kiln::shape& a, const einsum_labels* lb,
    const kiln::shape* b, einsum_labels out,
    const std::array<std::int64_t, einsum_plan::label_count>* extents, std::string spec) {
  einsum_plan p;
  p.operands = lb ? 2 : 1;
  p.in[0] = std::move(la);
  p.in_shape[0] = a;
  if (lb) {
    p.in[1] = *lb;
    p.in_shape[1] = *b;
  }
  p.out = std::move(out);
  p.spec = std::move(spec);
  auto shapes = [&] {
    return "subscripts \"" + p.spec + "\", shapes " + a.str() + (b ? " and " + b->str() : "");
  };
  std::array<bool, einsum_plan::label_count> seen{}, fixed{};
  // An adjoint's output has the forward plan's extents (its operand's dims broadcast from 1
  // included), which its operands broadcast to.
  if (extents)
    for (const std::int8_t x : p.out) {
      p.extent[x] = (*extents)[x];
      seen[x] = fixed[x] = true;
    }
  for (int i = 0; i < p.operands; ++i) {
    if (int(p.in[i].size()) != p.in_shape[i].size())
      throw error(op, "a term names another number of dims than its operand has", shapes());
    for (int d = 0; d < p.in_shape[i].size(); ++d) {
      const int x = p.in[i][d];
      const std::int64_t s = p.in_shape[i][d];
      // Within one operand a repeated label is a diagonal: its dims must be equal.
      for (int d2 = 0; d2 < d; ++d2)
        if (p.in[i][d2] == x && p.in_shape[i][d2] != s)
          throw error(op, "a label repeated in one operand (a diagonal) has dims that differ",
                      shapes() + ": " + detail::label_name(x) + " is " +
                          std::to_string(p.in_shape[i][d2]) + " and " + std::to_string(s) +
                          " in operand " + std::to_string(i));
      std::int64_t& e = p.extent[x];
      if (!seen[x] || (e == 1 && !fixed[x])) {
        e = s;
      } else if (s != 1 && s != e) {
        throw error(op, "a label has dims that differ and do not broadcast",
                    shapes() + ": " + detail::label_name(x) + " is " + std::to_string(e) + " and " +
                        std::to_string(s));
      }
      seen[x] = true;
    }
  }
  if (p.out.size() > std::size_t(max_rank))
    throw error(op, "the result has more dims than kiln supports",
                shapes() + " give rank " + std::to_string(p.out.size()) + " > " +
                    std::to_string(max_rank));
  for (const std::int8_t x : p.out) {
    if (!seen[x]) throw error(op, "an output label is in no operand (an internal error)", shapes());
    p.out_shape.push_back(p.extent[x]);
  }
  checked_numel(p.out_shape, op);
  return p;
}

KILN_CORE_INLINE einsum_plan tensordot_plan(const kiln::shape& a, const kiln::shape& b,
                                            const std::vector<std::int64_t>& ax,
                                            const std::vector<std::int64_t>& ay) {
  auto dims = [&] {
    auto list = [](const std::vector<std::int64_t>& v) {
      std::string s = "(";
      for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
      return s + ")";
    };
    return "shapes " + a.str() + " and " + b.str() + ", dims " + list(ax) + " and " + list(ay);
  };
  if (ax.size() != ay.size())
    throw error("tensordot", "the two lists of contracted dims differ in length", dims());
  einsum_labels la, lb(b.size(), -1), out;
  for (int d = 0; d < a.size(); ++d)
    la.push_back(std::int8_t(d));
  std::vector<bool> used_a(a.size()), contracted_a(a.size());
  for (std::size_t i = 0; i < ax.size(); ++i) {
    const int da = normalize_axis(ax[i], a.size(), "tensordot"),
              db = normalize_axis(ay[i], b.size(), "tensordot");
    if (used_a[da] || lb[db] >= 0) throw error("tensordot", "a dim is contracted twice", dims());
    if (a[da] != b[db])
      throw error("tensordot", "the contracted dims differ",
                  dims() + ": " + std::to_string(a[da]) + " vs " + std::to_string(b[db]));
    used_a[da] = contracted_a[da] = true;
    lb[db] = std::int8_t(da);
  }
  for (int d = 0; d < a.size(); ++d)
    if (!contracted_a[d]) out.push_back(std::int8_t(d));
  std::int8_t next = std::int8_t(a.size());
  for (auto& x : lb)
    if (x < 0) {
      x = next++;
      out.push_back(x);
    }
  // The equivalent einsum subscripts, for messages.
  auto letters = [](const einsum_labels& l) {
    std::string s;
    for (const std::int8_t x : l)
      s += detail::label_name(x);
    return s;
  };
  return make_einsum_plan("tensordot", la, a, &lb, &b, out, nullptr,
                          letters(la) + "," + letters(lb) + "->" + letters(out));
}

KILN_CORE_INLINE einsum_plan adjoint_plan(const einsum_plan& p, int i) {
  const std::string spec = "adjoint of " + p.spec;
  if (i == 0)
    return make_einsum_plan("einsum (adjoint)", p.out, p.out_shape,
                            p.operands == 2 ? &p.in[1] : nullptr,
                            p.operands == 2 ? &p.in_shape[1] : nullptr, p.in[0], &p.extent, spec);
  return make_einsum_plan("einsum (adjoint)", p.in[0], p.in_shape[0], &p.out, &p.out_shape, p.in[1],
                          &p.extent, spec);
}

KILN_CORE_INLINE label_view distinct_view(const einsum_plan& p, const einsum_labels& labels,
                                          const layout& l) {
  label_view v;
  v.l.offset = l.offset;
  for (int d = 0; d < l.rank(); ++d) {
    const std::int8_t x = labels[d];
    const std::int64_t st = l.shape[d] == 1 ? 0 : l.strides[d];
    const auto at = std::find(v.labels.begin(), v.labels.end(), x);
    if (at != v.labels.end()) {
      v.l.strides[int(at - v.labels.begin())] += st;
      continue;
    }
    v.labels.push_back(x);
    v.l.shape.push_back(p.extent[x]);
    v.l.strides.push_back(st);
  }
  return v;
}

KILN_CORE_INLINE layout arranged(const einsum_plan& p, const label_view& v,
                                 const einsum_labels& order) {
  layout r;
  r.offset = v.l.offset;
  for (const std::int8_t x : order) {
    const auto at = std::find(v.labels.begin(), v.labels.end(), x);
    r.shape.push_back(p.extent[x]);
    r.strides.push_back(at == v.labels.end() ? 0 : v.l.strides[int(at - v.labels.begin())]);
  }
  return r;
}

KILN_CORE_INLINE einsum_roles roles_of(const einsum_plan& p, const einsum_labels& a,
                                       const einsum_labels& b) {
  einsum_roles r;
  for (std::size_t i = 0; i < p.out.size(); ++i) {
    const std::int8_t x = p.out[i];
    // Once each: an adjoint's output may repeat a label (its diagonal).
    if (std::find(p.out.begin(), p.out.begin() + i, x) != p.out.begin() + i) continue;
    const bool in_a = einsum_plan::has(a, x), in_b = einsum_plan::has(b, x);
    if (in_a && in_b)
      r.batch.push_back(x);
    else if (in_a)
      r.free_a.push_back(x);
    else if (in_b)
      r.free_b.push_back(x);
  }
  for (const std::int8_t x : a)
    if (einsum_plan::has(b, x) && !p.in_output(x)) r.contracted.push_back(x);
  return r;
}

KILN_CORE_INLINE bool einsum_reads_in_order(const einsum_plan& p, int i) {
  if (p.operands != 2) return false;
  const einsum_labels& l = p.in[i];
  for (std::size_t d = 0; d < l.size(); ++d) {
    const std::int8_t x = l[d];
    if (std::find(l.begin(), l.begin() + d, x) != l.begin() + d) return false; // a diagonal
    if (p.in_shape[i][int(d)] != p.extent[x]) return false;                    // broadcast
    if (!p.in_output(x) && !p.in_operand(1 - i, x)) return false;              // summed away
  }
  const einsum_roles r = i == 0 ? roles_of(p, l, p.in[1]) : roles_of(p, p.in[0], l);
  const einsum_labels& free = i == 0 ? r.free_a : r.free_b;
  if (free.size() > 1 || r.contracted.size() != 1) return false;
  einsum_labels want = r.batch;
  if (i == 0) {
    want.insert(want.end(), free.begin(), free.end());
    want.push_back(r.contracted[0]);
  } else {
    want.push_back(r.contracted[0]);
    want.insert(want.end(), free.begin(), free.end());
  }
  return want == l;
}

} // namespace kiln
