#pragma once
// What the MSL compile checks share: kernel IR from expressions without a device (the
// lowering the JIT runs), elementwise IR split into stages Metal can bind, and compiling
// generated MSL with the host compiler through the shim (device_on_cpu/msl_shim.h): all
// programs of a check in one host unit (msl_unit.hpp, entry points included), -fsyntax-only.
// Where Apple's Metal compiler exists (xcrun metal, on a Mac), each program is also
// compiled by it; elsewhere that is skipped with a WARN.
#include "lowering_support.hpp"

#include "device_on_cpu/msl_unit.hpp"
#include "kiln/ir/lower.hpp"
#include "kiln/jit/backend/subprocess.hpp"
#include "kiln/jit/metal/codegen.hpp"
#include "kiln/jit/pipeline/stages.hpp"

#include <chrono>
#include <tuple>

#ifndef MSL_TEST_CXX
#error "MSL_TEST_CXX: the host compiler that checks generated MSL (tests/CMakeLists.txt)"
#endif

namespace msl_test {

namespace jit = kiln::jit;

using lowering_test::ir_of;
using lowering_test::ir_of_tuple;

inline jit::param_layout layout_of(const jit::kernel_ir& ir, int extras = 0) {
  return jit::param_layout(ir, jit::metal::max_inline_param_bytes, extras);
}

// The kernels of an elementwise IR, split into stages of at most max_buffers buffers.
inline std::vector<std::string> elementwise_sources(const jit::kernel_ir& ir,
                                                    const jit::pass_shape& shape = {}) {
  std::vector<std::string> out;
  for (const auto& st : jit::split_stages(ir, jit::metal::max_buffers).stages)
    out.push_back(jit::metal::generate(st.ir, layout_of(st.ir), shape));
  return out;
}

// The host compiler's verdict on `programs` as one unit; a kiln::error with its log and the
// numbered unit where it rejects them.
inline void host_compile(const std::vector<std::string>& programs) {
  const std::string unit = kiln_msl_unit::host_unit(programs);
  jit::temp_file file(".cpp", "msl test");
  file.write_and_close(std::as_bytes(std::span(unit.data(), unit.size())), "msl test");
  const auto r =
      jit::run_program(MSL_TEST_CXX,
                       {"-std=c++17", "-fsyntax-only", "-w", "-I" MSL_TEST_SHIM_DIR "/metal",
                        "-I" MSL_TEST_SHIM_DIR, file.path()},
                       std::chrono::minutes(5), "msl test");
  if (!r.succeeded())
    throw kiln::error("msl test", "the host compiler rejected the generated MSL",
                      r.ending() + "\n" + r.out + r.err + "\nthe unit:\n" +
                          jit::codegen::numbered(unit));
}

// Apple's compiler, where there is one (a Mac with Xcode): each program on its own.
inline void metal_compile(const std::vector<std::string>& programs) {
  const jit::program_location xcrun = jit::detail::search_path("xcrun");
  if (xcrun.path.empty()) {
    WARN("skipped: no xcrun here, so no Metal compiler checks the MSL (the host shim did)");
    return;
  }
  for (const auto& p : programs) {
    jit::temp_file src(".metal", "msl test"), air(".air", "msl test");
    src.write_and_close(std::as_bytes(std::span(p.data(), p.size())), "msl test");
    const auto r = jit::run_program(xcrun.path,
                                    {"-sdk", "macosx", "metal", "-c", src.path(), "-o", air.path()},
                                    std::chrono::minutes(2), "msl test");
    INFO(jit::codegen::numbered(p));
    INFO(r.out + r.err);
    REQUIRE(r.succeeded());
  }
}

// Both, the host first (all programs at once, fast).
inline void compile(const std::vector<std::string>& programs) {
  host_compile(programs);
  metal_compile(programs);
}

} // namespace msl_test
