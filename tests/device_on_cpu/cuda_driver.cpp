// A CUDA driver and NVRTC that run kernels on the CPU: the library kiln opens as its CUDA
// driver (KILN_CUDA_DRIVER) and as NVRTC (KILN_NVRTC_LIBRARY) in the `cuda-on-cpu:` tests,
// so that the CUDA backend runs unchanged — code generation, parameter packing, the grid,
// the disk cache, the caching allocator — and only what the GPU would do is done here:
// - "NVRTC" compiles the generated CUDA C++ with the host compiler (cuda_shim.h first, the
//   program in a namespace, one entry per __global__ function) into a shared library, the
//   "cubin" (an ELF file, as a cubin is);
// - the "driver" dlopens that image, keeps device memory in host memory, and runs each
//   launch's grid on the host, a fiber per thread (grid_runner.hpp), in order, before returning
//   (a CUDA graph: its chain of kernel nodes, in order).
// Built with the test suite's compiler and flags, which it passes to the kernels it compiles
// (DEVICE_ON_CPU_CXX, _FLAGS: kiln_device_stand_in in tests/CMakeLists.txt): under the
// sanitizers, kernels are instrumented too.
#include "grid_runner.hpp"
#include "host_library.hpp"

#include <cstdint>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <regex>
#include <sstream>
#include <unordered_map>

#ifndef DEVICE_ON_CPU_CXX
#error "DEVICE_ON_CPU_CXX: the host compiler that compiles kernels"
#endif

namespace {

using CUresult = int;
using CUdeviceptr = std::uint64_t;
using nvrtcResult = int;

constexpr CUresult ok = 0, invalid_value = 1, out_of_memory = 2, invalid_image = 200,
                   not_found = 500, launch_failed = 719;

thread_local std::string last_error; // what cuGetErrorString reports for the last failure
CUresult fail(CUresult r, std::string why) {
  last_error = std::move(why);
  return r;
}

struct function {
  kiln_cpu_entry entry;
  std::string name;
  std::size_t args_bytes; // its by-value parameter's size
};

// CUDA graphs: a graph is a list of kernel nodes, each after the one before (kiln makes
// chains); its nodes' parameters are copied when a node is added or set, as the driver does,
// and an executable graph is a copy of its graph at instantiation.
struct kernel_node {
  const function* fn;
  unsigned grid[3], block[3];
  std::vector<unsigned char> args;
};
struct cpu_graph {
  std::deque<kernel_node> nodes; // (stable addresses: a CUgraphNode is one)
};
struct cpu_graph_exec {
  const cpu_graph* from;
  std::vector<kernel_node> nodes;
};
// cuda.h's CUDA_KERNEL_NODE_PARAMS_v2.
struct node_params {
  void* func;
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void** kernel_params;
  void** extra;
  void* kern;
  void* ctx;
};
CUresult node_from(kernel_node& n, const node_params* p) {
  if (!p || !p->func || !p->kernel_params || p->extra || p->shared_bytes != 0)
    return fail(invalid_value, "kiln's kernel nodes have a function, one parameter and no "
                               "dynamic shared memory");
  n.fn = static_cast<const function*>(p->func);
  n.grid[0] = p->grid_x;
  n.grid[1] = p->grid_y;
  n.grid[2] = p->grid_z;
  n.block[0] = p->block_x;
  n.block[1] = p->block_y;
  n.block[2] = p->block_z;
  const auto* a = static_cast<const unsigned char*>(p->kernel_params[0]);
  n.args.assign(a, a + n.fn->args_bytes);
  return ok;
}
struct event {
  std::chrono::steady_clock::time_point at;
};
std::mutex launch_mutex; // one grid at a time: a group's shared memory is a kernel's statics

// A CUfunction: kept as long as its module, i.e. for the process (kiln unloads none).
function* keep(function f) {
  static std::mutex m;
  static std::deque<function> all;
  std::lock_guard lock(m);
  return &all.emplace_back(std::move(f));
}

// The driver's stream-ordered pool (cuMemAllocAsync and the cuMemPool calls), only when
// KILN_CUDA_ON_CPU_POOL_BYTES gives the device memory a size: the pool keeps freed blocks
// up to its release threshold (the driver's default, 0, gives them back at each
// synchronization), an allocation that does not fit beside what it keeps fails with
// CUDA_ERROR_OUT_OF_MEMORY as on a GPU, and cuMemPoolTrimTo gives kept blocks back.
// Without the variable the device reports no pools and kiln's own caching arena runs.
struct memory_pool {
  std::mutex m;
  std::size_t limit = 0; // the device's memory; 0: no pools
  std::uint64_t used = 0, reserved = 0, used_high = 0, reserved_high = 0, threshold = 0;
  std::multimap<std::size_t, void*> kept; // freed, by size
  std::unordered_map<void*, std::size_t> live;

