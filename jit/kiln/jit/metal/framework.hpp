#pragma once
// The Metal runtime over Apple's Metal framework (runtime.hpp's interface), through the
// Objective-C runtime (objc.hpp), so it builds everywhere and runs where the framework loads:
// - the system default MTLDevice, one MTLCommandQueue as the in-order work queue, one command
//   buffer per dispatch, kept until a synchronize checks that each completed without error;
// - buffers in shared storage (unified memory on Apple silicon: the host reads and writes
//   their contents after waiting for queued work, no staging copies);
// - libraries from MSL source with safe math (MTLMathModeSafe, or fastMathEnabled = NO before
//   macOS 15) and MSL 2.4, compute pipeline states memoized per source;
// - the disk cache's binary: the source and a serialized MTLBinaryArchive of the pipeline
//   (the GPU code), so a warm start compiles the source's front end again (Metal keeps its own
//   cache of that) but not the pipeline: a pipeline made from the cache must come from the
//   archive (MTLPipelineOptionFailOnBinaryArchiveMiss); a miss (another GPU or OS) is a cache
//   miss, and the kernel is compiled again.
// KILN_METAL_FRAMEWORK names a library that stands in for the whole framework (the test
// suite's runs the MSL on CPU threads); it makes metal:0 listed on any platform.
#include "kiln/backend.hpp"
#include "kiln/jit/backend/subprocess.hpp"
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/metal/backend.hpp"
#include "kiln/jit/metal/objc.hpp"
#include "kiln/jit/metal/runtime.hpp"
#include "kiln/settings.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <unordered_map>

namespace kiln::jit::metal {

// The binary the disk cache keeps for a Metal kernel.
struct archived_kernel {
  static constexpr char magic[8] = {'K', 'I', 'L', 'N', 'M', 'T', 'L', '1'};
  std::string source;
  std::vector<std::byte> archive; // a serialized MTLBinaryArchive

  std::vector<std::byte> bytes() const {
    std::vector<std::byte> out(sizeof magic + 8 + source.size() + archive.size());
    const std::uint64_t n = source.size();
    std::memcpy(out.data(), magic, sizeof magic);
    std::memcpy(out.data() + sizeof magic, &n, 8);
    std::memcpy(out.data() + sizeof magic + 8, source.data(), source.size());
    if (!archive.empty())
      std::memcpy(out.data() + sizeof magic + 8 + source.size(), archive.data(), archive.size());
    return out;
  }
  // False for bytes that are not one (a truncated or foreign cache file).
  bool parse(std::span<const std::byte> b) {
    std::uint64_t n = 0;
    if (b.size() < sizeof magic + 8 || std::memcmp(b.data(), magic, sizeof magic) != 0)
      return false;
    std::memcpy(&n, b.data() + sizeof magic, 8);
    if (n > b.size() - sizeof magic - 8) return false;
    source.assign(reinterpret_cast<const char*>(b.data()) + sizeof magic + 8, n);
    archive.assign(b.begin() + static_cast<std::ptrdiff_t>(sizeof magic + 8 + n), b.end());
    return true;
  }
};

class framework_runtime final : public runtime {
  static constexpr objc::NSUInteger storage_shared = 0;            // MTLResourceStorageModeShared
  static constexpr objc::NSUInteger status_error = 5;              // MTLCommandBufferStatusError
  static constexpr objc::NSUInteger fail_on_archive_miss = 1 << 2; // MTLPipelineOption
  static constexpr objc::NSUInteger msl_2_4 = (2 << 16) + 4;       // MTLLanguageVersion2_4
  static constexpr std::size_t max_set_bytes = 4096;               // setBytes:length:atIndex:
  static constexpr std::size_t max_in_flight = 256; // command buffers before the oldest wait

public:
  explicit framework_runtime(const objc::library& api) : api_(api) {
    objc::pool p(api_);
    device_ = api_.create_device();
    // A command-line program on macOS may get no default device; the first of all devices.
    if (!device_ && api_.copy_all_devices)
      if (id all = api_.copy_all_devices()) {
        if (api_.send<objc::NSUInteger>(all, "count") > 0)
          device_ = api_.retain(api_.send(all, "objectAtIndex:", objc::NSUInteger{0}));
        api_.release(all);
      }
    if (!device_)
      throw error("device", "device is not available",
                  "MTLCreateSystemDefaultDevice found no Metal device");
    queue_ = api_.send(device_, "newCommandQueue");
    if (!queue_)
      throw error("device", "device is not available", "the Metal device made no command queue");
    const std::string os = api_.text(api_.send(api_.send(api_.cls("NSProcessInfo"), "processInfo"),
                                               "operatingSystemVersionString"));
    props_.name = api_.text(api_.send(device_, "name"));
    const auto registry = api_.send<std::uint64_t>(device_, "registryID");
    props_.identity = props_.name + " (registry " + std::to_string(registry) + ", " + os + ")";
    props_.compiler = "MSL 2.4, " + os;
    props_.threadgroup_bytes = api_.send<objc::NSUInteger>(device_, "maxThreadgroupMemoryLength");
    props_.timer = true; // GPUStartTime / GPUEndTime of command buffers
    max_buffer_ = api_.send<objc::NSUInteger>(device_, "maxBufferLength");
  }
  ~framework_runtime() override {
    try {
      synchronize();
    } catch (...) { // a failure nobody waited for has no one to report to now
    }
    for (auto& [source, pipe] : pipelines_)
      api_.release(pipe);
    api_.release(queue_);
    api_.release(device_);
  }
  framework_runtime(const framework_runtime&) = delete;
  framework_runtime& operator=(const framework_runtime&) = delete;

