#pragma once
// Making tensors: from host data, constants, ranges, identity. Every function takes the
// device to create on: constants are filled there by a kernel; values computed on the host
// (data, ranges, identity) are made there and copied over once.
#include "kiln/eval/assign.hpp"

#include <cmath>
#include <cstring>

namespace kiln {

template <element T>
tensor<T> empty(const shape& s, const device& dev = {}) {
  return tensor<T>(s, dev);
}

template <element T>
tensor<T> from(std::span<const T> data, const shape& s, const device& dev = {}) {
  for (auto e : s)
    if (e < 0) throw error("from", "negative extent", "shape " + s.str());
  if (static_cast<std::int64_t>(data.size()) != numel(s))
    throw error("from", "data size does not match the shape",
                std::to_string(data.size()) + " values for shape " + s.str() + " (" +
                    std::to_string(numel(s)) + " elements)");
  tensor<T> t(s);
  if (!data.empty()) std::memcpy(t.data(), data.data(), data.size() * sizeof(T));
  return t.to(dev);
}
template <element T>
tensor<T> from(const std::vector<T>& data, const shape& s, const device& dev = {}) {
  return from(std::span<const T>(data), s, dev);
}
template <element T>
tensor<T> from(std::initializer_list<T> data, const shape& s, const device& dev = {}) {
  return from(std::span<const T>(data.begin(), data.size()), s, dev);
}
// A rank-1 tensor of the values.
template <element T>
tensor<T> from(const std::vector<T>& data, const device& dev = {}) {
  return from(std::span<const T>(data), shape{static_cast<std::int64_t>(data.size())}, dev);
}
template <element T>
tensor<T> from(std::initializer_list<T> data, const device& dev = {}) {
  return from(std::span<const T>(data.begin(), data.size()),
              shape{static_cast<std::int64_t>(data.size())}, dev);
}

template <element T>
tensor<T> full(const shape& s, T value, const device& dev = {}) {
  for (auto e : s)
    if (e < 0) throw error("full", "negative extent", "shape " + s.str());
  tensor<T> t(s, dev);
  t = value;
  return t;
}
template <element T>
tensor<T> zeros(const shape& s, const device& dev = {}) {
  return full<T>(s, T(0), dev);
}
template <element T>
tensor<T> ones(const shape& s, const device& dev = {}) {
  return full<T>(s, T(1), dev);
}

// start, start+step, ... up to (not including) stop.
template <element T>
tensor<T> arange(double start, double stop, double step = 1, const device& dev = {}) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw error("arange", "step must be non-zero and bounds finite",
                "start " + std::to_string(start) + ", stop " + std::to_string(stop) + ", step " +
                    std::to_string(step));
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((stop - start) / step)));
  tensor<T> t(shape{n});
  T* p = t.data();
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = convert<T>(start + static_cast<double>(i) * step);
  return t.to(dev);
}
template <element T>
tensor<T> arange(double stop, const device& dev = {}) {
  return arange<T>(0, stop, 1, dev);
}

// n evenly spaced values from start to stop, both included.
template <element T>
tensor<T> linspace(double start, double stop, std::int64_t n, const device& dev = {}) {
  if (n < 0) throw error("linspace", "negative count", std::to_string(n));
  tensor<T> t(shape{n});
  T* p = t.data();
  const double step = n > 1 ? (stop - start) / static_cast<double>(n - 1) : 0;
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = convert<T>(i == n - 1 && n > 1 ? stop : start + static_cast<double>(i) * step);
  return t.to(dev);
}

// An n x m matrix with ones on the diagonal.
template <element T>
tensor<T> eye(std::int64_t n, std::int64_t m = -1, const device& dev = {}) {
  if (m < 0) m = n;
  if (n < 0) throw error("eye", "negative size", std::to_string(n));
  tensor<T> t = zeros<T>(shape{n, m});
  for (std::int64_t i = 0; i < std::min(n, m); ++i)
    t.data()[i * m + i] = T(1);
  return t.to(dev);
}

} // namespace kiln
