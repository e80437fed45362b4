#pragma once
// pack<T...>: a tuple that is an aggregate, written `pack<decltype(f(i))...>{{f(i)}...}`, so
// that each element is built in place from the prvalue that makes it and never moved. The
// adjoint trees autodiff builds are deep, and their nodes' moves are calls (with a
// destructor each on every path out): a hana tuple made per level of the tree and
// flattened, or made by hana::transform, cost one or two of them per element per level.
#include <cstddef>
#include <utility>

namespace kiln::autodiff {

template <std::size_t I, class T>
struct pack_slot {
  T v;
};
template <class Seq, class... T>
struct pack_of;
template <std::size_t... I, class... T>
struct pack_of<std::index_sequence<I...>, T...> : pack_slot<I, T>... {};
template <class... T>
using pack = pack_of<std::index_sequence_for<T...>, T...>;

// Element J of a pack.
template <std::size_t J, class T>
const T& slot(const pack_slot<J, T>& s) {
  return s.v;
}

} // namespace kiln::autodiff
