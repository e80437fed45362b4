#pragma once
// Printing like numpy: nested brackets, values right-aligned to a common width, large
// tensors summarised with "..." (the first and last 3 entries of each long dim).
#include "kiln/reduce.hpp"

#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln {

namespace detail {

template <class T>
std::string format_value(T v, bool all_integral) {
  char buf[64];
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_integral_v<T>)
    return std::to_string(v);
  else {
    const double d = static_cast<double>(static_cast<compute_t<T>>(v));
    if (d != d) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (all_integral && std::fabs(d) < 1e16) {
      std::snprintf(buf, sizeof buf, "%.0f.", d);
      return buf;
    }
    std::snprintf(buf, sizeof buf, "%.*g", std::numeric_limits<T>::digits > 24 ? 8 : 6, d);
    return buf;
  }
}

struct print_layout {
  static constexpr std::int64_t threshold = 1000, edge = 3;
};

template <element T>
void print_rec(std::ostream& os, const tensor<T>& t, int dim, std::int64_t off, bool summarise,
               const std::vector<std::string>& cells, std::size_t& cell, int width, int indent) {
  const std::int64_t n = t.shape()[dim];
  const bool cut = summarise && n > 2 * print_layout::edge;
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (cut && i == print_layout::edge) {
      os << (dim + 1 == t.rank() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - print_layout::edge;
    }
    if (dim + 1 == t.rank()) {
      const std::string& s = cells[cell++];
      os << std::string(width - s.size(), ' ') << s;
    } else {
      print_rec(os, t, dim + 1, off + i * t.strides()[dim], summarise, cells, cell, width,
                indent + 1);
    }
    if (i + 1 < n)
      os << (dim + 1 == t.rank()
                 ? ", "
                 : "," + std::string(t.rank() - dim - 1, '\n') + std::string(indent + 1, ' '));
  }
  os << ']';
}

// The values that will be shown, in print order.
template <element T>
void collect(const tensor<T>& t, int dim, std::int64_t off, bool summarise, std::vector<T>& out) {
  const std::int64_t n = t.shape()[dim];
  const bool cut = summarise && n > 2 * print_layout::edge;
  for (std::int64_t i = 0; i < n; ++i) {
    if (cut && i == print_layout::edge) i = n - print_layout::edge;
    const std::int64_t o = off + i * t.strides()[dim];
    if (dim + 1 == t.rank())
      out.push_back(t.data()[o]);
    else
      collect(t, dim + 1, o, summarise, out);
  }
}

} // namespace detail

template <element T>
std::ostream& operator<<(std::ostream& os, const tensor<T>& t) {
  detail::refuse_if_capturing("print", "it reads values on the host, and a replay runs no "
                                       "host code (print results after the call)");
  if (t.empty()) return os << "tensor(empty)";
  if (!t.device().is_host()) { // shown from a host copy, with where it lives
    const tensor<T> h = t.to(device{});
    std::ostringstream s;
    s << h;
    std::string text = s.str();
    text.insert(text.size() - 1, ", device=" + t.device().str());
    return os << text;
  }
  const std::string tail = ", dtype=" + std::string(name(t.dtype())) + ")";
  if (t.rank() == 0) return os << "tensor(" << detail::format_value(t.item(), false) << tail;
  if (t.size() == 0) return os << "tensor([], shape=" << t.shape().str() << tail;
  const bool summarise = t.size() > detail::print_layout::threshold;
  std::vector<T> vals;
  detail::collect(t, 0, 0, summarise, vals);
  bool integral = true;
  if constexpr (is_floating(dtype_of<T>()))
    for (T v : vals) {
      const double d = static_cast<double>(static_cast<compute_t<T>>(v));
      integral = integral && (!std::isfinite(d) || d == std::floor(d)); // as numpy
    }
  std::vector<std::string> cells;
  std::size_t width = 0;
  for (T v : vals) {
    cells.push_back(detail::format_value(v, integral));
    width = std::max(width, cells.back().size());
  }
  std::size_t cell = 0;
  os << "tensor(";
  detail::print_rec(os, t, 0, 0, summarise, cells, cell, static_cast<int>(width), 7);
  if (summarise) os << ", shape=" << t.shape().str();
  return os << tail;
}

// Printing an expression evaluates it.
template <class E>
requires(expression<E> && !is_tensor_v<E>) std::ostream& operator<<(std::ostream& os, const E& e) {
  return os << detail::evaluate(e);
}

} // namespace kiln
