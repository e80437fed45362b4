#pragma once
// The reduction templates (reduce_template.hpp) spelled in MSL. Unlike CUDA and GLSL, MSL
// has no global built-ins and no file-scope buffers: the buffers, the parameter block and
// every thread index are arguments of the kernel, so the entry point is made per kernel
// (its buffer arguments) and the prologue is called with the input buffers and P:
// `kiln_value(kiln_b0, ..., P, i)`. Threadgroup arrays are declared inside the kernel (MSL
// allows threadgroup variables only in kernel scope). Threadgroups of G threads
// ([[max_total_threads_per_threadgroup(G)]], CUDA's launch bounds); subgroup kernels fold
// SIMD-groups by simd_shuffle_down, with the SIMD-group's width read from
// [[threads_per_simdgroup]] (32 on Apple GPUs).
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::kernels::metal {

// kiln_shfl for register type t. simd_shuffle_down takes 8- to 32-bit scalars and vectors
// of them: 64-bit integers travel as a uint2, bool and 8-bit integers as a uint.
inline std::string shuffle(const std::string& t) {
  const std::string head = t + " kiln_shfl(" + t + " x, uint h) { return ";
  if (t == "int64_t")
    return head + "as_type<int64_t>(simd_shuffle_down(as_type<uint2>(x), ushort(h))); }\n";
  if (t == "bool") return head + "simd_shuffle_down(uint(x), ushort(h)) != 0u; }\n";
  if (t == "uint8_t") return head + "uint8_t(simd_shuffle_down(uint(x), ushort(h))); }\n";
  return head + "simd_shuffle_down(x, ushort(h)); }\n"; // float, int, uint
}

// The thread-index arguments every kiln kernel takes (after its buffers and P), and the
// SIMD-group ones of subgroup kernels. All position arguments are uint3, as MSL requires
// of arguments of one kind.
inline std::string position_arguments(bool subgroup) {
  std::string s = ",\n    uint3 kiln_lid [[thread_position_in_threadgroup]],"
                  "\n    uint3 kiln_gid [[threadgroup_position_in_grid]],"
                  "\n    uint3 kiln_gsize [[threads_per_threadgroup]],"
                  "\n    uint3 kiln_ngroups [[threadgroups_per_grid]]";
  if (subgroup)
    s += ",\n    uint kiln_lane [[thread_index_in_simdgroup]],"
         "\n    uint kiln_simd [[simdgroup_index_in_threadgroup]],"
         "\n    uint kiln_simd_width [[threads_per_simdgroup]],"
         "\n    uint kiln_simds [[simdgroups_per_threadgroup]]";
  return s;
}

// arguments: the kernel's buffer and parameter arguments ("const device float* kiln_b0
// [[buffer(0)]], ..., constant kiln_params& P [[buffer(B)]]"); inputs: the names of the
// input buffers the prologue reads ("kiln_b0, kiln_b1, ").
inline grid_spelling spelling(const std::string& arguments, const std::string& inputs,
                              bool subgroup) {
  grid_spelling g{"[[max_total_threads_per_threadgroup($G)]] kernel void kiln_kernel(\n    " +
                      arguments + position_arguments(subgroup) + ") {",
                  "threadgroup ",
                  "threadgroup_barrier(mem_flags::mem_threadgroup);",
                  "kiln_lid.x",
                  {"kiln_gid.x", "kiln_gid.y"},
                  {"kiln_ngroups.x", "kiln_ngroups.y"},
                  "kiln_value(" + inputs + "P, ",
                  "kiln_lane",
                  "kiln_simd",
                  "kiln_simd_width",
                  "kiln_simds",
                  &shuffle};
  g.shared_in_entry = true;
  return g;
}

} // namespace kiln::kernels::metal
