#pragma once
// Making tensors: from host data, constants, ranges, identity. Every function takes the
// device to create on: constants are filled there by a kernel; values computed on the host
// (data, ranges, identity) are made there and copied over once.
#include "kiln/eval/assign.hpp"

#include <cmath>
#include <cstring>

namespace kiln {

// Every creation function places its tensor on `dev`; left out, that is default_device():
// KILN_DEVICE if set, else the host (backend.hpp). Shapes are checked (negative extents,
// sizes past int64) and errors name the function.

namespace detail {
// t (made on the host) moved to dev, a failure there reported as `op`.
template <element T>
tensor<T> moved(const tensor<T>& t, const device& dev, const char* op) {
  refuse_if_capturing(op, "it writes host data, which a replay would not write again (make the "
                          "tensor outside the captured function and pass it as an argument)");
  try {
    return t.to(dev);
  } catch (const error& e) {
    if (e.op() != "to") throw;
    throw error(op, e.reason(), e.details());
  }
}
template <element T>
tensor<T> filled(const shape& s, T value, const device& dev, const char* op) {
  tensor<T> t(s, dev, op);
  t = value;
  return t;
}
} // namespace detail

template <element T>
tensor<T> empty(const shape& s, const device& dev = default_device()) {
  return tensor<T>(s, dev, "empty");
}

template <element T>
tensor<T> from(std::span<const T> data, const shape& s, const device& dev = default_device()) {
  const std::int64_t n = checked_numel(s, "from", sizeof(T));
  if (static_cast<std::int64_t>(data.size()) != n)
    throw error("from", "data size does not match the shape",
                std::to_string(data.size()) + " values for shape " + s.str() + " (" +
                    std::to_string(n) + " elements)");
  tensor<T> t(s, device{}, "from");
  if (!data.empty()) std::memcpy(t.data(), data.data(), data.size() * sizeof(T));
  return detail::moved(t, dev, "from");
}
template <element T>
tensor<T> from(const std::vector<T>& data, const shape& s, const device& dev = default_device()) {
  return from(std::span<const T>(data), s, dev);
}
template <element T>
tensor<T> from(std::initializer_list<T> data, const shape& s,
               const device& dev = default_device()) {
  return from(std::span<const T>(data.begin(), data.size()), s, dev);
}
// A rank-1 tensor of the values.
template <element T>
tensor<T> from(const std::vector<T>& data, const device& dev = default_device()) {
  return from(std::span<const T>(data), shape{static_cast<std::int64_t>(data.size())}, dev);
}
template <element T>
tensor<T> from(std::initializer_list<T> data, const device& dev = default_device()) {
  return from(std::span<const T>(data.begin(), data.size()),
              shape{static_cast<std::int64_t>(data.size())}, dev);
}

template <element T>
tensor<T> full(const shape& s, T value, const device& dev = default_device()) {
  return detail::filled<T>(s, value, dev, "full");
}
template <element T>
tensor<T> zeros(const shape& s, const device& dev = default_device()) {
  return detail::filled<T>(s, T(0), dev, "zeros");
}
template <element T>
tensor<T> ones(const shape& s, const device& dev = default_device()) {
  return detail::filled<T>(s, T(1), dev, "ones");
}

// start, start+step, ... up to (not including) stop.
template <element T>
tensor<T> arange(double start, double stop, double step = 1, const device& dev = default_device()) {
  const std::string args = "start " + std::to_string(start) + ", stop " + std::to_string(stop) +
                           ", step " + std::to_string(step);
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw error("arange", "step must be non-zero and bounds finite", args);
  // The count as a double first: converting one past 2^63 (or an infinite quotient of a
  // tiny step) to int64 is undefined and gave a negative extent.
  const double count = std::max(0.0, std::ceil((stop - start) / step));
  if (!(count < 0x1p63)) throw error("arange", "too many elements", args);
  const auto n = static_cast<std::int64_t>(count);
  tensor<T> t(shape{n}, device{}, "arange");
  T* p = t.data();
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = convert<T>(start + static_cast<double>(i) * step);
  return detail::moved(t, dev, "arange");
}
template <element T>
tensor<T> arange(double stop, const device& dev = default_device()) {
  return arange<T>(0, stop, 1, dev);
}

// n evenly spaced values from start to stop, both included.
template <element T>
tensor<T> linspace(double start, double stop, std::int64_t n,
                   const device& dev = default_device()) {
  if (n < 0) throw error("linspace", "negative count", std::to_string(n));
  tensor<T> t(shape{n}, device{}, "linspace");
  T* p = t.data();
  const double step = n > 1 ? (stop - start) / static_cast<double>(n - 1) : 0;
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = convert<T>(i == n - 1 && n > 1 ? stop : start + static_cast<double>(i) * step);
  return detail::moved(t, dev, "linspace");
}

// An n x m matrix with ones on the diagonal (m = -1: square).
template <element T>
tensor<T> eye(std::int64_t n, std::int64_t m = -1, const device& dev = default_device()) {
  if (m == -1) m = n;
  if (n < 0 || m < 0)
    throw error("eye", "negative size", "n " + std::to_string(n) + ", m " + std::to_string(m));
  tensor<T> t = detail::filled<T>(shape{n, m}, T(0), device{}, "eye");
  for (std::int64_t i = 0; i < std::min(n, m); ++i)
    t.data()[i * m + i] = T(1);
  return detail::moved(t, dev, "eye");
}

} // namespace kiln