  void trim_to(std::uint64_t keep) { // with m held
    for (auto it = kept.begin(); it != kept.end() && reserved > keep;) {
      reserved -= it->first;
      kiln_cpu::device_free(it->second);
      it = kept.erase(it);
    }
  }
};
memory_pool& pool() {
  static memory_pool p;
  static const bool sized = [] {
    if (const char* v = std::getenv("KILN_CUDA_ON_CPU_POOL_BYTES"); v && *v)
      p.limit = std::strtoull(v, nullptr, 10);
    return true;
  }();
  (void)sized;
  return p;
}
} // namespace

extern "C" {

// ---- the driver API kiln's loader binds (jit/kiln/jit/cuda/loader.hpp)
CUresult cuInit(unsigned) { return ok; }
CUresult cuDriverGetVersion(int* v) {
  *v = 12080;
  return ok;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  static thread_local std::string text;
  text = "cuda-on-cpu error " + std::to_string(r) + (last_error.empty() ? "" : ": " + last_error);
  *s = text.c_str();
  return ok;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return ok;
}
CUresult cuDeviceGet(int* d, int i) {
  if (i != 0) return fail(invalid_value, "no device " + std::to_string(i));
  *d = 0;
  return ok;
}
CUresult cuDeviceGetName(char* name, int len, int) {
  std::snprintf(name, static_cast<std::size_t>(len), "cuda-on-cpu (host threads)");
  return ok;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
  case 16:
    *v = 2;
    return ok; // multiprocessors
  case 75:
    *v = 8;
    return ok; // compute capability 8.0
  case 76:
    *v = 0;
    return ok;
  case 115:
    *v = pool().limit != 0;
    return ok; // memory pools only when asked for (see memory_pool)
  default:
    return fail(invalid_value, "attribute " + std::to_string(attr));
  }
}
CUresult cuDevicePrimaryCtxRetain(void** c, int) {
  static int the_context;
  *c = &the_context;
  return ok;
}
CUresult cuCtxSetCurrent(void*) { return ok; }
// Device memory is host memory, filled with a pattern: kernels that read what nobody wrote
// get garbage, as on a GPU, rather than zeros.
CUresult cuMemAlloc_v2(CUdeviceptr* p, std::size_t n) {
  void* m = kiln_cpu::device_alloc(n);
  if (!m) return fail(out_of_memory, "host allocation of " + std::to_string(n) + " bytes");
  *p = reinterpret_cast<CUdeviceptr>(m);
  return ok;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  if (!kiln_cpu::device_free(reinterpret_cast<void*>(p)))
    return fail(invalid_value, "cuMemFree of a pointer that is not a live allocation");
  return ok;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, std::size_t n, void*) {
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return ok;
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, std::size_t n, void*) {
  std::memcpy(d, reinterpret_cast<const void*>(s), n);
  return ok;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, std::size_t n, void*) {
  std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n);
  return ok;
}
CUresult cuStreamCreate(void** s, unsigned) {
  static int the_stream;
  *s = &the_stream;
  return ok;
}
CUresult cuStreamSynchronize(void*) { // every call finished before it returned
  std::lock_guard lock(pool().m);
  pool().trim_to(pool().threshold);
  return ok;
}
CUresult cuMemAllocAsync(CUdeviceptr* p, std::size_t n, void*) {
  auto& q = pool();
  std::lock_guard lock(q.m);
  if (!q.limit) return fail(invalid_value, "cuMemAllocAsync: the device has no pools");
  void* m = nullptr;
  if (auto it = q.kept.find(n); it != q.kept.end()) {
    m = it->second;
    q.kept.erase(it);
  } else {
    if (q.reserved + n > q.limit)
      return fail(out_of_memory, std::to_string(n) + " bytes beside the pool's " +
                                     std::to_string(q.reserved) + " of " + std::to_string(q.limit));
    if (!(m = kiln_cpu::device_alloc(n)))
      return fail(out_of_memory, "host allocation of " + std::to_string(n) + " bytes");
    q.reserved += n;
    q.reserved_high = std::max(q.reserved_high, q.reserved);
  }
  q.live.emplace(m, n);
  q.used += n;
  q.used_high = std::max(q.used_high, q.used);
  *p = reinterpret_cast<CUdeviceptr>(m);
  return ok;
}
CUresult cuMemFreeAsync(CUdeviceptr p, void*) {
  auto& q = pool();
  std::lock_guard lock(q.m);
  const auto it = q.live.find(reinterpret_cast<void*>(p));
  if (it == q.live.end())
    return fail(invalid_value, "cuMemFreeAsync of a pointer the pool did not hand out");
  q.used -= it->second;
  q.kept.emplace(it->second, it->first);
  q.live.erase(it);
  return ok;
}
CUresult cuDeviceGetDefaultMemPool(void** p, int) {
  if (!pool().limit) return fail(invalid_value, "the device has no pools");
  *p = &pool();
  return ok;
}
CUresult cuMemPoolSetAttribute(void* p, int attr, void* v) {
  if (p != &pool() || attr != 4) return fail(invalid_value, "cuMemPoolSetAttribute");
  std::lock_guard lock(pool().m);
  pool().threshold = *static_cast<std::uint64_t*>(v);
  return ok;
}
CUresult cuMemPoolGetAttribute(void* p, int attr, void* v) {
  auto& q = pool();
  if (p != &q) return fail(invalid_value, "cuMemPoolGetAttribute: not the default pool");
  std::lock_guard lock(q.m);
  auto& out = *static_cast<std::uint64_t*>(v);
  switch (attr) {
  case 4:
    out = q.threshold;
    return ok;
  case 5:
    out = q.reserved;
    return ok;
  case 6:
    out = q.reserved_high;
    return ok;
  case 7:
    out = q.used;
    return ok;
  case 8:
    out = q.used_high;
    return ok;
  default:
    return fail(invalid_value, "cuMemPoolGetAttribute " + std::to_string(attr));
  }
}
CUresult cuMemPoolTrimTo(void* p, std::size_t keep) {
  if (p != &pool()) return fail(invalid_value, "cuMemPoolTrimTo: not the default pool");
  std::lock_guard lock(pool().m);
  pool().trim_to(keep);
  return ok;
}
CUresult cuEventCreate(void** e, unsigned) {
  *e = new event{};
  return ok;
}
CUresult cuEventRecord(void* e, void*) {
  static_cast<event*>(e)->at = std::chrono::steady_clock::now();
  return ok;
}
CUresult cuEventSynchronize(void*) { return ok; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  *ms = std::chrono::duration<float, std::milli>(static_cast<event*>(b)->at -
                                                 static_cast<event*>(a)->at)
            .count();
  return ok;
}
CUresult cuEventDestroy_v2(void* e) {
  delete static_cast<event*>(e);
  return ok;
}
// The image is a shared library: written to a file, opened, and the file removed.
CUresult cuModuleLoadData(void** m, const void* image) {
  const std::size_t n = kiln_cpu::elf_size(static_cast<const unsigned char*>(image));
  if (n == 0) return fail(invalid_image, "the image is not a 64-bit ELF shared library");
  std::string why;
  void* lib = kiln_cpu::open_image(image, n, why);
  if (!lib) return fail(invalid_image, why);
  *m = lib;
  return ok;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  const kiln_cpu_entry e = kiln_cpu::entry_of(m, name);
  using size_fn = unsigned long (*)();
  const auto size =
      reinterpret_cast<size_fn>(::dlsym(m, (std::string("kiln_cpu_args_size_") + name).c_str()));
  if (!e || !size) return fail(not_found, std::string("no kernel ") + name + " in the module");
  *f = keep({e, name, size()});
  return ok;
}
CUresult cuGraphCreate(void** g, unsigned) {
  *g = new cpu_graph;
  return ok;
}
CUresult cuGraphAddKernelNode_v2(void** node, void* g, void* const* after, std::size_t n_after,
                                 const node_params* p) {
  auto* graph = static_cast<cpu_graph*>(g);
  if (n_after > 1 || (n_after == 1) != !graph->nodes.empty() ||
      (n_after == 1 && after[0] != &graph->nodes.back()))
    return fail(invalid_value, "this driver's graphs are chains: each node after the last one");
  kernel_node k;
  if (const CUresult r = node_from(k, p); r != ok) return r;
  graph->nodes.push_back(std::move(k));
  *node = &graph->nodes.back();
  return ok;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* g, unsigned long long) {
  const auto* graph = static_cast<const cpu_graph*>(g);
  *exec = new cpu_graph_exec{graph, {graph->nodes.begin(), graph->nodes.end()}};
  return ok;
}
CUresult cuGraphExecKernelNodeSetParams_v2(void* exec, void* node, const node_params* p) {
  auto* e = static_cast<cpu_graph_exec*>(exec);
  for (std::size_t i = 0; i < e->from->nodes.size(); ++i)
    if (&e->from->nodes[i] == node) {
      kernel_node k;
      if (const CUresult r = node_from(k, p); r != ok) return r;
      if (k.fn != e->nodes[i].fn)
        return fail(invalid_value, "a kernel node's function cannot change in an executable graph");
      e->nodes[i] = std::move(k);
      return ok;
    }
  return fail(invalid_value, "the node is not of the graph the executable graph was made from");
}
CUresult cuGraphLaunch(void* exec, void*) {
  std::lock_guard lock(launch_mutex);
  for (const kernel_node& n : static_cast<const cpu_graph_exec*>(exec)->nodes) {
    const std::string why = kiln_cpu::run_grid(n.fn->entry, n.args.data(), n.grid, n.block);
    if (!why.empty()) return fail(launch_failed, n.fn->name + ": " + why);
  }
  return ok;
}
CUresult cuGraphExecDestroy(void* exec) {
  delete static_cast<cpu_graph_exec*>(exec);
  return ok;
}
CUresult cuGraphDestroy(void* g) {
  delete static_cast<cpu_graph*>(g);
  return ok;
}

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared_bytes, void*, void** args, void** extra) {
  if (!args || extra || shared_bytes != 0)
    return fail(invalid_value, "kiln launches with one parameter and no dynamic shared memory");
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  std::lock_guard lock(launch_mutex);
  auto* fn = static_cast<function*>(f);
  const std::string why = kiln_cpu::run_grid(fn->entry, args[0], grid, block);
  if (!why.empty()) return fail(launch_failed, fn->name + ": " + why);
  return ok;
}

} // extern "C"

