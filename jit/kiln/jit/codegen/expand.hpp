#pragma once
// Spellings into code: $0 $1 $2 (operands), $T (the compute type) and ${NAME} (an op's
// tunable) replaced, and the kiln_ device math functions a spelling calls.
#include "kiln/error.hpp"
#include "kiln/jit/pipeline/ir.hpp"

#include <cctype>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

namespace kiln::jit::codegen {

// The value of the op's tunable `name` (make_node checked at compile time that it has one).
inline long long tunable_value(const ir_op& op, std::string_view name) {
  if (const tunable* t = find_tunable({op.tunables, op.tunable_count}, name)) return t->value;
  throw error(op.name, "a spelling uses a tunable the op does not declare",
              "${" + std::string(name) + "}");
}

// Replaces $0 $1 $2 with the operands, $T with the compute type and ${NAME} with the value
// of op's tunable NAME.
inline std::string expand(const char* pattern, const std::string* args, const char* type,
                          const ir_op* op = nullptr) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p == '$' && p[1] >= '0' && p[1] <= '2') {
      out += args[p[1] - '0'];
      ++p;
    } else if (*p == '$' && p[1] == 'T') {
      out += type;
      ++p;
    } else if (*p == '$' && p[1] == '{' && op) {
      const char* end = std::strchr(p + 2, '}');
      if (!end) throw error(op->name, "a spelling has `${` without its `}`", pattern);
      out += std::to_string(tunable_value(*op, std::string_view(p + 2, std::size_t(end - p - 2))));
      p = end;
    } else {
      out += *p;
    }
  }
  return out;
}

// The names of kiln_ library functions (device math, kernels/glsl_math) a spelling calls.
inline void math_calls(const char* s, std::set<std::string>& names) {
  for (const char* p = std::strstr(s, "kiln_"); p; p = std::strstr(p + 1, "kiln_")) {
    const char* e = p;
    while (std::isalnum(static_cast<unsigned char>(*e)) || *e == '_')
      ++e;
    names.insert(std::string(p, e));
    p = e - 1;
  }
}

} // namespace kiln::jit::codegen
