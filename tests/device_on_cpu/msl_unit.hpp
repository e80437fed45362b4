#pragma once
// MSL programs as one host translation unit (msl_shim.h): each program's #include lines
// first (<metal_stdlib> is metal/metal_stdlib here, put on the include path), then each
// program in a namespace of its own (its helpers and kiln_params would clash), then per
// kernel function the entry point of grid_abi.h:
//   extern "C" void kiln_cpu_entry_<name>(const void* args, const kiln_cpu_thread* t);
// where args points to an array of void*, one per [[buffer(i)]] argument at index i, and
// each thread-position argument comes from t. With several programs, the entry of program
// k's kernel <name> is kiln_cpu_entry_<k>_<name>.
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln_msl_unit {

struct kernel_function {
  std::string name;
  std::vector<std::string> what; // per argument: its buffer index or kiln_msl::<attribute>
};

// The argument list of a kernel, from just after its '(' to its ')', split at top-level
// commas (attributes have commas and parentheses of their own).
inline std::vector<std::string> arguments_at(const std::string& s, std::size_t at,
                                             std::size_t& end) {
  std::vector<std::string> args;
  std::string cur;
  int depth = 0;
  for (; at < s.size(); ++at) {
    const char c = s[at];
    if ((c == ')' || c == ']') && depth == 0) break;
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (cur.find_first_not_of(" \n\t") != std::string::npos) args.push_back(cur);
  end = at;
  return args;
}

// Each `kernel void <name>(...)` of an MSL program, with what each argument is bound to.
inline std::vector<kernel_function> kernels_of(const std::string& src) {
  std::vector<kernel_function> out;
  const std::string key = "kernel void ";
  for (auto at = src.find(key); at != std::string::npos; at = src.find(key, at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(src[at - 1])) || src[at - 1] == '_'))
      continue;
    const auto open = src.find('(', at);
    kernel_function k;
    k.name = src.substr(at + key.size(), open - at - key.size());
    while (!k.name.empty() && k.name.back() == ' ')
      k.name.pop_back();
    std::size_t end = 0;
    for (const auto& a : arguments_at(src, open + 1, end)) {
      const auto attr = a.find("[["), close = a.find("]]");
      if (attr == std::string::npos || close == std::string::npos)
        throw std::runtime_error("msl unit: kernel " + k.name + " has an argument without an " +
                                 "attribute: " + a);
      std::string name = a.substr(attr + 2, close - attr - 2);
      if (name.rfind("buffer(", 0) == 0)
        k.what.push_back(name.substr(7, name.find(')') - 7));
      else
        k.what.push_back("kiln_msl::" + name);
    }
    out.push_back(std::move(k));
  }
  return out;
}

// The host unit of `programs` (see above).
inline std::string host_unit(const std::vector<std::string>& programs) {
  std::string includes, body, entries;
  for (std::size_t p = 0; p < programs.size(); ++p) {
    const std::string ns = "kiln_msl_" + std::to_string(p);
    std::string text;
    for (std::size_t at = 0; at < programs[p].size();) {
      std::size_t end = programs[p].find('\n', at);
      if (end == std::string::npos) end = programs[p].size();
      std::string line = programs[p].substr(at, end - at);
      if (line.rfind("#include", 0) == 0) {
        if (includes.find(line) == std::string::npos) includes += line + "\n";
        line.clear(); // a blank line keeps the compiler's line numbers the program's
      }
      text += line + "\n";
      at = end + 1;
    }
    body += "namespace " + ns + " {\n#line 1 \"program_" + std::to_string(p) + ".metal\"\n" + text +
            "}\n";
    for (const auto& k : kernels_of(programs[p])) {
      const std::string entry = programs.size() == 1 ? k.name : std::to_string(p) + "_" + k.name;
      entries += "extern \"C\" void kiln_cpu_entry_" + entry +
                 "(const void* args, const kiln_cpu_thread* t) {\n  static const int what[] = {";
      for (std::size_t i = 0; i < k.what.size(); ++i)
        entries += (i ? ", " : "") + k.what[i];
      entries += "};\n  kiln_msl::call(&" + ns + "::" + k.name + ", args, t, what);\n}\n";
    }
  }
  return includes + body + "#line 1 \"kiln_msl_entries.cpp\"\n" + entries;
}

} // namespace kiln_msl_unit
