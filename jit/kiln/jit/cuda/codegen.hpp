#pragma once
// CUDA C++ code generation: kernel IR -> one `extern "C" __global__ kiln_kernel` for NVRTC.
// - Every parameter is one struct passed by value: the buffer pointers (inputs, then
//   outputs), then the index fields and scalars in param_layout's byte order (8-byte members
//   first, so the C++ struct has no padding before its tail and the host packs it with
//   memcpy).
// - 32- or 64-bit index variants (the specialization key's wide_index); a grid-stride loop
//   covers any n with any grid.
// - Registers use GLSL's type names (typedefs below), so the IR walk, conversions and
//   reduction parts are shared with the GLSL generator (codegen.hpp); 16-bit floats are
//   stored as their bits and loaded/stored through cuda_fp16.h / cuda_bf16.h.
// - Math is CUDA's libdevice (sinf, exp, erfcf...), whose ulp bounds the CUDA programming
//   guide documents (appendix "Mathematical Functions": e.g. sinf/cosf 2, expf 2, logf 1,
//   erfcf 4, powf 4, tanhf 2 ulp; double functions mostly 1-2 ulp). Source is compiled
//   with -default-device, so helper functions need no __device__.
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/cuda/math_names.hpp"
#include "kiln/jit/pipeline/launch_grid.hpp"
#include "kiln/jit/pipeline/params.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/kernels/reduce_cuda.hpp"

