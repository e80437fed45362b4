#pragma once
// kiln::storage's definitions (see kiln/linkage.hpp for where they are compiled).
#include "kiln/storage.hpp"

#include <cstring>
#include <vector>

namespace kiln {

KILN_CORE_INLINE storage::storage(kiln::dtype dt, std::int64_t count, const kiln::device& dev)
    : dtype_(dt), count_(count), device_(dev) {
  const std::size_t bytes = static_cast<std::size_t>(count) * size_of(dt);
  if (!dev.is_host()) {
    backend_ = backend_for(dev, "alloc");
    if (const std::string why = backend_->unsupported(dt); !why.empty())
      throw error("alloc", "dtype is not supported on this device",
                  std::string(name(dt)) + " on " + dev.str() + ": " + why);
    handle_ = backend_->allocate(bytes);
    if (detail::poison_new_storage() && bytes) {
      const std::vector<unsigned char> ones(bytes, 0xFF);
      backend_->write(handle_, 0, ones.data(), bytes);
    }
    return;
  }
  const std::size_t padded = (bytes + 63) / 64 * 64;
  data_ = padded ? std::aligned_alloc(64, padded) : nullptr;
  if (padded && !data_)
    throw error("alloc", "out of host memory", std::to_string(padded) + " bytes");
  owned_ = true;
  if (detail::poison_new_storage() && padded) std::memset(data_, 0xFF, padded);
}
} // namespace kiln