// ---- NVRTC: the host compiler in its place
namespace {

struct program {
  std::string source, log;
  std::vector<char> image;
};

// The names of the program's __global__ functions.
std::vector<std::string> kernels_of(const std::string& source) {
  static const std::regex global(
      R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\()");
  std::vector<std::string> names;
  for (std::sregex_iterator i(source.begin(), source.end(), global), end; i != end; ++i)
    names.push_back((*i)[1]);
  return names;
}

// The host translation unit: the program's #includes (kept in place as blank lines, so that
// the compiler's line numbers are the program's), the shim, the program in a namespace
// (its typedefs of int64_t and friends would clash with the C library's), the entries.
std::string host_unit(const std::string& source) {
  std::string includes, body;
  std::istringstream in(source);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#include", 0) == 0) {
      includes += line + "\n";
      line.clear();
    }
    body += line + "\n";
  }
  std::string s = includes + "#include \"cuda_shim.h\"\nnamespace kiln_cuda_program {\n" +
                  "#line 1 \"kiln_kernel.cu\"\n" + body + "}\n";
  for (const auto& k : kernels_of(source))
    s += "extern \"C\" void kiln_cpu_entry_" + k +
         "(const void* a, const kiln_cpu_thread* t) { kiln_cpu::call(&kiln_cuda_program::" + k +
         ", a, t); }\nextern \"C\" unsigned long kiln_cpu_args_size_" + k +
         "() { return kiln_cpu::args_size(&kiln_cuda_program::" + k + "); }\n";
  return s;
}

} // namespace

