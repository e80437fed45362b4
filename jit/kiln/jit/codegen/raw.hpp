#pragma once
// Raw ops in generated code (README, "Raw device code"): a user's body becomes a function of
// the kernel's source, called where the op is, so it fuses with the expression around it.
// The function is named by a hash of its text (kx_<16 hex digits>), never by the op's name:
// two ops of one name and different bodies are two functions and two kernels (two cache
// entries), and two names with one body share one. A compile error inside a body is
// reported against the body's own lines, through the markers around it.
#include "kiln/error.hpp"
#include "kiln/jit/cache/hash.hpp"
#include "kiln/jit/codegen/c_family.hpp"
#include "kiln/jit/codegen/expand.hpp"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit::codegen {

// The input names of a raw op, in operand order.
inline std::vector<std::string> raw_inputs(const raw_source& r) {
  std::vector<std::string> names;
  std::string_view in = r.inputs;
  while (!in.empty()) {
    const std::size_t start = in.find_first_not_of(", ");
    if (start == std::string_view::npos) break;
    in.remove_prefix(start);
    const std::size_t end = std::min(in.find_first_of(", "), in.size());
    names.emplace_back(in.substr(0, end));
    in.remove_prefix(end);
  }
  return names;
}

struct raw_body {
  std::string name; // kx_<hash>
  std::string body; // $T and ${NAME} replaced
  std::vector<std::string> inputs;
};

// The body for this compute type, and the name its text hashes to (the kernel caches'
// hasher, its first 64 bits: a collision of two bodies in one kernel would be a
// redefinition, which the compiler refuses, never a silently shared function).
inline raw_body raw_body_of(const ir_op& op, dtype compute) {
  raw_body b;
  b.body = expand(op.raw->body, nullptr, cfamily::register_type(compute), &op);
  if (b.body.empty() || b.body.back() != '\n') b.body += '\n';
  b.inputs = raw_inputs(*op.raw);
  hasher h;
  h.add(kiln::name(compute)).add(std::string_view(op.raw->output));
  for (const auto& n : b.inputs)
    h.add(std::string_view(n));
  b.name = "kx_" + h.add(std::string_view(b.body)).digest().hex().substr(0, 16);
  return b;
}

// Which op a body function came from, for compile errors (the op's name stays out of the
// source). Filled as functions are generated; process-wide.
inline std::map<std::string, std::string>& raw_names() {
  static std::map<std::string, std::string> names;
  return names;
}
inline std::mutex& raw_names_mutex() {
  static std::mutex m;
  return m;
}
// The op a body function (kx_<hash>) came from; the function's name if none is known.
inline std::string raw_op_name(const std::string& function) {
  const std::lock_guard lock(raw_names_mutex());
  const auto it = raw_names().find(function);
  return it == raw_names().end() ? function : it->second;
}

// The call of op's function on operands $0 $1 ..., as a spelling for codegen::expand.
// Interned: a dialect's pick returns a pattern that lives as long as the process.
inline const char* raw_call(const ir_op& op, dtype compute) {
  const raw_body b = raw_body_of(op, compute);
  std::string call = b.name + "(";
  for (std::size_t k = 0; k < b.inputs.size(); ++k)
    call += (k ? ", $" : "$") + std::to_string(k);
  call += ")";
  static std::set<std::string> interned;
  const std::lock_guard lock(raw_names_mutex());
  raw_names().emplace(b.name, op.name);
  return interned.insert(std::move(call)).first->c_str();
}

// The kiln_ names the raw bodies of a kernel call, for the dialect's math library.
inline void raw_math_calls(const kernel_ir& ir, std::set<std::string>& names) {
  for (const auto& in : ir.code)
    if (in.code == ir_code::apply && in.op->raw)
      math_calls(raw_body_of(*in.op, in.compute).body.c_str(), names);
}

