#pragma once
// What an op definition is made of, besides its type rule (rules.hpp): its device spellings,
// its tunables, and the compile-time checks that say in one sentence what a definition
// lacks (README, "Writing your own op").
#include "kiln/dtype.hpp"

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string_view>
#include <utility>

namespace kiln {

// An op's spelling in a device dialect (GLSL, CUDA C++, MSL): an expression in $0 $1 $2,
// the operands already converted to the compute type, $T, that type's name in the
// dialect, and ${NAME}, the value of the op's tunable NAME. Operands are variables, so a spelling
// may use one several times. The spelling of the compute type's class is used, else `any`; none
// means "not on this device".
struct spelling {
  const char* boolean = nullptr; // bool (then integer, then any)
  const char* integer = nullptr; // the integer types
  const char* f32 = nullptr;     // float, and the 16-bit floats (they compute in float)
  const char* f64 = nullptr;
  const char* any = nullptr;
  constexpr const char* pick(dtype compute) const noexcept {
    const char* s = nullptr;
    if (compute == dtype::b8)
      s = boolean ? boolean : integer;
    else if (compute == dtype::f64)
      s = f64;
    else if (is_floating(compute))
      s = f32;
    else
      s = integer;
    return s ? s : any;
  }
};

// A compile-time constant of an op's generated code (a term count, an unroll factor),
// written ${NAME} in its spellings: `static constexpr kiln::tunable tunables[] =
// {{"TERMS", Terms}};`, with the value a template parameter of the op, so that each value is
// an op of its own (its own kernels, its own cache entries). A new value compiles new code,
// unlike a scalar operand, which is a kernel parameter.
// `values`, where given (`{"UNROLL", Unroll, kiln::tuning_values<1, 2, 4, 8>}`), are the
// values a tuner may try in the op's device code (jit/tune/op_tunables.hpp): the op's own
// value is the default, and a value whose results differ from it is rejected as any
// configuration's is. The host always computes with the op's own value.
struct tunable {
  const char* name;
  long long value;
  std::span<const long long> values = {};
};

namespace detail {
template <long long... V>
inline constexpr long long tuning_values_array[] = {V...};
} // namespace detail
template <long long... V>
inline constexpr std::span<const long long> tuning_values{detail::tuning_values_array<V...>};

// The tunable called `name` among `ts`, else null: the one lookup of the compile-time checks
// and of the code generators (ops and custom reductions).
constexpr const tunable* find_tunable(std::span<const tunable> ts, std::string_view name) {
  for (const tunable& t : ts)
    if (name == t.name) return &t;
  return nullptr;
}

// A raw op's device code (README, "Raw device code"): the body of a function in the C-family
// dialect GLSL and CUDA C++ share, its operands named by `inputs` (comma-separated, in
// operand order), its result by `output`; $T and ${NAME} as in spellings. The generated
// kernel calls it where the op is, fused with the expression around it.
struct raw_source {
  const char* inputs;
  const char* output;
  const char* body;
};

namespace detail {

// The `$` references of a spelling (each of its fields), checked at compile time: `$k`
// below the op's operand count, $T, or ${NAME} of one of the op's tunables.
struct spelling_refs {
  bool operands_ok = true, tunables_ok = true, dollars_ok = true;
};
constexpr bool same_name(const char* a, const char* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i] || a[i] == '\0') return false;
  return b[n] == '\0';
}
// The op's tunables (none unless it declares `tunables`).
template <class Op>
constexpr std::span<const tunable> tunables_of() {
  if constexpr (requires { Op::tunables[0].name; })
    return Op::tunables;
  else
    return {};
}
// Whether each tunable that lists values to tune over lists its own value among them.
template <class Op>
constexpr bool tuning_values_ok() {
  for (const tunable& t : tunables_of<Op>()) {
    bool found = t.values.empty();
    for (long long v : t.values)
      found = found || v == t.value;
    if (!found) return false;
  }
  return true;
}
template <class Op>
constexpr bool is_tunable(const char* name, std::size_t n) {
  return find_tunable(tunables_of<Op>(), std::string_view(name, n)) != nullptr;
}
template <class Op>
constexpr void scan_refs(const char* s, std::size_t arity, spelling_refs& r) {
  if (!s) return;
  for (; *s; ++s) {
    if (*s != '$') continue;
    const char c = s[1];
    if (c >= '0' && c <= '9') {
      r.operands_ok = r.operands_ok && std::size_t(c - '0') < arity;
    } else if (c == '{') {
      std::size_t n = 0;
      while (s[2 + n] && s[2 + n] != '}')
        ++n;
      r.tunables_ok = r.tunables_ok && s[2 + n] == '}' && is_tunable<Op>(s + 2, n);
    } else if (c != 'T') {
      r.dollars_ok = false;
    }
  }
}
template <class Op>
constexpr spelling_refs spelling_refs_of(std::size_t arity) {
  spelling_refs r;
  for (const spelling* sp : {&Op::device, &Op::glsl, &Op::cuda, &Op::msl})
    for (const char* s : {sp->boolean, sp->integer, sp->f32, sp->f64, sp->any})
      scan_refs<Op>(s, arity, r);
  return r;
}
// Once per op and operand count, however many operand types the op meets.
template <class Op, std::size_t Arity>
inline constexpr spelling_refs op_refs = spelling_refs_of<Op>(Arity);

