#pragma once
// What the CUDA compile-only tests share: kernel IR from expressions without a device (the
// lowering the JIT runs), several generated kernels bundled into one NVRTC program (one
// compile checks many kernels: each in a namespace of its own, its entry point renamed),
// and compiling such a program for sm_XX then assembling its PTX with ptxas. NVRTC is
// installed where these tests run: its absence fails them (KILN_CUDA_HOME pointing nowhere
// on purpose is the one way to skip, for a machine without the toolkit).
#include "lowering_support.hpp"

#include "kiln/ir/lower.hpp"
#include "kiln/jit/cuda/codegen.hpp"
#include "kiln/jit/cuda/nvrtc.hpp"

#include <cstdlib>
#include <tuple>

namespace cuda_test {

namespace jit = kiln::jit;

using lowering_test::ir_of;
using lowering_test::ir_of_tuple;

inline std::string elementwise_source(const jit::kernel_ir& ir) {
  return jit::cuda::generate(ir, jit::param_layout(ir, jit::cuda::max_param_bytes));
}

// The reduction kernel of reduction R over the IR `ir` of a value expression of type V, for
// one stage (as run_reduction specializes it; f64 accumulators where R asks for them).
template <class R, class V>
std::string reduction_source(const jit::kernel_ir& ir, jit::reduce_stage stage) {
  const kiln::dtype v = kiln::dtype_of<V>();
  const jit::reduce_spec spec{&kiln::reduction_info_of<R>, stage, v,
                              kiln::reduction_info_of<R>.accumulator(v, true),
                              kiln::dtype_of<typename R::template result<V>>()};
  const jit::kernel_ir sir = jit::stage_ir(ir, spec);
  return jit::cuda::generate_reduction(
      sir, jit::param_layout(sir, jit::cuda::max_param_bytes, jit::reduce_extras), spec);
}

// One program from several generated sources: #include lines first, then each source in
// namespace kiln_k<N> with its kernel renamed kiln_kernel_<N> (extern "C" names are global).
inline std::string bundle(const std::vector<std::string>& sources) {
  std::string includes, body;
  for (std::size_t k = 0; k < sources.size(); ++k) {
    std::string rest;
    std::size_t pos = 0;
    const std::string& s = sources[k];
    while (pos < s.size()) {
      const std::size_t end = std::min(s.find('\n', pos), s.size());
      const std::string line = s.substr(pos, end - pos);
      if (line.rfind("#include", 0) == 0) {
        if (includes.find(line) == std::string::npos) includes += line + "\n";
      } else {
        rest += line + "\n";
      }
      pos = end + 1;
    }
    const std::string name = "kiln_kernel_" + std::to_string(k);
    for (std::size_t at = rest.find("kiln_kernel("); at != std::string::npos;
         at = rest.find("kiln_kernel(", at + 1))
      rest.replace(at, 11, name);
    body += "namespace kiln_k" + std::to_string(k) + " {\n" + rest + "}\n";
  }
  return includes + body;
}

// NVRTC must be here unless KILN_CUDA_HOME deliberately points nowhere.
inline bool nvrtc_or_skip() {
  const auto& nv = jit::cuda::nvrtc();
  if (nv.ok()) return true;
  const char* k = std::getenv("KILN_CUDA_HOME");
  if (k && *k && !jit::cuda::is_directory(k)) {
    WARN("skipped: KILN_CUDA_HOME=" << k << " points nowhere, so NVRTC is not loaded");
    return false;
  }
  FAIL("NVRTC is not available here: " << nv.why_not);
  return false;
}

// Compiles for compute_<arch> (PTX) and assembles it with ptxas for sm_<arch>; with
// `cubin`, also makes the cubin the backend would load on such a device. Returns the PTX.
// KILN_TEST_PTXAS=0 (CI's asan and clang presets) leaves ptxas out: a program of its own,
// not under the sanitizers, assembling the same text in every build, which the release
// preset assembles (half the time of these tests).
inline bool ptxas_wanted() {
  const char* v = std::getenv("KILN_TEST_PTXAS");
  return !(v && std::string(v) == "0");
}

inline jit::cuda::module_image compile_and_assemble(const std::string& source, int arch,
                                                    bool cubin = false) {
  const auto ptx = jit::cuda::compile_for(source, {arch, true});
  REQUIRE(ptx.bytes.size() > 100);
  if (ptxas_wanted()) jit::cuda::assemble_ptx(ptx, arch);
  if (cubin) {
    const auto bin = jit::cuda::compile_for(source, {arch, false});
    REQUIRE(bin.bytes.size() > 4);
    CHECK(std::memcmp(bin.bytes.data(),
                      "\x7f"
                      "ELF",
                      4) == 0); // a cubin is an ELF image
  }
  return ptx;
}

} // namespace cuda_test
