#pragma once
// The CUDA driver API (libcuda.so.1) and NVRTC (libnvrtc.so.*), opened at run time with
// dlopen: nothing links against CUDA and no CUDA header is needed to build kiln. What is
// missing is a reason string ("why unavailable"), never a link error.
// The CUDA home (NVRTC's library, cuda_fp16.h/cuda_bf16.h, ptxas) is KILN_CUDA_HOME when
// set — an explicit choice that does not work is reported, not replaced — else CUDA_HOME,
// else /usr/local/cuda.
#include "kiln/error.hpp"
#include "kiln/settings.hpp"

#include <cstdint>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace kiln::jit::cuda {

// The few driver and NVRTC types kiln uses, declared here instead of including cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = std::uint64_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

// cuDeviceGetAttribute values (cuda.h's CUdevice_attribute).
inline constexpr int attr_multiprocessor_count = 16;
inline constexpr int attr_compute_capability_major = 75;
inline constexpr int attr_compute_capability_minor = 76;
inline constexpr int attr_memory_pools_supported = 115;
// cuMemPool{Set,Get}Attribute's CU_MEMPOOL_ATTR_RELEASE_THRESHOLD and
// CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT (cuuint64_t bytes).
inline constexpr int mempool_release_threshold = 4;
inline constexpr int mempool_reserved_mem_current = 5;
inline constexpr CUresult error_out_of_memory = 2;

// cuda.h's CUDA_KERNEL_NODE_PARAMS_v2 (a kernel node of a CUDA graph), member for member
// (tests/test_cuda_codegen.cpp checks the layout against cuda.h).
struct kernel_node_params {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern; // (CUkernel: unused where func is set)
  CUcontext ctx;
};

#define KILN_CU_FUNCTIONS(X)                                                                       \
  X(cuInit, CUresult, unsigned)                                                                    \
  X(cuDriverGetVersion, CUresult, int*)                                                            \
  X(cuGetErrorString, CUresult, CUresult, const char**)                                            \
  X(cuDeviceGetCount, CUresult, int*)                                                              \
  X(cuDeviceGet, CUresult, CUdevice*, int)                                                         \
  X(cuDeviceGetName, CUresult, char*, int, CUdevice)                                               \
  X(cuDeviceGetAttribute, CUresult, int*, int, CUdevice)                                           \
  X(cuDevicePrimaryCtxRetain, CUresult, CUcontext*, CUdevice)                                      \
  X(cuCtxSetCurrent, CUresult, CUcontext)                                                          \
  X(cuMemAlloc_v2, CUresult, CUdeviceptr*, std::size_t)                                            \
  X(cuMemFree_v2, CUresult, CUdeviceptr)                                                           \
  X(cuMemcpyHtoDAsync_v2, CUresult, CUdeviceptr, const void*, std::size_t, CUstream)               \
  X(cuMemcpyDtoHAsync_v2, CUresult, void*, CUdeviceptr, std::size_t, CUstream)                     \
  X(cuMemcpyDtoDAsync_v2, CUresult, CUdeviceptr, CUdeviceptr, std::size_t, CUstream)               \
  X(cuStreamCreate, CUresult, CUstream*, unsigned)                                                 \
  X(cuStreamSynchronize, CUresult, CUstream)                                                       \
  X(cuEventCreate, CUresult, CUevent*, unsigned)                                                   \
  X(cuEventRecord, CUresult, CUevent, CUstream)                                                    \
  X(cuEventSynchronize, CUresult, CUevent)                                                         \
  X(cuEventElapsedTime, CUresult, float*, CUevent, CUevent)                                        \
  X(cuEventDestroy_v2, CUresult, CUevent)                                                          \
  X(cuModuleLoadData, CUresult, CUmodule*, const void*)                                            \
  X(cuModuleGetFunction, CUresult, CUfunction*, CUmodule, const char*)                             \
  X(cuLaunchKernel, CUresult, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,        \
    unsigned, unsigned, CUstream, void**, void**)

// Stream-ordered allocation (CUDA 11.2+ drivers): used where present and supported; CUDA
// graphs with the v2 kernel node (12.0+ drivers): a captured plan's replays, where present.
#define KILN_CU_OPTIONAL_FUNCTIONS(X)                                                              \
  X(cuMemAllocAsync, CUresult, CUdeviceptr*, std::size_t, CUstream)                                \
  X(cuMemFreeAsync, CUresult, CUdeviceptr, CUstream)                                               \
  X(cuDeviceGetDefaultMemPool, CUresult, CUmemoryPool*, CUdevice)                                  \
  X(cuMemPoolSetAttribute, CUresult, CUmemoryPool, int, void*)                                     \
  X(cuMemPoolGetAttribute, CUresult, CUmemoryPool, int, void*)                                     \
  X(cuMemPoolTrimTo, CUresult, CUmemoryPool, std::size_t)                                          \
  X(cuGraphCreate, CUresult, CUgraph*, unsigned)                                                   \
  X(cuGraphAddKernelNode_v2, CUresult, CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t,     \
    const kernel_node_params*)                                                                     \
  X(cuGraphInstantiateWithFlags, CUresult, CUgraphExec*, CUgraph, unsigned long long)              \
  X(cuGraphExecKernelNodeSetParams_v2, CUresult, CUgraphExec, CUgraphNode,                         \
    const kernel_node_params*)                                                                     \
  X(cuGraphLaunch, CUresult, CUgraphExec, CUstream)                                                \
  X(cuGraphExecDestroy, CUresult, CUgraphExec)                                                     \
  X(cuGraphDestroy, CUresult, CUgraph)