namespace kiln::jit::cuda {

// CUDA's kernel parameter space: 4 KiB everywhere; 32764 bytes on sm_70 and newer when both
// the driver and NVRTC are 12.1 or newer ("large kernel parameters"). A gradient tree can
// carry hundreds of scalars (examples/greeks.cpp: 770, 6344 bytes).
inline constexpr std::uint32_t max_param_bytes = 4096;
inline constexpr std::uint32_t max_large_param_bytes = 32764;
inline std::uint32_t param_limit(int cc, int driver_version, int nvrtc_major, int nvrtc_minor) {
  const bool large = cc >= 70 && driver_version >= 12010 &&
                     (nvrtc_major > 12 || (nvrtc_major == 12 && nvrtc_minor >= 1));
  return large ? max_large_param_bytes : max_param_bytes;
}
// Buffers per kernel: with the widest index fields (64-bit, rank 8 strided: 8 B pointer +
// 72 B offset and strides) 32 buffers take 2560 B, leaving room for extents and scalars.
inline constexpr int max_buffers = 32;

// The grid of a launch: up to 2^31 - 1 blocks in x and 65535 in y on every architecture kiln
// targets; preferred, enough blocks to fill the device (32 per multiprocessor), past which
// threads loop, within launch_grid.hpp's budget.
inline grid_limits launch_limits_for(int multiprocessors) {
  return {2147483647, 65535, std::int64_t{32} * std::max(1, multiprocessors)};
}

inline std::string element(const kernel_ir&, int b, const std::string& index) {
  return "P.b" + std::to_string(b) + "[" + index + "]";
}
inline std::string load(dtype d, const std::string& x) {
  if (d == dtype::f16) return "__half2float(__ushort_as_half(" + x + "))";
  if (d == dtype::bf16) return "__bfloat162float(__ushort_as_bfloat16(" + x + "))";
  return cfamily::load_expr(d, x);
}
// v is already rounded to the 16-bit type, so the _rn conversion is exact.
inline std::string store(dtype d, const std::string& v) {
  if (d == dtype::f16) return "__half_as_ushort(__float2half_rn(" + v + "))";
  if (d == dtype::bf16) return "__bfloat16_as_ushort(__float2bfloat16_rn(" + v + "))";
  return cfamily::store_expr(d, v);
}

inline const dialect cuda_dialect{"CUDA", &ir_op::cuda, {"int", "int64_t"},          element,
                                  load,   store,        cfamily::literal_style::cpp, "inline "};

// The bytes of the parameter struct: pointers, then the layout's block, padded to 8.
inline std::uint32_t struct_bytes(const param_layout& l) {
  return (8u * static_cast<std::uint32_t>(l.buffers) + l.bytes + 7u) & ~7u;
}

// Includes, the type names the shared walk uses, GLSL's bit-cast names for the shared
// conversion helpers, the parameter struct and the conversion helpers.
// body: code after the preamble that calls kiln_ math of its own (a reduction's parts).
inline std::string preamble(const kernel_ir& ir, const param_layout& layout,
                            std::initializer_list<dtype> also_used = {},
                            const std::string& body = "") {
  if (struct_bytes(layout) > layout.limit)
    throw error("jit", "kernel parameters exceed CUDA's parameter space",
                std::to_string(struct_bytes(layout)) + " bytes for " +
                    std::to_string(layout.buffers) + " buffers and " +
                    std::to_string(layout.scalars.size()) + " scalars; the limit is " +
                    std::to_string(layout.limit) + " on this device");
  auto used = ir.dtypes_used();
  for (dtype d : also_used)
    used[static_cast<int>(d)] = true;
  std::string s = "// kiln: generated CUDA C++ (NVRTC, -default-device)\n";
  if (used[static_cast<int>(dtype::f16)]) s += "#include <cuda_fp16.h>\n";
  if (used[static_cast<int>(dtype::bf16)]) s += "#include <cuda_bf16.h>\n";
  s += "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned int "
       "uint;\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n";
  s += "inline uint floatBitsToUint(float x) { return __float_as_uint(x); }\n"
       "inline float uintBitsToFloat(uint x) { return __uint_as_float(x); }\n"
       "inline float roundEven(float x) { return rintf(x); }\n";
  // No libdevice sigmoid: the host's formulation, e = e^-|x| never overflows.
  s += "inline float sigmoidf(float x) { const float e = expf(-fabsf(x)); "
       "return (x >= 0.0f ? 1.0f : e) / (1.0f + e); }\n"
       "inline double sigmoid(double x) { const double e = exp(-fabs(x)); "
       "return (x >= 0.0 ? 1.0 : e) / (1.0 + e); }\n";
  s += "struct kiln_params {\n";
  const std::size_t nin = ir.inputs.size();
  for (std::size_t b = 0; b < nin + ir.outputs.size(); ++b) {
    const bool in = b < nin;
    const dtype d = in ? ir.inputs[b] : ir.outputs[b - nin];
    s += std::string("  ") + (in ? "const " : "") + cfamily::storage_type(d) + "* b" +
         std::to_string(b) + ";\n";
  }
  for (const auto& m : layout.members())
    s += "  " + m + "\n";
  s += "};\n";
  // Every op has a spelling here, or a clear error now; the kiln_ math names they call.
  const auto calls = codegen::kernel_math_calls(
      cuda_dialect, ir, body, [](const std::string& n) { return find_math_name(n) != nullptr; });
  return s + cfamily::conversion_library(used) + math_overloads(calls) +
         codegen::raw_functions(ir, cuda_dialect.function_prefix);
}

// A whole unit of a flat kernel's buffer copied as one access of N bytes (N = vector width
// x element size, a power of two from 2) between the buffer and a local array, either way:
// 16-byte words at most, so that each is one vector load or store; the caller checked the
// alignment (codegen::elementwise_loop).
inline const char* vector_access =
    "template <int N> struct kiln_word_t;\n"
    "template <> struct kiln_word_t<2> { typedef unsigned short type; };\n"
    "template <> struct kiln_word_t<4> { typedef unsigned int type; };\n"
    "template <> struct kiln_word_t<8> { typedef uint2 type; };\n"
    "template <> struct kiln_word_t<16> { typedef uint4 type; };\n"
    "template <int N, class T> inline void kiln_vcopy(T* d, const T* s) {\n"
    "  typedef typename kiln_word_t<(N < 16 ? N : 16)>::type W;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < (N < 16 ? 1 : N / 16); ++j)\n"
    "    reinterpret_cast<W*>(d)[j] = reinterpret_cast<const W*>(s)[j];\n"
    "}\n";

// An elementwise kernel: a grid-stride loop storing every output, walked as the pass's
// shape says (codegen::elementwise_loop). Its launch bounds are the block size it is
// compiled for, so that ptxas keeps its registers within what a block of that size may use
// (without them a heavy kernel may fail to launch at 1024 threads).
inline std::string generate(const kernel_ir& ir, const param_layout& layout,
                            const pass_shape& shape = {}) {
  const std::string I = cuda_dialect.index_type(ir);
  std::string s = preamble(ir, layout);
  if (shape.vector > 1 && !ir.strided) s += vector_access;
  s += "extern \"C\" __global__ void";
  if (shape.workgroup > 0) s += " __launch_bounds__(" + std::to_string(shape.workgroup) + ")";
  s += " kiln_kernel(const kiln_params P) {\n";
  // A grid of x * y blocks (launch_grid.hpp), flattened x-major.
  s += "  const " + I + " row = " + I + "(gridDim.x) * blockDim.x;\n";
  s += "  const " + I + " step = row * gridDim.y;\n";
  s += "  const " + I + " first = " + I + "(blockIdx.y) * row + " + I +
       "(blockIdx.x) * blockDim.x + threadIdx.x;\n";
  s += codegen::elementwise_loop(cuda_dialect, ir, static_cast<int>(layout.buffers), shape, true);
  return s + "}\n";
}

// A reduction kernel: kiln_value(P, i) from the IR, then the template of the spec's stage.
inline std::string generate_reduction(const kernel_ir& ir, const param_layout& layout,
                                      const reduce_spec& spec) {
  const std::string body = codegen::reduction_body(cuda_dialect, kernels::cuda::spelling(), ir,
                                                   spec, "const kiln_params& P, ");
  return preamble(ir, layout, {spec.acc, spec.result}, body) + body;
}

// A contraction kernel: kiln_a(P, bt, i, k) and kiln_b(P, bt, k, j) from the IR, then the
// tile template (blocks of the tile's thread count, its launch bounds).
inline std::string generate_contraction(const kernel_ir& ir, const param_layout& layout,
                                        const contract_spec& spec) {
  const std::string body = codegen::contraction_body(cuda_dialect, kernels::cuda::spelling(), ir,
                                                     spec, "const kiln_params& P, ");
  return preamble(ir, layout, {spec.acc, spec.result}, body) + body;
}

} // namespace kiln::jit::cuda
