#pragma once
// Generated CUDA C++ -> a module image with NVRTC: a cubin for the device's architecture
// (-arch=sm_XX), or PTX for the newest virtual architecture NVRTC knows when the device is
// newer than NVRTC (the driver then compiles the PTX itself). Errors are kiln::error with
// NVRTC's log and the numbered source. No driver is needed here: tests compile for sm_80
// and sm_90 on a machine without a GPU, and check the PTX with ptxas (assemble_ptx).
#include "kiln/jit/backend/subprocess.hpp"
#include "kiln/jit/cache/kernel_cache.hpp"
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/cuda/loader.hpp"

#include <algorithm>
#include <chrono>

namespace kiln::jit::cuda {

// What to compile for: a cubin for sm_<arch>, or PTX for compute_<arch>.
struct nvrtc_target {
  int arch = 0;
  bool ptx = false;
  std::string option() const {
    return std::string(ptx ? "-arch=compute_" : "-arch=sm_") + std::to_string(arch);
  }
};

// The target for a device of compute capability `cc` (major * 10 + minor): its own cubin
// when NVRTC knows it, else PTX for the newest architecture NVRTC knows below it.
inline nvrtc_target target_for(int cc, const std::vector<int>& archs) {
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) return {cc, false};
  int best = 0;
  for (int a : archs)
    if (a <= cc) best = std::max(best, a);
  if (best == 0)
    throw error("jit", "NVRTC cannot compile for this device",
                "compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                    " is older than every architecture this NVRTC supports");
  return {best, true};
}

struct module_image {
  std::vector<std::byte> bytes; // cubin, or PTX text with its terminating NUL
  bool ptx = false;
  double compile_ms = 0;
};

// The options a source is compiled with (they go into the disk-cache key too).
inline std::vector<std::string> nvrtc_options(const nvrtc_target& t, const std::string& include) {
  std::vector<std::string> o{t.option(), "-std=c++17", "-default-device", "--fmad=false"};
  if (!include.empty()) o.push_back("-I" + include);
  return o;
}
inline std::string joined(const std::vector<std::string>& o) {
  std::string s;
  for (const auto& x : o)
    s += (s.empty() ? "" : " ") + x;
  return s;
}

inline module_image compile_cuda(const nvrtc_library& nv, const std::string& source,
                                 const std::vector<std::string>& options, bool ptx) {
  if (!nv.ok()) throw error("jit", "NVRTC is not available", nv.why_not);
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  if (const auto r =
          nv.nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernel.cu", 0, nullptr, nullptr);
      r != 0)
    throw error("jit", "nvrtcCreateProgram failed", nv.nvrtcGetErrorString(r));
  struct destroy {
    const nvrtc_library& nv;
    nvrtcProgram& p;
    ~destroy() { nv.nvrtcDestroyProgram(&p); }
  } guard{nv, prog};
  std::vector<const char*> argv;
  for (const auto& o : options)
    argv.push_back(o.c_str());
  const auto r = nv.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  nv.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log_text(log_size, '\0');
  if (log_size > 1) nv.nvrtcGetProgramLog(prog, log_text.data());
  log_text.resize(log_size > 0 ? log_size - 1 : 0);
  if (r != 0)
    throw error("jit", "NVRTC failed to compile the generated CUDA",
                std::string(nv.nvrtcGetErrorString(r)) + " (" + joined(options) + "):\n" +
                    log_text + "\n" + codegen::numbered(source));
  module_image m;
  m.ptx = ptx;
  std::size_t n = 0;
  if (ptx ? nv.nvrtcGetPTXSize(prog, &n) : nv.nvrtcGetCUBINSize(prog, &n))
    throw error("jit", "NVRTC produced no image", ptx ? "PTX" : "cubin");
  m.bytes.resize(n);
  const auto got = ptx ? nv.nvrtcGetPTX(prog, reinterpret_cast<char*>(m.bytes.data()))
                       : nv.nvrtcGetCUBIN(prog, reinterpret_cast<char*>(m.bytes.data()));
  if (got != 0) throw error("jit", "NVRTC produced no image", nv.nvrtcGetErrorString(got));
  m.compile_ms = ms_since(t0);
  return m;
}

// Compiles for a target with the CUDA home's include directory (cuda_fp16.h, cuda_bf16.h).
inline module_image compile_for(const std::string& source, const nvrtc_target& t) {
  dump_kernel(source, "cu");
  return compile_cuda(nvrtc(), source, nvrtc_options(t, cuda_home_from_environment().include_dir()),
                      t.ptx);
}

// ptxas from the CUDA home's bin/, else on PATH (KILN_PTXAS names it explicitly).
inline program_location find_ptxas() {
  if (settings::text("KILN_PTXAS")) return find_program("ptxas", "KILN_PTXAS");
  const auto& home = cuda_home_from_environment();
  if (!home.path.empty()) {
    program_location p = locate_program(home.path + "/bin/ptxas");
    if (!p.path.empty()) return p;
  }
  return jit::detail::search_path("ptxas");
}

// Assembles PTX for sm_<arch> with ptxas (a check of what NVRTC emitted: the driver's own
// assembler would do the same at load time). Throws kiln::error with ptxas's output.
inline void assemble_ptx(const module_image& ptx, int arch) {
  const auto where = find_ptxas();
  if (where.path.empty()) throw error("jit", "ptxas not found", where.why_not);
  temp_file in(".ptx", "ptxas");
  std::span<const std::byte> text(ptx.bytes);
  if (!text.empty() && text.back() == std::byte{0}) text = text.first(text.size() - 1);
  in.write_and_close(text, "ptxas");
  temp_file out(".cubin", "ptxas");
  const auto r =
      run_program(where.path, {"-arch=sm_" + std::to_string(arch), in.path(), "-o", out.path()},
                  std::chrono::seconds(60), "ptxas");
  if (!r.succeeded())
    throw error("jit", "ptxas rejected the PTX NVRTC produced",
                "sm_" + std::to_string(arch) + ", " + r.ending() + ":\n" + r.err + r.out);
}

} // namespace kiln::jit::cuda
