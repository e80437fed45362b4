#pragma once
// What the device stand-ins (cuda_driver.cpp, metal_framework.cpp) share: device memory as
// host memory, and device code compiled by the host compiler into a shared library whose
// bytes are the "binary", opened again from those bytes.
#include "grid_abi.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_set>
#include <vector>

namespace kiln_cpu {

// Device memory belongs to the device until the process ends, as a GPU's does: the live
// blocks stay reachable here, so a leak checker does not count what kiln's caching arena
// holds at exit (it never frees its cached blocks: the process ending does). Blocks are
// filled with a pattern: kernels that read what nobody wrote get garbage, as on a GPU.
struct live_blocks {
  std::mutex m;
  std::unordered_set<void*> all;
};
inline live_blocks& live() {
  static auto* l = new live_blocks; // never destroyed: blocks outlive every static
  return *l;
}
inline void* device_alloc(std::size_t n) {
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return nullptr;
  std::memset(m, 0xA5, n);
  std::lock_guard lock(live().m);
  live().all.insert(m);
  return m;
}
// False for a pointer that is not a live block.
inline bool device_free(void* p) {
  {
    std::lock_guard lock(live().m);
    if (live().all.erase(p) == 0) return false;
  }
  std::free(p);
  return true;
}

inline std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// Runs `argv` with its output into `log`; its exit status.
inline int run(const std::vector<std::string>& argv, std::string& log) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    std::vector<char*> a;
    for (const auto& s : argv)
      a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  char buf[4096];
  for (ssize_t r; (r = ::read(pipefd[0], buf, sizeof buf)) > 0;)
    log.append(buf, static_cast<std::size_t>(r));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;)
    w.push_back(x);
  return w;
}