#define KILN_NVRTC_FUNCTIONS(X)                                                                    \
  X(nvrtcVersion, nvrtcResult, int*, int*)                                                         \
  X(nvrtcGetErrorString, const char*, nvrtcResult)                                                 \
  X(nvrtcGetNumSupportedArchs, nvrtcResult, int*)                                                  \
  X(nvrtcGetSupportedArchs, nvrtcResult, int*)                                                     \
  X(nvrtcCreateProgram, nvrtcResult, nvrtcProgram*, const char*, const char*, int,                 \
    const char* const*, const char* const*)                                                        \
  X(nvrtcDestroyProgram, nvrtcResult, nvrtcProgram*)                                               \
  X(nvrtcCompileProgram, nvrtcResult, nvrtcProgram, int, const char* const*)                       \
  X(nvrtcGetProgramLogSize, nvrtcResult, nvrtcProgram, std::size_t*)                               \
  X(nvrtcGetProgramLog, nvrtcResult, nvrtcProgram, char*)                                          \
  X(nvrtcGetCUBINSize, nvrtcResult, nvrtcProgram, std::size_t*)                                    \
  X(nvrtcGetCUBIN, nvrtcResult, nvrtcProgram, char*)                                               \
  X(nvrtcGetPTXSize, nvrtcResult, nvrtcProgram, std::size_t*)                                      \
  X(nvrtcGetPTX, nvrtcResult, nvrtcProgram, char*)

#define KILN_CU_DECLARE(f, R, ...) R (*f)(__VA_ARGS__) = nullptr;

// Where the CUDA toolkit is, or why it is not there.
struct cuda_home {
  std::string path;    // empty when not found
  std::string why_not; // set when path is empty
  std::string include_dir() const { return path.empty() ? "" : path + "/include"; }
};

inline bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// From explicit values (tests) or the environment: KILN_CUDA_HOME, CUDA_HOME, /usr/local/cuda.
inline cuda_home find_cuda_home(const char* kiln_home, const char* home) {
  if (kiln_home && *kiln_home) {
    if (is_directory(kiln_home)) return {kiln_home, {}};
    return {{}, std::string("KILN_CUDA_HOME=") + kiln_home + " is not a directory"};
  }
  if (home && *home && is_directory(home)) return {home, {}};
  if (is_directory("/usr/local/cuda")) return {"/usr/local/cuda", {}};
  return {{}, "no CUDA toolkit: set KILN_CUDA_HOME or CUDA_HOME (/usr/local/cuda does not exist)"};
}
inline cuda_home cuda_home_from_settings() {
  const std::string kiln_home = settings::text("KILN_CUDA_HOME").value_or("");
  const std::string home = settings::text("CUDA_HOME").value_or("");
  return find_cuda_home(kiln_home.c_str(), home.c_str());
}
// Named locals, not temporaries, feed the static: clang 14 ended the temporaries of a
// static's initializer early (ASan: stack-use-after-scope; free() of a stack address).
inline const cuda_home& cuda_home_from_environment() {
  static const cuda_home h = cuda_home_from_settings();
  return h;
}

namespace detail {
// dlopen of the first name that loads; `tried` collects each failure.
inline void* open_first(const std::vector<std::string>& names, std::string& tried) {
  for (const auto& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = ::dlerror();
    tried += "\n  " + (e ? std::string(e) : n + ": cannot be opened");
  }
  return nullptr;
}
template <class F>
bool bind(void* lib, const char* name, F& f, std::string& why) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f && why.empty()) why = std::string("missing symbol ") + name;
  return f != nullptr;
}
} // namespace detail

struct nvrtc_library {
  KILN_NVRTC_FUNCTIONS(KILN_CU_DECLARE)
  std::string path;    // the library that was loaded
  std::string why_not; // empty when loaded
  int major = 0, minor = 0;
  std::vector<int> archs; // the sm_XX NVRTC can emit cubins for (e.g. 80, 90)
  bool ok() const { return why_not.empty(); }
  std::string version() const {
    return "NVRTC " + std::to_string(major) + "." + std::to_string(minor);
  }
};

