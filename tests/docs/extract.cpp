// Writes one translation unit that compiles every C++ block of a Markdown file, for the doc
// tests (tests/docs/CMakeLists.txt runs it at build time, so an edit of the README rebuilds
// its test). A fence opened by ```cpp (or ```c++) is a block. By default a block is a
// statement sequence: it becomes the body of its own function, run by runner.hpp. An HTML
// comment on the line just before the fence changes that:
//   <!-- doc: namespace -->       the block declares things: it goes at namespace scope
//   <!-- doc: skip (reason) -->   the block is not compiled; the reason is required
// `#include` lines of a block are hoisted to the top of the file. A block that names a
// device literally ("vulkan:0", "cuda:0") is run only where kiln::devices() has it usable.
// `#line` directives point compiler errors at the Markdown file's lines.
//
// usage: doc_extract <markdown file> <name shown in messages> <output .cpp>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct block {
  int first_line = 0; // of the code, 1-based (the line after the fence)
  std::vector<std::string> code;
  bool at_namespace = false;
  std::string device; // empty: runs anywhere
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// A string literal for C++ source.
std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

int fail(const std::string& where, int line, const std::string& why) {
  std::cerr << where << ":" << line << ": doc_extract: " << why << "\n";
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: doc_extract <markdown file> <name shown in messages> <output .cpp>\n";
    return 2;
  }
  const std::string path = argv[1], shown = argv[2], out_path = argv[3];
  std::ifstream in(path);
  if (!in) return fail(path, 0, "cannot read the file");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);

  const std::regex marker(R"(^<!--\s*doc:\s*(.*?)\s*-->$)");
  const std::regex skip(R"(^skip\s*\((.*\S.*)\)$)");
  const std::regex device(R"re("((vulkan|cuda|metal):[0-9]+)")re");
  std::vector<block> blocks;
  std::set<std::string> includes;
  auto is_cpp_fence = [&](std::size_t k) {
    const std::string t = k < lines.size() ? trim(lines[k]) : "";
    return t == "```cpp" || t == "```c++";
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    // A marker is one line, right before its fence: a misplaced one would be ignored.
    if (const std::string t = trim(lines[i]); t.rfind("<!-- doc", 0) == 0) {
      const int at = static_cast<int>(i) + 1;
      if (!std::regex_match(t, marker))
        return fail(shown, at, "a doc marker must be one line: <!-- doc: ... -->");
      if (!is_cpp_fence(i + 1))
        return fail(shown, at, "a doc marker must be on the line just before a ```cpp fence");
    }
    if (!is_cpp_fence(i)) continue;
    const int fence_line = static_cast<int>(i) + 1;
    block b;
    b.first_line = fence_line + 1;
    bool skipped = false;
    std::smatch m;
    const std::string prev = i > 0 ? trim(lines[i - 1]) : "";
    if (std::regex_match(prev, m, marker)) {
      const std::string what = m[1];
      std::smatch s;
      if (what == "namespace")
        b.at_namespace = true;
      else if (std::regex_match(what, s, skip))
        skipped = true;
      else if (what.rfind("skip", 0) == 0)
        return fail(shown, fence_line - 1,
                    "a skipped block needs a reason: <!-- doc: skip (why) -->");
      else
        return fail(shown, fence_line - 1,
                    "unknown marker \"" + what +
                        "\" (known: <!-- doc: namespace -->, <!-- doc: skip (reason) -->)");
    }
    std::size_t j = i + 1;
    for (; j < lines.size() && trim(lines[j]).rfind("```", 0) != 0; ++j) {
      std::string l = lines[j];
      if (trim(l).rfind("#include", 0) == 0) {
        if (!skipped) includes.insert(trim(l)); // a skipped block's headers may be absent
        l.clear();                              // keeps the line numbers of what follows
      }
      if (std::regex_search(lines[j], m, device) && b.device.empty()) b.device = m[1];
      b.code.push_back(l);
    }
    if (j == lines.size()) return fail(shown, fence_line, "the code fence is never closed");
    i = j;
    if (!skipped) blocks.push_back(std::move(b));
  }

  // Written to a string first, counting lines, so that #line can return to this file.
  std::ostringstream o;
  int out_line = 1;
  auto put = [&](const std::string& l) {
    o << l << "\n";
    ++out_line;
  };
  auto back_here = [&] { put("#line " + std::to_string(out_line + 1) + " " + quoted(out_path)); };
  put("// Generated from " + shown + " by tests/docs/extract.cpp: edit the Markdown file.");
  for (const auto& inc : includes)
    put(inc);
  put("#include \"runner.hpp\"");
  put("// Snippets show results they do not go on to use.");
  put("#pragma GCC diagnostic ignored \"-Wunused-variable\"");
  put("#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"");
  int n = 0;
  for (const auto& b : blocks) {
    ++n;
    if (!b.at_namespace) put("static void doc_block_" + std::to_string(n) + "() {");
    put("#line " + std::to_string(b.first_line) + " " + quoted(path));
    for (const auto& l : b.code)
      put(l);
    back_here();
    if (!b.at_namespace) put("}");
  }
  put("static const kiln_doc::block doc_blocks[] = {");
  n = 0;
  for (const auto& b : blocks) {
    ++n;
    if (b.at_namespace) continue;
    put("    {" + std::to_string(b.first_line) + ", &doc_block_" + std::to_string(n) + ", " +
        (b.device.empty() ? std::string("nullptr") : quoted(b.device)) + "},");
  }
  put("    {0, nullptr, nullptr}};");
  put("int main(int argc, char** argv) { return kiln_doc::run(" + quoted(shown) +
      ", doc_blocks, argc, argv); }");

  // Rewritten only when it changes, so that a prose edit rebuilds nothing.
  const std::string text = o.str();
  {
    std::ifstream old(out_path);
    std::stringstream cur;
    cur << old.rdbuf();
    if (old && cur.str() == text) return 0;
  }
  std::ofstream out(out_path);
  out << text;
  return out ? 0 : fail(out_path, 0, "cannot write the file");
}