inline std::string hex64(std::uint64_t h) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    s[static_cast<std::size_t>(i)] = d[h & 15];
  return s;
}
inline std::uint64_t fnv1a(const std::string& s, std::uint64_t h = 14695981039346656037ull) {
  for (const unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// Writes `text` to `path` whole or not at all (another process may be reading it).
inline bool write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::ofstream(tmp, std::ios::binary) << text;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// A unit's leading #include lines (the shim, and what the program includes) are most of its
// compile: GCC parsed 21,000 lines in 0.25 of a kernel's 0.42 s. With `pch_dir` (GCC only),
// they become a header there, precompiled once per build for every process that compiles the
// same lines with the same flags (a hash of the preprocessed text and the flags names it, so
// a changed shim gets a new one); the unit then includes that header instead, its line count
// kept. Any failure leaves the unit as it is: the precompiled header only saves time.
inline std::string with_precompiled_prelude(const std::string& compiler,
                                            std::vector<std::string>& flags,
                                            const std::string& unit, const char* pch_dir) {
  if (!pch_dir || !*pch_dir || compiler.find("clang") != std::string::npos) return unit;
  std::size_t end = 0;
  int lines = 0;
  while (unit.compare(end, 8, "#include") == 0) {
    const auto nl = unit.find('\n', end);
    if (nl == std::string::npos) return unit;
    end = nl + 1;
    ++lines;
  }
  if (lines == 0) return unit;
  const std::string prelude = unit.substr(0, end);
  std::vector<std::string> args{compiler};
  for (const auto& f : flags)
    if (f != "-shared") args.push_back(f);
  std::string key = prelude;
  for (const auto& a : args)
    key += '\0' + a;

  static std::mutex m;
  static std::map<std::string, std::string> header_of; // key -> header name; "" if it failed
  std::lock_guard lock(m);
  auto it = header_of.find(key);
  if (it == header_of.end()) {
    std::string name;
    const std::string dir = pch_dir;
    ::mkdir(dir.c_str(), 0755);
    const std::string probe = dir + "/probe" + std::to_string(::getpid()) + ".h";
    std::string text;
    if (write_atomically(probe, prelude)) {
      auto e = args;
      e.insert(e.end(), {"-E", "-P", "-x", "c++", probe});
      if (run(e, text) != 0) text.clear();
      std::remove(probe.c_str());
    }
    if (!text.empty()) {
      const std::string n = "kiln_prelude_" + hex64(fnv1a(text, fnv1a(key))) + ".h";
      const std::string header = dir + "/" + n, gch = header + ".gch";
      bool ok = ::access(gch.c_str(), R_OK) == 0;
      if (!ok && (::access(header.c_str(), R_OK) == 0 || write_atomically(header, prelude))) {
        const std::string tmp = gch + ".tmp" + std::to_string(::getpid());
        auto c = args;
        c.insert(c.end(), {"-x", "c++-header", header, "-o", tmp});
        std::string clog;
        ok = run(c, clog) == 0 && std::rename(tmp.c_str(), gch.c_str()) == 0;
        if (!ok) std::remove(tmp.c_str());
      }
      if (ok) name = n;
    }
    it = header_of.emplace(key, name).first;
  }
  if (it->second.empty()) return unit;
  flags.insert(flags.begin(), "-I" + std::string(pch_dir));
  return "#include \"" + it->second + "\"\n" +
         std::string(static_cast<std::size_t>(lines - 1), '\n') + unit.substr(end);
}

// `unit` compiled by `compiler` with `flags` into a shared library: its bytes, or empty with
// the compiler's output in `log`. With `pch_dir`, its leading #include lines come from a
// precompiled header (with_precompiled_prelude).
inline std::vector<char> compile_shared(const std::string& compiler, std::vector<std::string> flags,
                                        std::string unit, std::string& log,
                                        const char* pch_dir = nullptr) {
  unit = with_precompiled_prelude(compiler, flags, unit, pch_dir);
  std::string dir = temp_dir() + "/kiln-on-cpu-XXXXXX";
  if (!::mkdtemp(dir.data())) {
    log = "cannot make " + dir;
    return {};
  }
  const std::string src = dir + "/kernel.cpp", so = dir + "/kernel.so";
  std::ofstream(src) << unit;
  flags.insert(flags.begin(), compiler);
  flags.insert(flags.end(), {src, "-o", so});
  std::vector<char> image;
  if (run(flags, log) == 0) {
    std::ifstream in(so, std::ios::binary);
    image.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::remove(src.c_str());
  std::remove(so.c_str());
  ::rmdir(dir.c_str());
  return image;
}

// The bytes of an ELF64 image from its header (section headers come last in what the host
// linker writes); 0 for what is not one.
inline std::size_t elf_size(const unsigned char* p, std::size_t known = SIZE_MAX) {
  if (known < 64 ||
      std::memcmp(p,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      p[4] != 2)
    return 0;
  std::uint64_t shoff = 0;
  std::uint16_t shentsize = 0, shnum = 0;
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&shentsize, p + 0x3a, 2);
  std::memcpy(&shnum, p + 0x3c, 2);
  const std::uint64_t n = shoff + std::uint64_t(shentsize) * shnum;
  return n <= known ? static_cast<std::size_t>(n) : 0;
}

// The shared library of an image: written to a file, opened, and the file removed; nullptr
// with `why` when it does not load.
inline void* open_image(const void* image, std::size_t n, std::string& why) {
  std::string path = temp_dir() + "/kiln-on-cpu-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) {
    why = "cannot write " + path;
    return nullptr;
  }
  const bool written = ::write(fd, image, n) == static_cast<ssize_t>(n);
  ::close(fd);
  void* lib = written ? ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!lib) {
    const char* e = ::dlerror();
    why = e ? e : "cannot write the image";
  }
  ::unlink(path.c_str());
  return lib;
}

// The entry point of kernel `name` in an opened image.
inline kiln_cpu_entry entry_of(void* lib, const std::string& name) {
  return reinterpret_cast<kiln_cpu_entry>(::dlsym(lib, ("kiln_cpu_entry_" + name).c_str()));
}

} // namespace kiln_cpu