// The functions of an opened NVRTC, its version and architectures.
inline nvrtc_library bind_nvrtc(void* lib, nvrtc_library n) {
  std::string why;
#define KILN_NVRTC_BIND(f, ...) detail::bind(lib, #f, n.f, why);
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_BIND)
#undef KILN_NVRTC_BIND
  if (!why.empty()) {
    n.why_not = "NVRTC library is unusable: " + why;
    return n;
  }
  char where[4096] = {};
  if (::dlinfo(lib, RTLD_DI_ORIGIN, where) == 0) n.path = where;
  n.nvrtcVersion(&n.major, &n.minor);
  int count = 0;
  if (n.nvrtcGetNumSupportedArchs(&count) == 0 && count > 0) {
    n.archs.resize(static_cast<std::size_t>(count));
    n.nvrtcGetSupportedArchs(n.archs.data());
  }
  return n;
}

// NVRTC from `home`'s lib64 when a home was found, then by soname on the loader's path.
// An explicit KILN_CUDA_HOME that is wrong makes NVRTC unavailable with that reason.
inline nvrtc_library load_nvrtc(const cuda_home& home, bool home_is_explicit) {
  nvrtc_library n;
  if (home.path.empty() && home_is_explicit) {
    n.why_not = "NVRTC not loaded: " + home.why_not;
    return n;
  }
  static const char* const sonames[] = {"libnvrtc.so",      "libnvrtc.so.13",   "libnvrtc.so.12",
                                        "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0"};
  std::vector<std::string> names;
  if (!home.path.empty())
    for (const char* s : sonames)
      names.push_back(home.path + "/lib64/" + s);
  if (!home_is_explicit)
    for (const char* s : sonames)
      names.push_back(s);
  std::string tried;
  void* lib = detail::open_first(names, tried);
  if (!lib) {
    n.why_not = "NVRTC (libnvrtc.so) not found; tried:" + tried;
    return n;
  }
  return bind_nvrtc(lib, std::move(n));
}

// KILN_NVRTC_LIBRARY, when set, is the only library tried: an explicit choice that does not
// load is the reason, not replaced by another NVRTC.
inline nvrtc_library load_nvrtc_file(const std::string& file) {
  nvrtc_library n;
  std::string tried;
  void* lib = detail::open_first({file}, tried);
  if (!lib) {
    n.why_not = "NVRTC (KILN_NVRTC_LIBRARY=" + file + ") cannot be loaded:" + tried;
    return n;
  }
  return bind_nvrtc(lib, std::move(n));
}

inline const nvrtc_library& nvrtc() {
  static const nvrtc_library n = [] {
    if (const auto file = settings::text("KILN_NVRTC_LIBRARY")) return load_nvrtc_file(*file);
    return load_nvrtc(cuda_home_from_environment(), settings::text("KILN_CUDA_HOME").has_value());
  }();
  return n;
}

struct driver_library {
  KILN_CU_FUNCTIONS(KILN_CU_DECLARE)
  KILN_CU_OPTIONAL_FUNCTIONS(KILN_CU_DECLARE)
  std::string why_not;
  int version = 0; // cuDriverGetVersion, e.g. 12040
  int devices = 0;
  bool ok() const { return why_not.empty(); }
  std::string error_string(CUresult r) const {
    const char* s = nullptr;
    if (cuGetErrorString && cuGetErrorString(r, &s) == 0 && s) return s;
    return "CUresult " + std::to_string(r);
  }
};

// The driver from `name` (libcuda.so.1 normally; tests pass a name that does not exist).
inline driver_library load_driver(const std::string& name = "libcuda.so.1") {
  driver_library d;
  std::string tried;
  void* lib = detail::open_first({name}, tried);
  if (!lib) {
    d.why_not = "no CUDA driver (" + name + " cannot be loaded:" + tried + ")";
    return d;
  }
  std::string why;
#define KILN_CU_BIND(f, ...) detail::bind(lib, #f, d.f, why);
  KILN_CU_FUNCTIONS(KILN_CU_BIND)
#undef KILN_CU_BIND
  if (!why.empty()) {
    d.why_not = "the CUDA driver is too old or unusable: " + why;
    return d;
  }
  std::string optional_missing; // absent on old drivers: plain cuMemAlloc then
#define KILN_CU_BIND(f, ...) detail::bind(lib, #f, d.f, optional_missing);
  KILN_CU_OPTIONAL_FUNCTIONS(KILN_CU_BIND)
#undef KILN_CU_BIND
  if (const CUresult r = d.cuInit(0); r != 0) {
    d.why_not = "cuInit failed: " + d.error_string(r) + " (no usable NVIDIA GPU or driver)";
    return d;
  }
  d.cuDriverGetVersion(&d.version);
  d.cuDeviceGetCount(&d.devices);
  if (d.devices == 0) d.why_not = "the CUDA driver reports no device";
  return d;
}

inline const driver_library& driver() {
  static const driver_library d =
      load_driver(settings::text("KILN_CUDA_DRIVER").value_or("libcuda.so.1"));
  return d;
}

inline void check(const driver_library& d, CUresult r, const char* what) {
  if (r != 0) throw error("cuda", std::string(what) + " failed", d.error_string(r));
}

} // namespace kiln::jit::cuda