extern "C" {

nvrtcResult nvrtcVersion(int* major, int* minor) {
  *major = 12;
  *minor = 8;
  return 0;
}
const char* nvrtcGetErrorString(nvrtcResult r) {
  switch (r) {
  case 0:
    return "NVRTC_SUCCESS";
  case 3:
    return "NVRTC_ERROR_INVALID_INPUT";
  case 6:
    return "NVRTC_ERROR_COMPILATION";
  default:
    return "NVRTC_ERROR (cuda-on-cpu)";
  }
}
constexpr int archs[] = {50, 60, 70, 75, 80, 86, 89, 90};
nvrtcResult nvrtcGetNumSupportedArchs(int* n) {
  *n = static_cast<int>(std::size(archs));
  return 0;
}
nvrtcResult nvrtcGetSupportedArchs(int* a) {
  std::copy(std::begin(archs), std::end(archs), a);
  return 0;
}
nvrtcResult nvrtcCreateProgram(void** p, const char* src, const char*, int, const char* const*,
                               const char* const*) {
  if (!src) return 3;
  *p = new program{src, {}, {}};
  return 0;
}
nvrtcResult nvrtcDestroyProgram(void** p) {
  delete static_cast<program*>(*p);
  *p = nullptr;
  return 0;
}
// NVRTC's options that matter on the host: -I (cuda_fp16.h) and -std; --fmad=false is the
// host compiler's -ffp-contract=off, which is always on (kiln asks for it everywhere).
nvrtcResult nvrtcCompileProgram(void* p, int n, const char* const* options) {
  auto* prog = static_cast<program*>(p);
  std::vector<std::string> flags{"-std=c++17",
                                 "-O1",
                                 "-fPIC",
                                 "-shared",
                                 "-ffp-contract=off",
                                 "-fno-fast-math",
                                 "-w",
                                 "-I" DEVICE_ON_CPU_SHIM_DIR};
  for (const auto& f : kiln_cpu::words(DEVICE_ON_CPU_FLAGS))
    flags.push_back(f);
  for (int i = 0; i < n; ++i)
    if (std::strncmp(options[i], "-I", 2) == 0) flags.push_back(options[i]);
  prog->image = kiln_cpu::compile_shared(DEVICE_ON_CPU_CXX, flags, host_unit(prog->source),
                                         prog->log, DEVICE_ON_CPU_PCH_DIR);
  return prog->image.empty() ? 6 : 0;
}
nvrtcResult nvrtcGetProgramLogSize(void* p, std::size_t* n) {
  *n = static_cast<program*>(p)->log.size() + 1;
  return 0;
}
nvrtcResult nvrtcGetProgramLog(void* p, char* log) {
  const auto& l = static_cast<program*>(p)->log;
  std::memcpy(log, l.c_str(), l.size() + 1);
  return 0;
}
nvrtcResult nvrtcGetCUBINSize(void* p, std::size_t* n) {
  *n = static_cast<program*>(p)->image.size();
  return 0;
}
nvrtcResult nvrtcGetCUBIN(void* p, char* out) {
  const auto& i = static_cast<program*>(p)->image;
  std::memcpy(out, i.data(), i.size());
  return 0;
}
// Never asked for: every architecture the device reports is a "cubin" target here.
nvrtcResult nvrtcGetPTXSize(void*, std::size_t*) { return 3; }
nvrtcResult nvrtcGetPTX(void*, char*) { return 3; }

} // extern "C"