// The functions of the raw ops in ir, once each:
//   <result> kx_<hash>(<compute> x, ...) {
//     <result> y;
//   //@kiln-body kx_<hash>
//   ...the body...
//   //@kiln-body-end
//     return y;
//   }
inline std::string raw_functions(const kernel_ir& ir, const char* prefix) {
  std::string s;
  std::set<std::string> done;
  for (const auto& in : ir.code) {
    if (in.code != ir_code::apply || !in.op->raw) continue;
    const raw_body b = raw_body_of(*in.op, in.compute);
    if (!done.insert(b.name).second) continue;
    const std::string c = cfamily::register_type(in.compute), r = cfamily::register_type(in.type);
    const std::string out = in.op->raw->output;
    s += std::string(prefix) + r + " " + b.name + "(";
    for (std::size_t k = 0; k < b.inputs.size(); ++k)
      s += (k ? ", " : "") + c + " " + b.inputs[k];
    s += ") {\n  " + r + " " + out + ";\n//@kiln-body " + b.name + "\n" + b.body +
         "//@kiln-body-end\n  return " + out + ";\n}\n";
  }
  return s;
}

// A compile error of a kernel with raw bodies, restated against the body: the compiler's
// lines that point into a body ("kernel.comp:<n>:" from glslang, "kiln_kernel.cu(<n>):" from
// NVRTC) say "<op> body line <k>", followed by the body with its line numbers. An error
// outside every body is rethrown as it was.
[[noreturn]] inline void rethrow_raw_body_error(const error& e, const std::string& source,
                                                const char* dialect) {
  struct region {
    std::size_t first, last; // 1-based source lines of the body
    std::string name;
  };
  std::vector<region> bodies;
  std::vector<std::string_view> lines;
  for (std::size_t begin = 0; begin < source.size();) {
    std::size_t end = source.find('\n', begin);
    if (end == std::string::npos) end = source.size();
    lines.push_back(std::string_view(source).substr(begin, end - begin));
    begin = end + 1;
  }
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].starts_with("//@kiln-body kx_")) {
      region r{i + 2, i + 1, std::string(lines[i].substr(13))};
      while (r.last < lines.size() && lines[r.last] != "//@kiln-body-end")
        ++r.last;
      bodies.push_back(r); // body lines first..last (last: the line before the end marker)
    }
  auto line_of = [](std::string_view l, std::size_t& at, std::size_t& len) -> std::size_t {
    for (std::string_view tag :
         {std::string_view("kernel.comp:"), std::string_view("kiln_kernel.cu(")}) {
      const std::size_t p = l.find(tag);
      if (p == std::string_view::npos) continue;
      const std::size_t digits = p + tag.size();
      std::size_t q = digits;
      while (q < l.size() && l[q] >= '0' && l[q] <= '9')
        ++q;
      if (q == digits) continue;
      at = p;
      len = q - p + 1; // the closing ':' or ')'
      return std::size_t(
          std::strtoul(std::string(l.substr(digits, q - digits)).c_str(), nullptr, 10));
    }
    return 0;
  };
  std::string messages;
  std::set<const region*> hit;
  std::string_view details = e.details();
  for (std::size_t begin = 0; begin < details.size();) {
    std::size_t end = details.find('\n', begin);
    if (end == std::string_view::npos) end = details.size();
    const std::string_view l = details.substr(begin, end - begin);
    begin = end + 1;
    std::size_t at = 0, len = 0;
    const std::size_t n = line_of(l, at, len);
    for (const region& r : bodies)
      if (n >= r.first && n <= r.last) {
        hit.insert(&r);
        messages += raw_op_name(r.name) + " body line " + std::to_string(n - r.first + 1) + ":" +
                    std::string(l.substr(at + len)) + "\n";
      }
  }
  if (hit.empty()) throw e;
  const region& first = **hit.begin();
  const std::string op = raw_op_name(first.name);
  std::string body;
  for (std::size_t i = first.first; i <= first.last; ++i)
    body += std::to_string(i - first.first + 1) + ": " + std::string(lines[i - 1]) + "\n";
  throw error(op, std::string("the raw op's device body does not compile (") + dialect + ")",
              messages + "the body:\n" + body);
}

} // namespace kiln::jit::codegen
