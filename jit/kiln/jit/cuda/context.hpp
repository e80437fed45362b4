#pragma once
// The CUDA runtime of one device, over the driver API (loader.hpp): its primary context,
// one stream as the in-order work queue (copies and launches are asynchronous; the host
// waits only to read), a caching allocator, modules and launches, and events for timing.
// Memory: where the driver offers stream-ordered allocation (memory pools), blocks come
// from cuMemAllocAsync/cuMemFreeAsync on the stream, the driver's pool (told to keep what is
// freed) being the cache; elsewhere a caching arena over cuMemAlloc
// (backend/caching_arena.hpp) keeps freed blocks by size for reuse.
#include "kiln/jit/backend/caching_arena.hpp"
#include "kiln/jit/cuda/loader.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>

namespace kiln::jit::cuda {

struct device_properties {
  std::string name;
  int cc = 0; // compute capability, major * 10 + minor
  int multiprocessors = 0;
  bool memory_pools = false;
};

using block = caching_arena<CUdeviceptr>::block;

class context {
public:
  explicit context(int index) : d_(driver()) {
    if (!d_.ok())
      throw error("device", "device is not available",
                  "cuda:" + std::to_string(index) + ": " + d_.why_not);
    if (index < 0 || index >= d_.devices)
      throw error("device", "no such device",
                  "cuda:" + std::to_string(index) + " (the driver reports " +
                      std::to_string(d_.devices) + ")");
    check(d_, d_.cuDeviceGet(&dev_, index), "cuDeviceGet");
    check(d_, d_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    make_current();
    char name[256] = {};
    d_.cuDeviceGetName(name, sizeof name, dev_);
    props_.name = name;
    int major = 0, minor = 0, pools = 0;
    d_.cuDeviceGetAttribute(&major, attr_compute_capability_major, dev_);
    d_.cuDeviceGetAttribute(&minor, attr_compute_capability_minor, dev_);
    d_.cuDeviceGetAttribute(&props_.multiprocessors, attr_multiprocessor_count, dev_);
    d_.cuDeviceGetAttribute(&pools, attr_memory_pools_supported, dev_);
    props_.cc = major * 10 + minor;
    props_.memory_pools = pools != 0 && d_.cuMemAllocAsync && d_.cuMemFreeAsync;
    // The pool keeps what is freed (its default gives it all back at each synchronization:
    // a statement's temporary then paid for mapping its pages every time, 0.2-0.3 ms for
    // 64 MiB on an H200); an allocation the device's memory cannot hold trims it first.
    if (props_.memory_pools && d_.cuDeviceGetDefaultMemPool && d_.cuMemPoolSetAttribute &&
        d_.cuMemPoolTrimTo && d_.cuDeviceGetDefaultMemPool(&pool_, dev_) == 0) {
      std::uint64_t keep = ~std::uint64_t{0};
      if (d_.cuMemPoolSetAttribute(pool_, mempool_release_threshold, &keep) != 0) pool_ = nullptr;
    }
    check(d_, d_.cuStreamCreate(&stream_, 1 /* non-blocking */), "cuStreamCreate");
  }
  // The primary context and stream live as long as the process: other statics (cached
  // kernels' modules) may still refer to them while statics are destroyed.
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  const device_properties& properties() const { return props_; }
  const driver_library& api() const { return d_; }
  CUstream stream() const { return stream_; }
  // The freed memory the pool keeps, given back to the device (after the queue drains).
  void trim_pool() {
    synchronize();
    check(d_, d_.cuMemPoolTrimTo(pool_, 0), "cuMemPoolTrimTo");
  }

  // The driver's calls act on the calling thread's current context.
  void make_current() const {
    thread_local CUcontext current = nullptr;
    if (current != ctx_) {
      check(d_, d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
      current = ctx_;
    }
  }

  // --- memory
  block allocate(std::size_t bytes) {
    make_current();
    if (props_.memory_pools) { // the driver's pool is the cache
      block b{0, caching_arena<CUdeviceptr>::round_up(bytes)};
      CUresult r = d_.cuMemAllocAsync(&b.handle, b.bytes, stream_);
      if (r == error_out_of_memory && pool_) { // what the pool keeps back, then once more
        trim_pool();
        r = d_.cuMemAllocAsync(&b.handle, b.bytes, stream_);
      }
      check(d_, r, ("cuMemAllocAsync of " + std::to_string(b.bytes) + " bytes").c_str());
      arena_.count_in(b.bytes);
      return b;
    }
    CUresult r = 0; // the last cuMemAlloc's, for the error when even an empty cache is not enough
    return arena_.take(
        bytes, [&](CUdeviceptr& p, std::size_t n) { return (r = d_.cuMemAlloc_v2(&p, n)) == 0; },
        [&](CUdeviceptr p) { d_.cuMemFree_v2(p); },
        [&](std::size_t) { check(d_, r, "cuMemAlloc"); });
  }
  void release(const block& b) noexcept {
    if (props_.memory_pools) {
      arena_.count_out(b.bytes);
      d_.cuCtxSetCurrent(ctx_); // no throwing here; a failure leaves the block to the pool
      d_.cuMemFreeAsync(b.handle, stream_);
    } else {
      arena_.give_back(b);
    }
  }
  void empty_cache() {
    synchronize();
    arena_.release_cached([&](CUdeviceptr p) { d_.cuMemFree_v2(p); });
    if (pool_) trim_pool();
  }
  using memory_stats = caching_arena<CUdeviceptr>::memory_stats;
  // With the driver's pool, `reserved` is what the device's default pool holds (kiln's
  // freed blocks it keeps, and any other user's of that pool in the process).
  memory_stats stats() const {
    auto s = arena_.stats(props_.memory_pools);
    std::uint64_t held = 0;
    if (pool_ && d_.cuMemPoolGetAttribute &&
        d_.cuMemPoolGetAttribute(pool_, mempool_reserved_mem_current, &held) == 0)
      s.reserved = std::max<std::uint64_t>(s.in_use, held);
    return s;
  }

  // --- copies, queued on the stream (a read waits for it)
  void write(const block& b, std::size_t off, const void* src, std::size_t n) {
    make_current();
    // From pageable memory the driver stages the bytes before returning: src may go.
    check(d_, d_.cuMemcpyHtoDAsync_v2(b.handle + off, src, n, stream_), "cuMemcpyHtoDAsync");
  }
  void read(const block& b, std::size_t off, void* dst, std::size_t n) {
    make_current();
    check(d_, d_.cuMemcpyDtoHAsync_v2(dst, b.handle + off, n, stream_), "cuMemcpyDtoHAsync");
    synchronize();
  }
  void copy(const block& s, std::size_t so, const block& d, std::size_t doff, std::size_t n) {
    make_current();
    check(d_, d_.cuMemcpyDtoDAsync_v2(d.handle + doff, s.handle + so, n, stream_),
          "cuMemcpyDtoDAsync");
  }
  void synchronize() const {
    make_current();
    check(d_, d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

  // --- kernels
  CUfunction load(std::span<const std::byte> image, const char* entry) {
    make_current();
    CUmodule m = nullptr;
    check(d_, d_.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
    CUfunction f = nullptr;
    check(d_, d_.cuModuleGetFunction(&f, m, entry), "cuModuleGetFunction");
    return f; // modules stay loaded for the process, as their kernels stay cached
  }
  // Tries to load an image (from the disk cache): nullptr when the driver rejects it.
  CUfunction try_load(std::span<const std::byte> image, const char* entry) noexcept {
    try {
      return load(image, entry);
    } catch (const error&) {
      return nullptr;
    }
  }
  // Queues f with its one by-value parameter struct (`params`, its bytes).
  void launch(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned block_size,
              std::span<const std::byte> params) {
    make_current();
    void* args[] = {const_cast<std::byte*>(params.data())};
    check(d_, d_.cuLaunchKernel(f, grid_x, grid_y, 1, block_size, 1, 1, 0, stream_, args, nullptr),
          "cuLaunchKernel");
  }

  // --- CUDA graphs: a captured plan's launches (kiln/plan/), made into a graph once and
  // launched as one; a replay with other buffers or scalars sets the nodes that changed.
  bool has_graphs() const {
    return d_.cuGraphCreate && d_.cuGraphAddKernelNode_v2 && d_.cuGraphInstantiateWithFlags &&
           d_.cuGraphExecKernelNodeSetParams_v2 && d_.cuGraphLaunch && d_.cuGraphExecDestroy &&
           d_.cuGraphDestroy;
  }
  struct graph_launch {
    CUfunction f;
    unsigned grid_x, grid_y, block_size;
    std::span<const std::byte> params; // the by-value struct (the driver copies it)
  };
  // A chain of kernel nodes, each after the one before; `nodes` in launch order (the
  // template graph is kept: its nodes name the executable graph's).
  struct graph {
    CUgraph g = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<CUgraphNode> nodes;
  };
  graph make_graph(std::span<const graph_launch> launches) {
    make_current();
    graph out;
    check(d_, d_.cuGraphCreate(&out.g, 0), "cuGraphCreate");
    try {
      for (const graph_launch& l : launches) {
        void* args[] = {const_cast<std::byte*>(l.params.data())};
        const kernel_node_params p = node(l, args);
        CUgraphNode n = nullptr;
        const CUgraphNode* after = out.nodes.empty() ? nullptr : &out.nodes.back();
        check(d_, d_.cuGraphAddKernelNode_v2(&n, out.g, after, after ? 1 : 0, &p),
              "cuGraphAddKernelNode");
        out.nodes.push_back(n);
      }
      check(d_, d_.cuGraphInstantiateWithFlags(&out.exec, out.g, 0), "cuGraphInstantiate");
    } catch (...) {
      destroy(out);
      throw;
    }
    ++graphs_made_;
    return out;
  }
  // Node i of g launches l from g's next launch on (launches already queued are unchanged).
  void set_node(graph& g, std::size_t i, const graph_launch& l) {
    make_current();
    void* args[] = {const_cast<std::byte*>(l.params.data())};
    const kernel_node_params p = node(l, args);
    check(d_, d_.cuGraphExecKernelNodeSetParams_v2(g.exec, g.nodes[i], &p),
          "cuGraphExecKernelNodeSetParams");
    ++nodes_set_;
  }
  void launch(graph& g) {
    make_current();
    check(d_, d_.cuGraphLaunch(g.exec, stream_), "cuGraphLaunch");
    ++graphs_launched_;
  }
  // (A launched graph is freed by the driver once its work has finished.)
  void destroy(graph& g) noexcept {
    if (g.exec) d_.cuGraphExecDestroy(g.exec);
    if (g.g) d_.cuGraphDestroy(g.g);
    g = graph{};
  }
  // Graphs made, launched, and nodes set so far (tests).
  struct graph_counts {
    std::uint64_t made, launched, nodes_set;
  };
  graph_counts graphs() const { return {graphs_made_, graphs_launched_, nodes_set_}; }

  // --- timing: device time between two points of the stream
  class timer {
  public:
    explicit timer(const context& c) : c_(c) {
      c.make_current();
      check(c.d_, c.d_.cuEventCreate(&a_, 0), "cuEventCreate");
      check(c.d_, c.d_.cuEventCreate(&b_, 0), "cuEventCreate");
    }
    ~timer() {
      c_.d_.cuEventDestroy_v2(a_);
      c_.d_.cuEventDestroy_v2(b_);
    }
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;
    // Each makes the context current: the thread may not be the one that made the timer.
    void start() {
      c_.make_current();
      check(c_.d_, c_.d_.cuEventRecord(a_, c_.stream_), "cuEventRecord");
    }
    void stop() {
      c_.make_current();
      check(c_.d_, c_.d_.cuEventRecord(b_, c_.stream_), "cuEventRecord");
    }
    double elapsed_ms() const {
      c_.make_current();
      check(c_.d_, c_.d_.cuEventSynchronize(b_), "cuEventSynchronize");
      float ms = 0;
      check(c_.d_, c_.d_.cuEventElapsedTime(&ms, a_, b_), "cuEventElapsedTime");
      return ms;
    }

  private:
    const context& c_;
    CUevent a_ = nullptr, b_ = nullptr;
  };

  // The backend's device timer (jit_backend::timer_begin): one pair of events, made on
  // first use; its own mutex, as timer_end_ns waits for the stream.
  void timer_begin() {
    std::lock_guard lock(timer_mutex_);
    if (!timer_) timer_ = std::make_unique<timer>(*this);
    timer_->start();
    timing_ = true;
  }
  // Nanoseconds of device time since timer_begin (waits for the work queued in between);
  // -1 without a timer_begin.
  double timer_end_ns() {
    std::lock_guard lock(timer_mutex_);
    if (!timing_) return -1;
    timing_ = false;
    timer_->stop();
    return timer_->elapsed_ms() * 1e6;
  }

  static std::shared_ptr<context> get(int index) {
    static std::mutex m;
    static std::map<int, std::shared_ptr<context>> open;
    std::lock_guard lock(m);
    auto& c = open[index];
    if (!c) c = std::make_shared<context>(index);
    return c;
  }

private:
  static kernel_node_params node(const graph_launch& l, void** args) {
    kernel_node_params p{};
    p.func = l.f;
    p.grid_x = l.grid_x;
    p.grid_y = l.grid_y;
    p.grid_z = 1;
    p.block_x = l.block_size;
    p.block_y = p.block_z = 1;
    p.kernel_params = args;
    return p;
  }

  const driver_library& d_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUmemoryPool pool_ = nullptr; // the device's default pool, where it keeps what is freed
  device_properties props_;
  caching_arena<CUdeviceptr> arena_;
  std::mutex timer_mutex_;
  std::unique_ptr<timer> timer_;
  bool timing_ = false;
  std::atomic<std::uint64_t> graphs_made_{0}, graphs_launched_{0}, nodes_set_{0};
};

} // namespace kiln::jit::cuda
