#pragma once
// A backend is a device's runtime as the DSL sees it: memory, moving bytes, waiting, and its
// executor (executor.hpp), which runs the planner's passes. Backends register a provider at
// static-initialization time; kiln::device("vulkan:0") and kiln::devices() ask the registry.
#include "kiln/device.hpp"
#include "kiln/dtype.hpp"
#include "kiln/linkage.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

struct memory_info {
  std::uint64_t in_use = 0;   // bytes held by live tensors
  std::uint64_t reserved = 0; // bytes held from the device, cached blocks included
  std::uint64_t peak = 0;     // the highest in_use so far
};

class device_executor; // executor.hpp

namespace detail {
// Why a GPU device kind has no backend: the program was built without kiln's device runtime.
inline constexpr const char* not_built_in =
    "its backend is not built into this program: link kiln::kiln (not kiln::core), or "
    "include <kiln/jit/src.hpp> in one file";
} // namespace detail

class backend {
public:
  virtual ~backend() = default;
  virtual kiln::device device() const = 0;
  virtual std::string describe() const = 0;
  // An empty string if tensors of this dtype can live and compute here, else why not.
  virtual std::string unsupported(dtype) const = 0;
  // Device memory, as an opaque handle that stays valid until release().
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* handle) noexcept = 0;
  // Host -> device (ordered after queued work that used the memory), device -> host
  // (waits for the queue), device -> device (queued).
  virtual void write(void* handle, std::size_t offset, const void* src, std::size_t bytes) = 0;
  virtual void read(void* handle, std::size_t offset, void* dst, std::size_t bytes) = 0;
  virtual void copy(void* src, std::size_t src_offset, void* dst, std::size_t dst_offset,
                    std::size_t bytes) = 0;
  virtual void synchronize() = 0;
  virtual memory_info stats() const = 0;
  virtual void empty_cache() = 0;
  // What runs passes and reductions here (executor.hpp); null where nothing can.
  virtual device_executor* executor() { return nullptr; }
};

// How a backend kind makes itself known: what it can list, and how it opens device N.
struct backend_provider {
  device_kind kind;
  std::function<std::vector<device_info>()> list;
  std::function<std::shared_ptr<backend>(int index)> open;
};

namespace detail {
struct backend_registry {
  std::mutex mutex;
  std::vector<backend_provider> providers;
  static backend_registry& instance() {
    static backend_registry r;
    return r;
  }
};
} // namespace detail

KILN_CORE_INLINE bool register_backend(backend_provider p);

// The open backend of a non-host device; throws kiln::error if it is unavailable.
KILN_CORE_INLINE std::shared_ptr<backend> backend_for(const device& d, const char* op = "device");

namespace detail {
KILN_CORE_INLINE std::vector<device_info> list_devices();
// kiln::devices() as one line for error messages: "host (available), vulkan:0 (available), ..."
KILN_CORE_INLINE std::string devices_line(const std::vector<device_info>& all);
} // namespace detail

inline std::vector<device_info> devices() { return detail::list_devices(); }

// Where creation functions place tensors when no device is given (as PyTorch's
// set_default_device): KILN_DEVICE if set, else the host. Read at each call, so a program
// may change it; the parsed device is cached per thread while the text stays the same
// (naming a device asks the backends, which is not free).
KILN_CORE_INLINE device default_device();

// Bytes in use, reserved and peak on a device (host: zeros; host memory is malloc's).
inline memory_info memory_stats(const device& d) {
  return d.is_host() ? memory_info{} : backend_for(d)->stats();
}
// Returns cached, unused device blocks to the device.
inline void empty_cache(const device& d) {
  if (!d.is_host()) backend_for(d)->empty_cache();
}
// Waits until every queued operation on the device has finished.
inline void synchronize(const device& d) {
  if (!d.is_host()) backend_for(d)->synchronize();
}

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/backend_impl.hpp"
#endif