  const device_properties& properties() const override { return props_; }

  void* allocate(std::size_t bytes) override {
    if (bytes > max_buffer_) return nullptr;
    objc::pool p(api_);
    return api_.send(device_, "newBufferWithLength:options:",
                     static_cast<objc::NSUInteger>(std::max<std::size_t>(bytes, 1)),
                     storage_shared);
  }
  void release(void* buffer) noexcept override { api_.release(buffer); }
  void write(void* b, std::size_t off, const void* src, std::size_t n) override {
    synchronize(); // a queued kernel may still read what this overwrites
    std::memcpy(contents(b) + off, src, n);
  }
  void read(void* b, std::size_t off, void* dst, std::size_t n) override {
    synchronize();
    std::memcpy(dst, contents(b) + off, n);
  }
  void copy(void* s, std::size_t so, void* d, std::size_t doff, std::size_t n) override {
    synchronize();
    std::memmove(contents(d) + doff, contents(s) + so, n);
  }

  // Waits for every queued command buffer; the first that failed is the error.
  // Under wait_mutex_, so that no thread finds the queue empty and reads memory while
  // another still waits for the kernels writing it.
  void synchronize() override {
    std::lock_guard wait(wait_mutex_);
    std::vector<submitted> done;
    {
      std::lock_guard lock(mutex_);
      done.swap(in_flight_);
    }
    finish(done);
  }

  std::vector<std::byte> compile(const std::string& source, const char* entry) override {
    objc::pool p(api_);
    id lib = new_library(source); // throws the compiler's log
    id fn = api_.send(lib, "newFunctionWithName:", api_.string(entry));
    if (!fn) {
      api_.release(lib);
      throw error("jit", "the MSL library has no such kernel", entry);
    }
    id desc = make("MTLComputePipelineDescriptor");
    api_.send<void>(desc, "setComputeFunction:", fn);
    id err = nullptr;
    id pipe =
        api_.send(device_, "newComputePipelineStateWithDescriptor:options:reflection:error:", desc,
                  objc::NSUInteger{0}, static_cast<void*>(nullptr), &err);
    archived_kernel k{source, {}};
    if (pipe) k.archive = archive_of(desc); // empty when it could not be serialized
    api_.release(desc);
    api_.release(fn);
    api_.release(lib);
    if (!pipe)
      throw error("jit", "Metal cannot make a compute pipeline of the kernel",
                  api_.describe(err) + " on " + props_.name);
    std::lock_guard lock(mutex_);
    if (auto [it, fresh] = pipelines_.emplace(source, pipe); !fresh) api_.release(pipe);
    return k.bytes();
  }

