#pragma once
// A Metal runtime that runs generated MSL on the CPU (the `msl-on-cpu:` tests): the Metal
// backend (jit/kiln/jit/metal/backend.hpp) runs unchanged over it — code generation, the
// parameter block, grids, staging, both caches — and only what the GPU would do is done
// here. A library is the MSL compiled by the suite's compiler and flags through the shim of
// Metal's built-ins (msl_shim.h, msl_unit.hpp) into a shared library; a pipeline is its
// entry point, dlopened; a dispatch runs the grid on host threads (grid_runner.hpp), in
// order, before returning. Literals compute in float, as in MSL (g++'s
// -fsingle-precision-constant), and math is the host's libm, not Metal's.
#include "grid_runner.hpp"
#include "msl_unit.hpp"

#include "kiln/jit/backend/subprocess.hpp"
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/metal/runtime.hpp"

#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <unordered_set>

#ifndef MSL_ON_CPU_CXX
#error "MSL_ON_CPU_CXX, MSL_ON_CPU_FLAGS, MSL_ON_CPU_SHIM_DIR: tests/CMakeLists.txt"
#endif

namespace msl_on_cpu {

namespace jit = kiln::jit;

class runtime final : public jit::metal::runtime {
public:
  runtime() {
    props_.name = "msl-on-cpu (host threads)";
    props_.identity = "msl-on-cpu";
    props_.compiler = "host C++ through the MSL shim: " MSL_ON_CPU_CXX;
    props_.preferred_groups = 64;
  }
  const jit::metal::device_properties& properties() const override { return props_; }

  // Device memory is host memory filled with a pattern (not zeros), kept reachable until
  // the process ends, as a GPU's (kiln's caching arena never frees what it caches).
  void* allocate(std::size_t bytes) override {
    void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!m) return nullptr;
    std::memset(m, 0xA5, bytes);
    std::lock_guard lock(mutex_);
    live().insert(m);
    return m;
  }
  void release(void* buffer) noexcept override {
    std::lock_guard lock(mutex_);
    if (live().erase(buffer)) std::free(buffer);
  }
  void write(void* b, std::size_t off, const void* src, std::size_t n) override {
    std::memcpy(static_cast<char*>(b) + off, src, n);
  }
  void read(void* b, std::size_t off, void* dst, std::size_t n) override {
    std::memcpy(dst, static_cast<const char*>(b) + off, n);
  }
  void copy(void* s, std::size_t so, void* d, std::size_t doff, std::size_t n) override {
    std::memmove(static_cast<char*>(d) + doff, static_cast<const char*>(s) + so, n);
  }
  void synchronize() override {} // every dispatch finished before it returned

  std::vector<std::byte> compile(const std::string& source) override {
    const std::string unit = kiln_msl_unit::host_unit({source});
    jit::temp_file src(".cpp", "msl-on-cpu");
    src.write_and_close(std::as_bytes(std::span(unit.data(), unit.size())), "msl-on-cpu");
    jit::temp_file so(".so", "msl-on-cpu");
    std::vector<std::string> args{"-std=c++17",
                                  "-O1",
                                  "-fPIC",
                                  "-shared",
                                  "-ffp-contract=off",
                                  "-w",
                                  "-I" MSL_ON_CPU_SHIM_DIR "/metal",
                                  "-I" MSL_ON_CPU_SHIM_DIR};
    if (std::strstr(MSL_ON_CPU_CXX, "clang") == nullptr)
      args.push_back("-fsingle-precision-constant");
    for (std::istringstream in(MSL_ON_CPU_FLAGS); in;) {
      std::string f;
      if (in >> f) args.push_back(f);
    }
    args.insert(args.end(), {src.path(), "-o", so.path()});
    const auto r = jit::run_program(MSL_ON_CPU_CXX, args, std::chrono::minutes(5), "msl-on-cpu");
    if (!r.succeeded())
      throw kiln::error("jit", "the host compiler rejected the generated MSL",
                        r.ending() + "\n" + r.out + r.err + "\n" + jit::codegen::numbered(source));
    std::ifstream in(so.path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> out(bytes.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  void* pipeline(std::span<const std::byte> binary, const char* entry) override {
    if (binary.size() < 4 || std::memcmp(binary.data(),
                                         "\x7f"
                                         "ELF",
                                         4) != 0)
      return nullptr;
    jit::temp_file file(".so", "msl-on-cpu");
    file.write_and_close(binary, "msl-on-cpu");
    void* lib = ::dlopen(file.path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return nullptr;
    void* e = ::dlsym(lib, ("kiln_cpu_entry_" + std::string(entry)).c_str());
    if (!e) return nullptr;
    std::lock_guard lock(mutex_);
    return &pipelines_.emplace_back(pipeline_t{reinterpret_cast<kiln_cpu_entry>(e)});
  }
  void dispatch(void* pipeline, std::span<void* const> buffers, std::span<const std::byte> params,
                unsigned groups_x, unsigned groups_y, unsigned group) override {
    // The parameter block's own aligned copy, bound after the buffers.
    std::vector<std::uint64_t> p((params.size() + 7) / 8);
    std::memcpy(p.data(), params.data(), params.size());
    std::vector<void*> args(buffers.begin(), buffers.end());
    args.push_back(p.data());
    const unsigned grid[3] = {groups_x, groups_y, 1}, block[3] = {group, 1, 1};
    std::lock_guard lock(launch_mutex_); // one grid at a time: threadgroup arrays are statics
    const std::string why =
        kiln_cpu::run_grid(static_cast<pipeline_t*>(pipeline)->entry, args.data(), grid, block);
    if (!why.empty()) throw kiln::error("metal", "the dispatch failed", why);
  }

private:
  // The live blocks, reachable from a global that is never destroyed (not from this object,
  // which the statics holding it may destroy first).
  static std::unordered_set<void*>& live() {
    static auto* l = new std::unordered_set<void*>;
    return *l;
  }
  struct pipeline_t {
    kiln_cpu_entry entry;
  };
  jit::metal::device_properties props_;
  std::mutex mutex_, launch_mutex_;
  std::deque<pipeline_t> pipelines_;
};

} // namespace msl_on_cpu
