#pragma once
// The host pass: everything about running a pass on the host except the arithmetic, written
// once for every expression type (the arithmetic is the pass type's kernel, kernel.hpp).
//   1. the operands' layouts are merged into the fewest dims (iteration_space.hpp), so a
//      contiguous expression is one linear run;
//   2. subtrees of one type over the same memory, strides and scalars share a memo slot;
//   3. the pass is split into tasks over the persistent thread pool when it is large;
//   4. each task walks its range in runs of one row (every operand contiguous along it), or
//      of at most `chunk` elements: operands with another stride along the row are packed
//      into a contiguous buffer first (a broadcast one once while it does not change), and
//      outputs with another stride are written from a buffer afterwards.
#include "kiln/error.hpp"
#include "kiln/eval/flat.hpp"
#include "kiln/eval/host_launch.hpp"
#include "kiln/eval/iteration_space.hpp"
#include "kiln/eval/kernel.hpp"
#include "kiln/eval/stream.hpp"
#include "kiln/eval/thread_pool.hpp"
#include "kiln/linkage.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

namespace kiln::detail {

// An array of n values, inline up to N (no allocation for the common small pass), left
// uninitialized: zeroing the pass's arrays cost more than a 16-element pass computes.
template <class T, std::size_t N>
class scratch {
public:
  explicit scratch(std::size_t n) : heap_(n > N ? new T[n] : nullptr) {}
  T* data() noexcept { return heap_ ? heap_.get() : inline_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }

private:
  T inline_[N];
  std::unique_ptr<T[]> heap_;
};

// One output of a pass: its first element, its layout and dtype, whether this run fills it.
struct host_output {
  void* data;
  const kiln::layout* layout;
  dtype type;
  bool active;
};

// Gives each memo site its slot: an earlier active site's, where both are of one type and
// read the same leaves (rep: a leaf's first equal leaf: same memory, size and strides) and
// the same scalars bit for bit; else a new one. Returns the number of slots; shared[s]
// says whether another site has site s's slot (a slot nobody shares only costs stores).
KILN_CORE_INLINE int index_memo_sites(std::span<const memo_site> sites,
                                      std::span<const bool> active, std::span<const int> rep,
                                      std::span<const flat_scalar> scalars, int* slot,
                                      bool* shared);

// Runs kernel k over `shape` (the active outputs' shape): outputs, then the leaves and
// scalars of every output's tree in order, leaves of inactive outputs ignored.
KILN_CORE_INLINE void run_host_pass(const host_kernel_ref& k, std::span<const host_output> outs,
                                    std::span<const flat_leaf> leaves,
                                    std::span<const flat_scalar> scalars, const kiln::shape& shape);

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/host_pass_impl.hpp"
#endif