  void* pipeline(std::span<const std::byte> binary, const char* entry) override {
    archived_kernel k;
    if (!k.parse(binary)) return nullptr;
    {
      std::lock_guard lock(mutex_);
      if (auto it = pipelines_.find(k.source); it != pipelines_.end()) return it->second;
    }
    if (k.archive.empty()) return nullptr;
    std::optional<temp_file> file; // made first: nothing to release when it fails
    try {
      file.emplace(".metallib", "metal");
      file->write_and_close(k.archive, "metal");
    } catch (const error&) {
      return nullptr;
    }
    objc::pool p(api_);
    id lib = nullptr;
    try {
      lib = new_library(k.source);
    } catch (const error&) {
      return nullptr; // compiled again, which reports the error
    }
    id fn = api_.send(lib, "newFunctionWithName:", api_.string(entry));
    id adesc = make("MTLBinaryArchiveDescriptor");
    api_.send<void>(adesc, "setUrl:", url(file->path()));
    id err = nullptr;
    id archive = api_.send(device_, "newBinaryArchiveWithDescriptor:error:", adesc, &err);
    id pipe = nullptr;
    if (fn && archive) {
      id desc = make("MTLComputePipelineDescriptor");
      api_.send<void>(desc, "setComputeFunction:", fn);
      api_.send<void>(
          desc, "setBinaryArchives:", api_.send(api_.cls("NSArray"), "arrayWithObject:", archive));
      pipe = api_.send(device_,
                       "newComputePipelineStateWithDescriptor:options:reflection:error:", desc,
                       fail_on_archive_miss, static_cast<void*>(nullptr), &err);
      api_.release(desc);
    }
    api_.release(archive);
    api_.release(adesc);
    api_.release(fn);
    api_.release(lib);
    if (!pipe) return nullptr; // not this GPU's or this OS's code: compiled again
    std::lock_guard lock(mutex_);
    auto [it, fresh] = pipelines_.emplace(k.source, pipe);
    if (!fresh) api_.release(pipe);
    return it->second;
  }

