#pragma once
// pack<T...>: a tuple that is an aggregate, written `pack<decltype(f(i))...>{{f(i)}...}`, so
// that each element is built in place from the prvalue that makes it and never moved. The
// adjoint trees autodiff builds are deep, and their nodes' moves are calls (with a
// destructor each on every path out): a hana tuple made per level of the tree and
// flattened, or made by hana::transform, cost one or two of them per element per level.
// Its slots are an expression node's (expr.hpp), without the node's constructor.
#include "kiln/expr.hpp"

#include <cstddef>
#include <utility>

namespace kiln::autodiff {

template <class Seq, class... T>
struct pack_of;
template <std::size_t... I, class... T>
struct pack_of<std::index_sequence<I...>, T...> : detail::child_slot<I, T>... {};
template <class... T>
using pack = pack_of<std::index_sequence_for<T...>, T...>;

// Element J of a pack.
template <std::size_t J, class P>
const auto& slot(const P& p) {
  return detail::slot_value<J>(p);
}

} // namespace kiln::autodiff