// An op whose device code is a raw body (inputs, output, body), and one declared to have no
// host implementation (`static constexpr bool device_only = true;`).
template <class Op>
inline constexpr bool is_raw_op = requires {
  Op::inputs;
  Op::output;
  Op::body;
};
template <class Op>
constexpr bool device_only_op() {
  if constexpr (requires { Op::device_only; })
    return bool(Op::device_only);
  else
    return false;
}

// The names of a raw op, checked at compile time: C identifiers that are no keyword of
// either dialect and do not take a name kiln's generated code uses (kiln_, kx_, gl_, __).
constexpr bool ident_start(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
constexpr bool has_prefix(const char* s, std::size_t n, const char* p) {
  std::size_t k = 0;
  for (; p[k]; ++k)
    if (k >= n || s[k] != p[k]) return false;
  return true;
}
constexpr bool raw_name_ok(const char* s, std::size_t n) {
  if (n == 0 || !ident_start(s[0])) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (!ident_char(s[i]) || (i + 1 < n && s[i] == '_' && s[i + 1] == '_')) return false;
  for (const char* p : {"kiln_", "kx_", "gl_"})
    if (has_prefix(s, n, p)) return false;
  for (const char* w :
       {"in",     "out",    "inout",   "float",     "double",   "int",      "uint",     "bool",
        "void",   "return", "if",      "else",      "for",      "while",    "do",       "const",
        "struct", "shared", "buffer",  "uniform",   "layout",   "precise",  "sample",   "filter",
        "input",  "output", "static",  "inline",    "true",     "false",    "break",    "continue",
        "switch", "case",   "default", "discard",   "highp",    "mediump",  "lowp",     "half",
        "long",   "short",  "char",    "unsigned",  "signed",   "auto",     "template", "this",
        "new",    "delete", "main",    "threadIdx", "blockIdx", "blockDim", "gridDim",  "warpSize"})
    if (same_name(s, w, n)) return false;
  return true;
}
struct raw_names {
  std::size_t inputs = 0;
  bool inputs_ok = true, output_ok = true, body_ok = true;
};
template <class Op>
constexpr raw_names raw_names_of() {
  raw_names r;
  const char* in = Op::inputs;
  const char* out = Op::output;
  std::size_t out_n = 0;
  while (out[out_n])
    ++out_n;
  r.output_ok = raw_name_ok(out, out_n);
  for (std::size_t i = 0; in[i];) {
    if (in[i] == ',' || in[i] == ' ') {
      ++i;
      continue;
    }
    std::size_t n = 0;
    while (in[i + n] && in[i + n] != ',' && in[i + n] != ' ')
      ++n;
    r.inputs_ok = r.inputs_ok && raw_name_ok(in + i, n);
    r.output_ok = r.output_ok && !same_name(in + i, out, n);
    ++r.inputs;
    i += n;
  }
  // The body's `$` references as a spelling's, with no operands ($k: the names stand for them).
  spelling_refs body;
  scan_refs<Op>(Op::body, 0, body);
  r.body_ok = body.operands_ok && body.tunables_ok && body.dollars_ok;
  return r;
}

// An op's `static constexpr int cost` (per element, in adds: a division about 8, a math
// function about 40), where it states one; -1 where it does not (the host evaluator then
// guesses from the op's rule).
template <class Op>
constexpr int declared_cost() {
  if constexpr (requires { Op::cost; })
    return int(Op::cost);
  else
    return -1;
}

// What every op definition must give, said in one sentence each where an op (a user's, most
// likely) lacks it, instead of an error deep in an evaluator (its name: make_node, first).
template <class Op, class... A, std::size_t... I>
constexpr void check_op(std::index_sequence<I...>) {
  if constexpr (requires { Op::arity; })
    static_assert(Op::arity == sizeof...(A),
                  "kiln: the op is given another number of operands than its `arity` says");
  constexpr spelling_refs refs = op_refs<Op, sizeof...(A)>;
  static_assert(refs.operands_ok, "kiln: an op's device spelling uses an operand $k with k not "
                                  "below its number of operands");
  static_assert(refs.tunables_ok, "kiln: an op's device spelling uses ${NAME} where NAME is not "
                                  "one of the op's `tunables`");
  static_assert(refs.dollars_ok, "kiln: in an op's device spelling, `$` starts only $0..$9 "
                                 "(operands), $T (the compute type) or ${NAME} (a tunable)");
  static_assert(tuning_values_ok<Op>(), "kiln: a tunable's `values` to tune over must include "
                                        "its own value");
  static_assert(
      requires { typename Op::rule::template result<A...>; },
      "kiln: the op's result-type rule (`using rule = ...`) does not apply to these "
      "operand types");
  static_assert(
      device_only_op<Op>() ||
          requires { Op::host(std::declval<typename Op::rule::template operand<I, A...>>()...); },
      "kiln: the op needs `static T host(T...)`, callable with its operands' compute types: "
      "the value of one element, which the host evaluator computes (or `static constexpr bool "
      "device_only = true;` for an op that runs on GPU devices only)");
  if constexpr (is_raw_op<Op>) {
    constexpr raw_names names = raw_names_of<Op>();
    static_assert(names.inputs == sizeof...(A),
                  "kiln: a raw op's `inputs` names one input per operand, comma-separated");
    static_assert(names.inputs_ok && names.output_ok,
                  "kiln: a raw op's input and output names are distinct C identifiers, not a "
                  "keyword of GLSL or CUDA C++, without `__` or a kiln_, kx_ or gl_ prefix");
    static_assert(names.body_ok, "kiln: in a raw op's body, `$` starts only $T (the compute "
                                 "type) or ${NAME} (one of the op's tunables)");
  }
}

} // namespace detail

} // namespace kiln