  void dispatch(void* pipeline, std::span<void* const> buffers, std::span<const std::byte> params,
                unsigned groups_x, unsigned groups_y, unsigned group) override {
    objc::pool p(api_);
    const auto most = api_.send<objc::NSUInteger>(pipeline, "maxTotalThreadsPerThreadgroup");
    if (group > most)
      throw error("metal", "the kernel's threadgroup is larger than its pipeline allows",
                  std::to_string(group) + " threads, at most " + std::to_string(most) + " on " +
                      props_.name);
    // The parameter block after the buffers: inline up to setBytes' limit, else a buffer of
    // its own that lives until the dispatch is known to have finished (made before the
    // encoder, which must not be left without endEncoding).
    static const std::byte none[16] = {};
    const std::span<const std::byte> block = params.empty() ? std::span(none) : params;
    id param_buffer = nullptr;
    if (block.size() > max_set_bytes) {
      param_buffer = api_.send(
          device_, "newBufferWithBytes:length:options:", static_cast<const void*>(block.data()),
          static_cast<objc::NSUInteger>(block.size()), storage_shared);
      if (!param_buffer) throw error("metal", "out of device memory", "the parameter block");
    }
    id cb = api_.send(queue_, "commandBuffer");
    id enc = cb ? api_.send(cb, "computeCommandEncoder") : nullptr;
    if (!enc) {
      api_.release(param_buffer);
      throw error("metal", "cannot encode a dispatch", props_.name);
    }
    api_.send<void>(enc, "setComputePipelineState:", pipeline);
    for (std::size_t i = 0; i < buffers.size(); ++i)
      api_.send<void>(enc, "setBuffer:offset:atIndex:", buffers[i], objc::NSUInteger{0},
                      static_cast<objc::NSUInteger>(i));
    const auto at = static_cast<objc::NSUInteger>(buffers.size());
    if (param_buffer)
      api_.send<void>(enc, "setBuffer:offset:atIndex:", param_buffer, objc::NSUInteger{0}, at);
    else
      api_.send<void>(enc, "setBytes:length:atIndex:", static_cast<const void*>(block.data()),
                      static_cast<objc::NSUInteger>(block.size()), at);
    api_.send<void>(enc, "dispatchThreadgroups:threadsPerThreadgroup:",
                    objc::mtl_size{groups_x, groups_y, 1}, objc::mtl_size{group, 1, 1});
    api_.send<void>(enc, "endEncoding");
    api_.send<void>(cb, "commit");
    std::vector<submitted> oldest;
    {
      std::lock_guard lock(mutex_);
      in_flight_.push_back({api_.retain(cb), param_buffer});
      if (timing_) timed_.push_back(api_.retain(cb));
      if (in_flight_.size() > max_in_flight) {
        oldest.assign(in_flight_.begin(), in_flight_.begin() + max_in_flight / 2);
        in_flight_.erase(in_flight_.begin(), in_flight_.begin() + max_in_flight / 2);
      }
    }
    if (!oldest.empty()) {
      std::lock_guard wait(wait_mutex_);
      finish(oldest);
    }
  }

  void timer_begin() override {
    synchronize();
    std::lock_guard lock(mutex_);
    release_timed();
    timing_ = true;
  }
  double timer_end_ns() override {
    synchronize();
    std::lock_guard lock(mutex_);
    timing_ = false;
    double ns = -1;
    if (!timed_.empty()) {
      const double start = api_.send<double>(timed_.front(), "GPUStartTime");
      const double end = api_.send<double>(timed_.back(), "GPUEndTime");
      if (end >= start && start > 0) ns = (end - start) * 1e9;
    }
    release_timed();
    return ns;
  }

private:
  using id = objc::id;
  struct submitted {
    id command_buffer;
    id param_buffer;
  };

  id make(const char* cls) const { return api_.send(api_.send(api_.cls(cls), "alloc"), "init"); }
  id url(const std::string& path) const {
    return api_.send(api_.cls("NSURL"), "fileURLWithPath:", api_.string(path));
  }
  char* contents(void* buffer) const { return api_.send<char*>(buffer, "contents"); }

  id new_library(const std::string& source) const {
    id opts = make("MTLCompileOptions");
    if (api_.responds(opts, "setMathMode:")) {
      api_.send<void>(opts, "setMathMode:", objc::NSUInteger{0}); // MTLMathModeSafe
      // and precise math functions: what fastMathEnabled = NO meant (their default is fast)
      api_.send<void>(opts, "setMathFloatingPointFunctions:", objc::NSUInteger{1});
    } else
      api_.send<void>(opts, "setFastMathEnabled:", false);
    api_.send<void>(opts, "setLanguageVersion:", msl_2_4);
    id err = nullptr;
    id lib =
        api_.send(device_, "newLibraryWithSource:options:error:", api_.string(source), opts, &err);
    api_.release(opts);
    if (!lib)
      throw error("jit", "the Metal compiler rejected the generated MSL",
                  api_.describe(err) + "\n" + codegen::numbered(source));
    return lib;
  }

