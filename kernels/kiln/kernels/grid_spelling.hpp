#pragma once
// The built-ins a kernel template names, per dialect: workgroup and invocation indices,
// shared memory, barriers, the entry point. With these, one template text serves GLSL and
// CUDA. Grids are two-dimensional (jit/kiln/jit/pipeline/launch_grid.hpp): kernels flatten the
// workgroup index x-major and walk their work units with a grid-stride loop.
#include <string>

namespace kiln::kernels {

struct grid_spelling {
  std::string entry;      // the kernel's opening line, up to and including "{"
  std::string shared;     // storage qualifier of workgroup-shared arrays (file scope)
  std::string barrier;    // a workgroup barrier statement
  std::string local;      // invocation index within the workgroup (unsigned)
  std::string group[2];   // workgroup index in x and y (unsigned)
  std::string groups[2];  // workgroup count in x and y (unsigned)
  std::string value_call; // opening of a call of the fused prologue: value_call + "i)"
  // Subgroups (Vulkan subgroups, CUDA warps), for reductions that combine lanes by shuffles:
  // the lane within its subgroup, the subgroup within the workgroup, lanes per subgroup and
  // subgroups per workgroup (all unsigned, uniform but the first two), and the file-scope
  // definition of `T kiln_shfl(T x, uint h)`, x of lane + h, for register type T (the
  // same text for every T where one definition serves all).
  std::string lane, subgroup, subgroup_size, subgroups;
  std::string (*shuffle)(const std::string& type) = nullptr;
  // Whether shared arrays are declared inside the entry point (MSL: threadgroup variables
  // live in kernel scope) instead of at file scope before it.
  bool shared_in_entry = false;
};

// Declarations of the flattened workgroup index `kiln_group` and count `kiln_groups`, in
// index type I (converted before multiplying: the product may pass 32 bits).
inline std::string flat_groups(const grid_spelling& g, const std::string& I,
                               const std::string& pad) {
  return pad + "const " + I + " kiln_groups = " + I + "(" + g.groups[0] + ") * " + I + "(" +
         g.groups[1] + ");\n" + pad + "const " + I + " kiln_group = " + I + "(" + g.group[1] +
         ") * " + I + "(" + g.groups[0] + ") + " + I + "(" + g.group[0] + ");\n";
}

} // namespace kiln::kernels
