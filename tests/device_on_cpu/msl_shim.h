// Metal's built-ins for generated MSL compiled as host C++17 (g++ or clang), so that each
// kernel can be checked by the host compiler and run on the host (grid_abi.h): a group's
// threads are fibers of one host thread (grid_runner.hpp), so threadgroup_barrier is a real
// barrier and a shuffle a real exchange; groups run one after another, so threadgroup
// arrays are statics.
// A host unit (msl_unit.hpp) is: the program's #include <metal_stdlib> (metal/metal_stdlib,
// which includes this header), the program in a namespace, then one entry per kernel.
// Only what kiln's generated MSL uses is here: the scalar and vector types it names, its
// address spaces, as_type, float math (host libm standing in for metal::), barriers and
// simd_shuffle_down. Metal's attributes ([[buffer(N)]], [[thread_position_in_grid]]...) are
// left to the compiler, which ignores attributes it does not know (-w silences the notes).
// Every standard header comes first: the address-space macros below (`thread`, `device`,
// `constant`, `kernel`) would break them.
#ifndef KILN_TEST_MSL_SHIM_H
#define KILN_TEST_MSL_SHIM_H

#include "grid_abi.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

// half: the compiler's _Float16 where it has one (g++ 12 on x86-64), else 16 bits with
// round-to-nearest-even conversions (clang 14 has no _Float16 on x86-64).
#ifdef __FLT16_MAX__
typedef _Float16 half;
#else
struct half {
  ushort bits;
  half() = default;
  half(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static ushort from_float(float f) {
    uint b;
    std::memcpy(&b, &f, 4);
    const uint sign = (b >> 16) & 0x8000u, a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return ushort(sign | 0x7E00u);  // NaN
    if (a >= 0x477FF000u) return ushort(sign | 0x7C00u); // rounds to inf
    if (a >= 0x38800000u)                                // normal
      return ushort(sign | ((a + 0x0FFFu + ((a >> 13) & 1u) - 0x38000000u) >> 13));
    return ushort(sign | uint(std::nearbyint(std::fabs(f) * 16777216.0f))); // subnormal
  }
  static float to_float(ushort h) {
    const uint sign = uint(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint b;
    if (e == 0) {
      const float v = std::ldexp(float(m), -24);
      return sign ? -v : v;
    }
    b = e == 31 ? sign | 0x7F800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
};
#endif

// The vector types kiln's MSL names (members only; no arithmetic is needed).
struct uint2 {
  uint x, y;
};
struct uint3 {
  uint x, y, z;
};
struct uint4 {
  uint x, y, z, w;
};
struct float2 {
  float x, y;
  float2() = default;
  float2(float a, float b) : x(a), y(b) {}
};

template <class T, class U>
T as_type(const U& u) {
  static_assert(sizeof(T) == sizeof(U), "as_type: the sizes differ");
  T t;
  std::memcpy(&t, &u, sizeof t);
  return t;
}

// Float math: MSL's overloads for float (half computes in float in kiln's kernels).
#define KILN_MSL_UNARY(fn)                                                                         \
  inline float fn(float x) { return std::fn(x); }
KILN_MSL_UNARY(exp)
KILN_MSL_UNARY(exp2)
KILN_MSL_UNARY(log)
KILN_MSL_UNARY(log2)
KILN_MSL_UNARY(log10)
KILN_MSL_UNARY(sqrt)
KILN_MSL_UNARY(floor)
KILN_MSL_UNARY(ceil)
KILN_MSL_UNARY(trunc)
KILN_MSL_UNARY(round)
KILN_MSL_UNARY(rint)
KILN_MSL_UNARY(sin)
KILN_MSL_UNARY(cos)
KILN_MSL_UNARY(tan)
KILN_MSL_UNARY(asin)
KILN_MSL_UNARY(acos)
KILN_MSL_UNARY(atan)
KILN_MSL_UNARY(sinh)
KILN_MSL_UNARY(cosh)
KILN_MSL_UNARY(tanh)
KILN_MSL_UNARY(asinh)
KILN_MSL_UNARY(acosh)
KILN_MSL_UNARY(atanh)
KILN_MSL_UNARY(fabs)
#undef KILN_MSL_UNARY
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float abs(float x) { return std::fabs(x); }
inline float pow(float x, float y) { return std::pow(x, y); }
inline float atan2(float y, float x) { return std::atan2(y, x); }
inline float fmod(float x, float y) { return std::fmod(x, y); }
inline float fmin(float x, float y) { return std::fmin(x, y); }
inline float fmax(float x, float y) { return std::fmax(x, y); }
inline float min(float x, float y) { return std::fmin(x, y); }
inline float max(float x, float y) { return std::fmax(x, y); }
inline float clamp(float x, float lo, float hi) { return std::fmin(std::fmax(x, lo), hi); }
inline float ldexp(float x, int k) { return std::ldexp(x, k); }
inline float frexp(float x, int& k) { return std::frexp(x, &k); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline float sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }

} // namespace metal

// The thread running a kernel, set by kiln_msl::call; the barriers and shuffles use it.
namespace kiln_msl {
inline thread_local const kiln_cpu_thread* self = nullptr;
} // namespace kiln_msl

namespace metal {

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
// Each call site is its own barrier (__builtin_LINE() as a default argument is the caller's
// line): threads at different ones have diverged.
inline void threadgroup_barrier(mem_flags, int site = __builtin_LINE()) {
  const kiln_cpu_thread* t = kiln_msl::self;
  t->group_barrier(t->runner, site);
  kiln_msl::self = t; // the group's other threads ran on this host thread meanwhile
}

// A SIMD-group's shuffle: every lane publishes its value, then reads lane + delta's (its own
// past the SIMD-group's end).
template <class T>
T simd_shuffle_down(T v, ushort delta) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>);
  const kiln_cpu_thread* t = kiln_msl::self;
  std::memcpy(t->warp_slots + 16 * t->lane, &v, sizeof v);
  t->warp_barrier(t->runner);
  T r = v;
  if (t->lane + delta < t->warp_lanes)
    std::memcpy(&r, t->warp_slots + 16 * (t->lane + delta), sizeof r);
  t->warp_barrier(t->runner); // nobody overwrites a slot before every lane has read it
  kiln_msl::self = t;
  return r;
}

} // namespace metal

