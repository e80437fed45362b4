// The contract between the CPU grid runner (grid_runner.hpp) and a device kernel compiled as
// host code (cuda_shim.h, and MSL's shim): every entry point a compiled kernel exports is
//   extern "C" void kiln_cpu_entry_<name>(const void* args, const kiln_cpu_thread* t);
// called once per thread of each group, the threads of a group concurrently. `args` is the
// launch's parameter block (CUDA: the one by-value struct). Plain C, so that the runner and
// the kernel need not share a compiler or flags.
#ifndef KILN_TEST_GRID_ABI_H
#define KILN_TEST_GRID_ABI_H

#define KILN_CPU_WARP 32

typedef struct kiln_cpu_thread {
  unsigned thread[3];     // index within the group (threadIdx)
  unsigned group[3];      // the group's index in the grid (blockIdx)
  unsigned group_size[3]; // blockDim
  unsigned groups[3];     // gridDim
  unsigned lane;          // index within the warp (linear thread index % 32)
  unsigned warp_lanes;    // threads of this warp (32, or fewer in a short last warp)
  // The group's barrier (__syncthreads, threadgroup_barrier; `site` tells one call of it in
  // the source from another: threads at different ones have diverged) and the warp's
  // (around a shuffle).
  void (*group_barrier)(void* runner, int site);
  void (*warp_barrier)(void* runner);
  void* runner;
  // KILN_CPU_WARP slots of 16 bytes through which a warp exchanges values in a shuffle.
  unsigned char* warp_slots;
} kiln_cpu_thread;

typedef void (*kiln_cpu_entry)(const void* args, const kiln_cpu_thread* t);

#endif