  // The pipeline of `desc` as a serialized binary archive; empty when Metal cannot make one.
  std::vector<std::byte> archive_of(id desc) const noexcept {
    try {
      return serialized_archive(desc);
    } catch (...) { // the archive is optional: the kernel runs, the disk cache just misses
      return {};
    }
  }
  std::vector<std::byte> serialized_archive(id desc) const {
    id adesc = make("MTLBinaryArchiveDescriptor");
    id err = nullptr;
    id archive = api_.send(device_, "newBinaryArchiveWithDescriptor:error:", adesc, &err);
    std::vector<std::byte> out;
    if (archive &&
        api_.send<bool>(archive, "addComputePipelineFunctionsWithDescriptor:error:", desc, &err)) {
      temp_file file(".metallib", "metal");
      ::unlink(file.path().c_str()); // a path Metal makes itself
      if (api_.send<bool>(archive, "serializeToURL:error:", url(file.path()), &err)) {
        std::ifstream in(file.path(), std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
        out.resize(bytes.size());
        if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
      }
    }
    api_.release(archive);
    api_.release(adesc);
    return out;
  }

  void finish(std::vector<submitted>& done) {
    std::string failed;
    for (auto& s : done) {
      api_.send<void>(s.command_buffer, "waitUntilCompleted");
      if (failed.empty() &&
          api_.send<objc::NSUInteger>(s.command_buffer, "status") == status_error) {
        objc::pool p(api_);
        failed = api_.describe(api_.send(s.command_buffer, "error"), "the command buffer failed");
      }
      api_.release(s.command_buffer);
      api_.release(s.param_buffer);
    }
    done.clear();
    if (!failed.empty()) throw error("metal", "a kernel failed on the device", failed);
  }
  void release_timed() {
    for (id cb : timed_)
      api_.release(cb);
    timed_.clear();
  }

  const objc::library& api_;
  id device_ = nullptr, queue_ = nullptr;
  device_properties props_;
  std::size_t max_buffer_ = 0;
  std::mutex mutex_, wait_mutex_;
  std::vector<submitted> in_flight_;
  bool timing_ = false;
  std::vector<id> timed_;
  std::unordered_map<std::string, id> pipelines_; // per source: they live as the runtime
};

// The framework, from Apple's system libraries or KILN_METAL_FRAMEWORK, once per process.
inline const objc::library& framework() {
  static const objc::library l = [] {
    const auto stand_in = settings::text("KILN_METAL_FRAMEWORK");
#ifndef __APPLE__
    if (!stand_in) {
      objc::library none;
      none.why_not = "Metal runs only on Apple platforms";
      return none;
    }
#endif
    return objc::load(stand_in.value_or(""));
  }();
  return l;
}

// The runtime of metal:0, made once (nullptr and why when there is none).
inline const std::shared_ptr<runtime>& framework_device(std::string& why) {
  static std::string why_not;
  static const std::shared_ptr<runtime> rt = []() -> std::shared_ptr<runtime> {
    if (!framework().ok()) {
      why_not = framework().why_not;
      return nullptr;
    }
    try {
      return std::make_shared<framework_runtime>(framework());
    } catch (const error& e) {
      why_not = e.details();
      return nullptr;
    }
  }();
  why = why_not;
  return rt;
}

inline std::vector<device_info> list_metal_devices() {
  std::string why;
  const auto& rt = framework_device(why);
  if (!rt) return {{kiln::device(device_kind::metal, 0), false, why}};
  return {{kiln::device(device_kind::metal, 0), true, rt->properties().name + " (Metal)"}};
}

inline std::shared_ptr<backend> open_metal(int index) {
  std::string why;
  const auto& rt = framework_device(why);
  if (!rt)
    throw error("device", "device is not available", "metal:" + std::to_string(index) + ": " + why);
  if (index != 0)
    throw error("device", "no such device",
                "metal:" + std::to_string(index) + " (Metal has one device here: metal:0)");
  return metal_backend::open(index, rt);
}

} // namespace kiln::jit::metal
