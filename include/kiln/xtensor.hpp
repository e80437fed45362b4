#pragma once
// xtensor interop (include it explicitly; kiln.hpp does not pull xtensor in).
// view_of() wraps an xtensor container's memory without copying: the container must
// outlive the view, and must not be resized while the view is used. to_xtensor() copies
// any kiln expression out into a new xt::xarray.
#include "kiln/kiln.hpp"

#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

namespace kiln {

template <class C>
requires element<typename std::remove_cvref_t<C>::value_type>
auto view_of(C& container) {
  using T = typename std::remove_cvref_t<C>::value_type;
  layout l;
  for (std::size_t d = 0; d < container.dimension(); ++d) {
    l.shape.push_back(static_cast<std::int64_t>(container.shape()[d]));
    // xtensor gives extent-1 dims a stride of 0; either is right for kiln.
    l.strides.push_back(static_cast<std::int64_t>(container.strides()[d]));
  }
  auto st = std::make_shared<storage>(dtype_of<T>(), static_cast<std::int64_t>(container.size()),
                                      static_cast<void*>(container.data()));
  return tensor<T>(std::move(st), std::move(l));
}

template <class E>
requires expression<E> xt::xarray<value_t<E>> to_xtensor(const E& e) {
  const tensor<value_t<E>> t = detail::evaluate(e).to(device{}).contiguous();
  std::vector<std::size_t> shp(t.shape().begin(), t.shape().end());
  xt::xarray<value_t<E>> out(shp);
  std::copy(t.data(), t.data() + t.size(), out.data());
  return out;
}

} // namespace kiln
