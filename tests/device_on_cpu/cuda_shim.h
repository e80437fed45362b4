// CUDA's built-ins for generated CUDA C++ compiled as host code (cuda_driver.cpp compiles
// each program as: the program's own #includes (cuda_fp16.h and cuda_bf16.h compile as host
// code), this header, then the program inside a namespace, then one entry point per kernel
// (grid_abi.h)). A group's threads are fibers of one host thread (grid_runner.hpp), so
// __syncthreads is a real barrier, and a missing one shows as a wrong value; groups run one
// after another, so __shared__ arrays can be statics.
#ifndef KILN_TEST_CUDA_SHIM_H
#define KILN_TEST_CUDA_SHIM_H

#include "grid_abi.h"

#include <math.h>
#include <string.h>
#include <type_traits>

#if __has_include(<vector_types.h>)
#include <vector_types.h>
#else
struct uint2 {
  unsigned x, y;
};
struct uint3 {
  unsigned x, y, z;
};
struct uint4 {
  unsigned x, y, z, w;
};
#endif

// The toolkit's headers define these for their own host compilation; kernels need them gone.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

namespace kiln_cpu {
inline thread_local const kiln_cpu_thread* self = nullptr;
struct index3 {
  unsigned x, y, z;
};
inline thread_local index3 thread_idx, block_idx, block_dim, grid_dim;
// The thread `t` runs now: its built-in variables set (again, after a barrier, at which the
// group's other threads ran on this host thread).
inline void enter(const kiln_cpu_thread* t) {
  self = t;
  thread_idx = {t->thread[0], t->thread[1], t->thread[2]};
  block_idx = {t->group[0], t->group[1], t->group[2]};
  block_dim = {t->group_size[0], t->group_size[1], t->group_size[2]};
  grid_dim = {t->groups[0], t->groups[1], t->groups[2]};
}
} // namespace kiln_cpu
#define threadIdx (::kiln_cpu::thread_idx)
#define blockIdx (::kiln_cpu::block_idx)
#define blockDim (::kiln_cpu::block_dim)
#define gridDim (::kiln_cpu::grid_dim)

// Each call site is its own barrier (its line): threads at different ones have diverged.
inline void kiln_cpu_syncthreads(int site) {
  const kiln_cpu_thread* t = kiln_cpu::self;
  t->group_barrier(t->runner, site);
  kiln_cpu::enter(t);
}
#define __syncthreads() kiln_cpu_syncthreads(__LINE__)

// A warp's shuffle: every lane publishes its value, then reads lane + delta's (its own past
// the warp's end, as CUDA does).
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>);
  const kiln_cpu_thread* t = kiln_cpu::self;
  memcpy(t->warp_slots + 16 * t->lane, &v, sizeof v);
  t->warp_barrier(t->runner);
  T r = v;
  if (t->lane + delta < t->warp_lanes) memcpy(&r, t->warp_slots + 16 * (t->lane + delta), sizeof r);
  t->warp_barrier(t->runner); // nobody overwrites a slot before every lane has read it
  kiln_cpu::enter(t);
  return r;
}

// Integer min/max and float helpers CUDA has as global functions.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline unsigned __float_as_uint(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

namespace kiln_cpu {
template <class P>
void call(void (*kernel)(P), const void* args, const kiln_cpu_thread* t) {
  enter(t);
  kernel(*static_cast<const std::remove_cv_t<P>*>(args));
}
// The bytes of a kernel's by-value parameter (what a graph node copies, as the driver does).
template <class P>
unsigned long args_size(void (*)(P)) {
  return sizeof(std::remove_cv_t<P>);
}
} // namespace kiln_cpu

#endif
