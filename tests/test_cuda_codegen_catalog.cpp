// Every op of the catalog on every dtype, as CUDA C++: one multi-output kernel per dtype
// (each output one op, plus a cast to every dtype), all dtypes bundled into one NVRTC
// program, compiled for sm_80 (32-bit index, linear) and sm_90 (64-bit index, strided),
// and the PTX assembled with ptxas. No GPU needed.
#include "catalog_exprs.hpp"
#include "cuda_codegen_support.hpp"

#include "kiln/kiln.hpp"

namespace {

using catalog_exprs::catalog;

template <class... T>
std::vector<std::string> sources(bool strided, int rank, bool wide) {
  return {
      cuda_test::elementwise_source(cuda_test::ir_of_tuple(strided, rank, wide, catalog<T>()))...};
}
std::vector<std::string> all_dtypes(bool strided, int rank, bool wide) {
  return sources<bool, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, kiln::half,
                 kiln::bfloat16, float, double>(strided, rank, wide);
}

} // namespace

TEST_CASE("cuda codegen: every op on every dtype compiles for sm_80 and assembles with ptxas",
          "[cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const auto srcs = all_dtypes(false, 1, false);
  REQUIRE(srcs.size() == 9);
  // Each op's CUDA spelling is in the source (the IR computes it, not a fallback).
  CHECK(srcs[7].find("erfcf(") != std::string::npos);
  CHECK(srcs[8].find("erfc(") != std::string::npos);
  CHECK(srcs[5].find("__float2half_rn(") != std::string::npos);
  CHECK(srcs[6].find("__float2bfloat16_rn(") != std::string::npos);
  CHECK(srcs[2].find("const int a0 = P.o0 + i;") != std::string::npos);
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  const std::string text(reinterpret_cast<const char*>(ptx.bytes.data()), ptx.bytes.size());
  CHECK(text.find(".target sm_80") != std::string::npos);
  for (int k = 0; k < 9; ++k)
    CHECK(text.find(".entry kiln_kernel_" + std::to_string(k)) != std::string::npos);
}

TEST_CASE("cuda codegen: every op on every dtype, 64-bit strided, for sm_90 with ptxas",
          "[cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const auto srcs = all_dtypes(true, 2, true);
  CHECK(srcs[0].find("int64_t r = i;") != std::string::npos);
  CHECK(srcs[0].find("P.s0_1") != std::string::npos);
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 90);
  const std::string text(reinterpret_cast<const char*>(ptx.bytes.data()), ptx.bytes.size());
  CHECK(text.find(".target sm_90") != std::string::npos);
}