namespace kiln_msl {

// What an argument of a kernel is: a buffer (its index in the argument array) or a thread
// position attribute.
enum attribute : int {
  thread_position_in_threadgroup = -1,
  threadgroup_position_in_grid = -2,
  threads_per_threadgroup = -3,
  threadgroups_per_grid = -4,
  thread_position_in_grid = -5,
  thread_index_in_threadgroup = -6,
  thread_index_in_simdgroup = -7,
  simdgroup_index_in_threadgroup = -8,
  threads_per_simdgroup = -9,
  simdgroups_per_threadgroup = -10,
};

// A position attribute's value, as the uint3 or the uint the kernel declares.
struct position {
  metal::uint3 v;
  operator metal::uint3() const { return v; }
  operator metal::uint() const { return v.x; }
};

inline position position_of(int a, const kiln_cpu_thread* t) {
  const unsigned threads = t->group_size[0] * t->group_size[1] * t->group_size[2];
  const unsigned linear =
      (t->thread[2] * t->group_size[1] + t->thread[1]) * t->group_size[0] + t->thread[0];
  auto one = [](unsigned x) { return position{{x, 0u, 0u}}; };
  switch (a) {
  case thread_position_in_threadgroup:
    return {{t->thread[0], t->thread[1], t->thread[2]}};
  case threadgroup_position_in_grid:
    return {{t->group[0], t->group[1], t->group[2]}};
  case threads_per_threadgroup:
    return {{t->group_size[0], t->group_size[1], t->group_size[2]}};
  case threadgroups_per_grid:
    return {{t->groups[0], t->groups[1], t->groups[2]}};
  case thread_position_in_grid:
    return {{t->group[0] * t->group_size[0] + t->thread[0],
             t->group[1] * t->group_size[1] + t->thread[1],
             t->group[2] * t->group_size[2] + t->thread[2]}};
  case thread_index_in_threadgroup:
    return one(linear);
  case thread_index_in_simdgroup:
    return one(t->lane);
  case simdgroup_index_in_threadgroup:
    return one(linear / KILN_CPU_WARP);
  case threads_per_simdgroup:
    return one(KILN_CPU_WARP);
  default: // simdgroups_per_threadgroup
    return one((threads + KILN_CPU_WARP - 1) / KILN_CPU_WARP);
  }
}

// Argument k of a kernel: a buffer pointer, the parameter block (a reference), or a position.
template <class P>
P argument(void* const* args, int what, const kiln_cpu_thread* t) {
  if constexpr (std::is_pointer_v<P>)
    return static_cast<P>(args[what]);
  else if constexpr (std::is_reference_v<P>)
    return *static_cast<std::remove_reference_t<P>*>(args[what]);
  else
    return position_of(what, t);
}

template <class... P, std::size_t... K>
void call_each(void (*kernel)(P...), void* const* a, const kiln_cpu_thread* t, const int* what,
               std::index_sequence<K...>) {
  kernel(argument<P>(a, what[K], t)...);
}

// Calls `kernel` for thread t; args: one pointer per [[buffer(i)]] argument, at index i;
// what[k]: argument k's buffer index or attribute.
template <class... P>
void call(void (*kernel)(P...), const void* args, const kiln_cpu_thread* t, const int* what) {
  self = t;
  call_each(kernel, static_cast<void* const*>(args), t, what, std::index_sequence_for<P...>{});
}

} // namespace kiln_msl

// The address spaces: plain C++ storage on the host. Threadgroup arrays are statics (groups
// run one after another); `constant` data is read-only.
#define device
#define constant const
#define threadgroup static
#define thread
#define kernel

#endif
