#pragma once
// The host pass's definitions (declared in host_pass.hpp; see kiln/linkage.hpp for where
// they are compiled).
#include "kiln/eval/host_pass.hpp"

namespace kiln::detail {

// Copies n elements of `bytes` bytes each from src to dst, `from` and `to` elements apart:
// packing a strided operand (to = 1; from = 0 fills with one value) or writing a strided
// output back (from = 1).
inline void copy_strided(unsigned char* dst, std::int64_t to, const unsigned char* src,
                         std::int64_t from, std::int64_t n, std::size_t bytes) noexcept {
  const auto walk = [&]<class U>(U) {
    const auto w = std::int64_t(sizeof(U));
    for (std::int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * to * w, src + i * from * w, sizeof(U));
  };
  switch (bytes) {
  case 1:
    return walk(std::uint8_t{});
  case 2:
    return walk(std::uint16_t{});
  case 4:
    return walk(std::uint32_t{});
  default:
    return walk(std::uint64_t{});
  }
}

KILN_CORE_INLINE int index_memo_sites(std::span<const memo_site> sites,
                                      std::span<const bool> active, std::span<const int> rep,
                                      std::span<const flat_scalar> scalars, int* slot,
                                      bool* shared) {
  int slots = 0;
  for (std::size_t s = 0; s < sites.size(); ++s) {
    const memo_site& a = sites[s];
    slot[s] = -1;
    shared[s] = false;
    if (!active[a.output]) continue;
    for (std::size_t p = 0; p < s && slot[s] < 0; ++p) {
      const memo_site& b = sites[p];
      if (slot[p] < 0 || b.type != a.type) continue;
      bool same = true;
      for (int i = 0; i < a.leaves && same; ++i)
        same = rep[a.leaf + i] == rep[b.leaf + i];
      for (int i = 0; i < a.scalars && same; ++i)
        same = scalars[a.scalar + i].bits == scalars[b.scalar + i].bits;
      if (same) slot[s] = slot[p], shared[s] = shared[p] = true;
    }
    if (slot[s] < 0) slot[s] = slots++;
  }
  for (std::size_t s = 0; s < sites.size(); ++s) // a slot's first site learns it late
    for (std::size_t p = s + 1; p < sites.size() && !shared[s] && slot[s] >= 0; ++p)
      shared[s] = slot[p] == slot[s];
  return slots;
}

// Which memo sites of a pass share a slot (index_memo_sites), worked out once per pass.
struct memo_plan {
  std::size_t sites;
  scratch<int, 16> slot;
  scratch<bool, 16> shared;
  int n_slots;
  memo_plan(const host_kernel_ref& k, std::span<const bool> active, std::span<const int> rep,
            std::span<const flat_scalar> scalars)
      : sites(k.memos.size()), slot(sites), shared(sites),
        n_slots(index_memo_sites(k.memos, active, rep, scalars, slot.data(), shared.data())) {}
};

// A task's memo slots, and a pointer per site: to its slot where it shares one, else null.
struct memo_storage {
  scratch<memo_slot, 4> store;
  scratch<memo_slot*, 16> slots;
  explicit memo_storage(memo_plan& p) : store(std::size_t(p.n_slots)), slots(p.sites) {
    for (std::size_t s = 0; s < p.sites; ++s)
      slots[s] = p.shared[s] ? store.data() + p.slot[s] : nullptr;
  }
};

// Whether no active output shares a byte with a leaf of an active output or with another
// active output (kernel_args::apart).
inline bool outputs_apart(std::span<const host_output> outs, std::span<const flat_leaf> leaves,
                          std::span<const int> leaf_start) {
  // An output's bytes, as byte_range gives a leaf's (its data points at element `offset`).
  const auto out_range = [](const host_output& o) {
    const auto [lo, hi] = o.layout->extent();
    const auto b = std::int64_t(size_of(o.type));
    const auto p = reinterpret_cast<std::uintptr_t>(o.data);
    return std::pair{p + std::uintptr_t((lo - o.layout->offset) * b),
                     p + std::uintptr_t((hi - o.layout->offset) * b)};
  };
  for (std::size_t o = 0; o < outs.size(); ++o) {
    if (!outs[o].active) continue;
    const auto r = out_range(outs[o]);
    for (std::size_t p = 0; p < o; ++p)
      if (outs[p].active && intersect(r, out_range(outs[p]))) return false;
    for (std::size_t q = 0; q < outs.size(); ++q) {
      if (!outs[q].active) continue;
      for (int l = leaf_start[q]; l < leaf_start[q + 1]; ++l) {
        const flat_leaf& f = leaves[std::size_t(l)];
        if (intersect(r, byte_range(f, *f.layout))) return false;
      }
    }
  }
  return true;
}

// The fewest elements a pass gives a thread: fewer run on the calling thread alone.
constexpr std::int64_t least_grain = 16384;

// Enough elements per thread that waking a worker pays off; heavier trees split sooner.
// (Waking a worker costs ~10-20 us; a cheap op streams ~5 elements/ns from cache.)
// A tuned launch may set the grain itself.
inline std::int64_t pass_grain(const host_kernel_ref& k, const host_launch& launch) {
  if (launch.grain > 0) return launch.grain;
  return std::max<std::int64_t>(least_grain, (1 << 19) / k.cost);
}

// Threads a pass may use: the pool's, or fewer where a tuned launch says so.
inline int pass_threads(const host_launch& launch) {
  const int all = num_threads();
  return launch.threads > 0 ? std::min(launch.threads, all) : all;
}

// Bytes ahead a pass computing math functions prefetches: kernel.hpp's, or a tuned launch's.
inline std::intptr_t pass_prefetch(const host_launch& launch) {
  return launch.prefetch >= 0 ? static_cast<std::intptr_t>(launch.prefetch) : prefetch_bytes;
}

// Whether a pass touching `footprint` bytes, whose outputs allow it, streams its stores.
inline bool streams(const host_launch& launch, std::int64_t footprint) {
  return launch.stream == 2 || (launch.stream == 0 && footprint >= stream_threshold());
}

// A pass of one task whose active operands all have the pass's shape and are contiguous:
// one run over their memory as it is. Returns false, having done nothing, for any other
// pass. What it skips (merging layouts, broadcast views, rows) is most of the cost of a
// pass of a few hundred elements.
inline bool run_contiguous_pass(const host_kernel_ref& k, std::span<const host_output> outs,
                                std::span<const flat_leaf> leaves,
                                std::span<const flat_scalar> scalars, const kiln::shape& shape,
                                std::int64_t total, const host_launch& launch) {
  const std::size_t no = outs.size(), nl = leaves.size();
  // A pass that splits is the general pass's; one task of any size is this one's (so a pass
  // too small to split runs the same code on 1 or more threads).
  if (total > pass_grain(k, launch) && pass_threads(launch) > 1) return false;
  const auto plain = [&](const kiln::layout& l) { return l.shape == shape && l.is_contiguous(); };
  // Raw pointers into the scratch arrays, taken once: through scratch::operator[] every
  // access tested for a heap array again (a store through a pointer may change it).
  scratch<void*, 8> out_store(no);
  scratch<const void*, 32> in_store(nl);
  void** out = out_store.data();
  const void** in = in_store.data();
  std::int64_t footprint = 0;
  std::size_t first = no; // the first active output
  for (std::size_t o = 0; o < no; ++o) {
    out[o] = nullptr;
    if (!outs[o].active) continue;
    if (!plain(*outs[o].layout)) return false;
    out[o] = outs[o].data;
    first = std::min(first, o);
    footprint += std::int64_t(size_of(outs[o].type));
  }
  std::size_t o = 0;
  for (std::size_t l = 0; l < nl; ++l) {
    while (o + 1 < no && int(l) >= k.leaf_start[o + 1])
      ++o;
    in[l] = nullptr;
    if (!outs[o].active) continue;
    const flat_leaf& f = leaves[l];
    if (!plain(*f.layout)) return false;
    const std::size_t b = size_of(f.type);
    in[l] =
        static_cast<const unsigned char*>(f.storage->data()) + f.layout->offset * std::int64_t(b);
    footprint += std::int64_t(b);
  }
  footprint *= total;
  // Memo slots: a leaf's first equal leaf is part of a memo key (memo.hpp). A pass with no
  // memo sites (most) skips the plan.
  scratch<int, 32> rep_store(k.memos.empty() ? 0 : nl);
  int* rep = rep_store.data();
  if (!k.memos.empty())
    for (std::size_t l = 0; l < nl; ++l) {
      rep[l] = int(l);
      if (!in[l]) continue;
      for (std::size_t p = 0; p < l; ++p)
        if (in[p] == in[l] && size_of(leaves[p].type) == size_of(leaves[l].type)) {
          rep[l] = int(p);
          break;
        }
    }
  scratch<bool, 8> active_store(no);
  bool* active = active_store.data();
  for (std::size_t p = 0; p < no; ++p)
    active[p] = outs[p].active;
  memo_plan memo(k, {active, no}, {rep, k.memos.empty() ? 0 : nl}, scalars);
  memo_storage m(memo);
  const bool stream = k.may_stream && streams(launch, footprint);
  // A run not a multiple of the batch ends with an overlapping batch where that is safe.
  const bool apart =
      total >= k.lanes && total % k.lanes != 0 && outputs_apart(outs, leaves, k.leaf_start);
  std::int64_t done = 0;
  if (stream && first < no) { // the elements before the first output's stores align run apart
    const std::size_t b = size_of(outs[first].type);
    const std::int64_t head = std::min(total, stream_head(out[first], b, std::size_t(k.lanes) * b));
    if (head > 0) {
      k.run({in, scalars.data(), m.slots.data(), m.store.data(), memo.n_slots, out, head, stream,
             apart, pass_prefetch(launch)});
      done = head;
      for (std::size_t l = 0; l < nl; ++l)
        if (in[l])
          in[l] = static_cast<const unsigned char*>(in[l]) +
                  head * std::int64_t(size_of(leaves[l].type));
      for (std::size_t p = 0; p < no; ++p)
        if (out[p])
          out[p] = static_cast<unsigned char*>(out[p]) + head * std::int64_t(size_of(outs[p].type));
    }
  }
  if (done < total)
    k.run({in, scalars.data(), m.slots.data(), m.store.data(), memo.n_slots, out, total - done,
           stream, apart, pass_prefetch(launch)});
  if (stream) stream_fence();
  return true;
}

KILN_CORE_INLINE void run_host_pass(const host_kernel_ref& k, std::span<const host_output> outs,
                                    std::span<const flat_leaf> leaves,
                                    std::span<const flat_scalar> scalars,
                                    const kiln::shape& shape) {
  const std::int64_t total = numel(shape);
  if (total == 0) return;
  // The launch settings: tuned for this pass and size, else the defaults (host_launch.hpp).
  const host_launch launch = host_launch_for(k, total);
  if (run_contiguous_pass(k, outs, leaves, scalars, shape, total, launch)) return;
  const std::size_t no = outs.size(), nl = leaves.size();
  scratch<bool, 8> active(no);
  scratch<int, 32> owner(nl); // the output whose tree holds each leaf
  for (std::size_t o = 0; o < no; ++o) {
    active[o] = outs[o].active;
    for (int l = k.leaf_start[o]; l < k.leaf_start[o + 1]; ++l)
      owner[l] = int(o);
  }

  // A local reference: the tasks on other threads must see this thread's space.
  thread_local iteration_space this_threads_space;
  iteration_space& space = this_threads_space;
  space.strides.clear();
  for (std::size_t o = 0; o < no; ++o)
    active[o] ? space.add(*outs[o].layout, shape) : space.add_idle();
  for (std::size_t l = 0; l < nl; ++l)
    active[owner[l]] ? space.add(*leaves[l].layout, shape) : space.add_idle();
  space.merge(shape);
  const int rank = space.extents.size(), outer = rank - 1;
  const std::int64_t inner = space.extents[outer];
  const auto* st = space.strides.data(); // outputs, then leaves

  // Where each operand starts, its element size, and the first equal leaf (packed once).
  scratch<const unsigned char*, 32> base(nl);
  scratch<std::size_t, 32> bytes(nl);
  scratch<int, 32> rep(nl);
  bool unit = true;
  std::int64_t footprint = 0;
  for (std::size_t o = 0; o < no; ++o)
    if (active[o]) {
      unit = unit && st[o][outer] == 1;
      footprint += outs[o].layout->size() * std::int64_t(size_of(outs[o].type));
    }
  for (std::size_t l = 0; l < nl; ++l) {
    const flat_leaf& f = leaves[l];
    bytes[l] = size_of(f.type);
    base[l] = static_cast<const unsigned char*>(f.storage->data()) +
              f.layout->offset * std::int64_t(bytes[l]);
    rep[l] = int(l);
    if (!active[owner[l]]) continue;
    unit = unit && st[no + l][outer] == 1;
    footprint += f.layout->size() * std::int64_t(bytes[l]);
    for (std::size_t p = 0; p < l; ++p)
      if (active[owner[p]] && base[p] == base[l] && bytes[p] == bytes[l] &&
          std::equal(st[no + p].begin(), st[no + p].end(), st[no + l].begin())) {
        rep[l] = int(p);
        break;
      }
  }

  // Shared subexpressions: sites of one type over the same values share a slot (memo.hpp).
  memo_plan memo(k, {active.data(), no}, {rep.data(), nl}, scalars);

  const std::int64_t grain = pass_grain(k, launch);
  const int threads = pass_threads(launch);
  // A few tasks per thread, taken dynamically, so a thread slowed by anything else on its
  // core does not leave the others idle at the end.
  const int tasks = threads == 1 ? 1
                                 : static_cast<int>(std::min<std::int64_t>(
                                       std::int64_t{threads} * 8, (total + grain - 1) / grain));
  // A pass too large for the last-level cache writes with streaming stores (stream.hpp),
  // where its outputs are whole contiguous tensors. Rows of a view into a larger tensor
  // (a stencil's interior) lost by them: the 5-point stencil of bench/heat2d.cpp (f64,
  // 2048^2, rows 64-byte aligned as kiln allocates them) ran 10-20% slower with streaming
  // stores than with ordinary ones on the AMD EPYC of bench/RESULTS.md; a hand loop over the
  // same rows ~8% slower (the same loop on rows 16 bytes off a line: 3% faster).
  bool whole = true;
  for (std::size_t o = 0; o < no; ++o)
    whole = whole && (!active[o] || outs[o].layout->is_contiguous());
  const bool stream = k.may_stream && unit && whole && streams(launch, footprint);
  const std::size_t first_out =
      std::size_t(std::find(active.data(), active.data() + no, true) - active.data());
  // Rows not a multiple of the batch end with an overlapping batch where that is safe (the
  // packing buffers are the pass's own: only the operands' own memory can meet).
  const bool apart = inner >= k.lanes && outputs_apart(outs, leaves, k.leaf_start);
  // Runs of at most `chunk` elements where operands are packed: a multiple of any batch.
  constexpr std::int64_t chunk = 512;
  // The leaves whose pointers change from run to run (moving), and those that repeat an
  // earlier one that does (copies); the others are set once per task: inactive ones, and
  // constant ones (one element for the whole pass, as a broadcast scalar or a gradient's
  // seed), packed once.
  scratch<int, 32> moving(nl), copies(nl);
  std::size_t n_moving = 0, n_copies = 0;
  const auto constant = [&](std::size_t l) {
    return std::all_of(st[no + l].begin(), st[no + l].begin() + rank,
                       [](std::int64_t x) { return x == 0; });
  };
  for (std::size_t l = 0; l < nl; ++l) {
    if (!active[owner[l]] || constant(std::size_t(rep[l]))) continue;
    if (rep[l] == int(l))
      moving[n_moving++] = int(l);
    else
      copies[n_copies++] = int(l);
  }

  auto body = [&](int t) {
    scratch<const void*, 32> in(nl);
    scratch<void*, 8> out(no);
    memo_storage m(memo);
    // Buffers for operands not contiguous along the row (none in a unit pass).
    std::unique_ptr<unsigned char[]> buffer;
    scratch<unsigned char*, 32> packed(unit ? 0 : nl + no);
    scratch<const unsigned char*, 32> packed_from(unit ? 0 : nl); // a broadcast's last source
    std::fill_n(packed_from.data(), unit ? 0 : nl, nullptr);
    if (!unit) {
      std::size_t need = 0;
      for (std::size_t l = 0; l < nl; ++l)
        if (active[owner[l]] && rep[l] == int(l) && st[no + l][outer] != 1)
          need += std::size_t(chunk) * bytes[l];
      for (std::size_t o = 0; o < no; ++o)
        if (active[o] && st[o][outer] != 1) need += std::size_t(chunk) * size_of(outs[o].type);
      buffer.reset(new unsigned char[need + 64]);
      unsigned char* next = buffer.get();
      for (std::size_t l = 0; l < nl; ++l)
        if (active[owner[l]] && rep[l] == int(l) && st[no + l][outer] != 1)
          packed[l] = next, next += std::size_t(chunk) * bytes[l];
      for (std::size_t o = 0; o < no; ++o)
        if (active[o] && st[o][outer] != 1)
          packed[nl + o] = next, next += std::size_t(chunk) * size_of(outs[o].type);
    }

    for (std::size_t l = 0; l < nl; ++l) { // inactive and constant leaves, once
      if (!active[owner[l]]) {
        in[l] = nullptr;
      } else if (rep[l] != int(l)) {
        in[l] = in[rep[l]];
      } else if (constant(l)) { // (stride 0 along the row: never a unit pass)
        copy_strided(packed[l], 1, base[l], 0, chunk, bytes[l]);
        in[l] = packed[l];
      }
    }
    constexpr std::int64_t align = 64;
    std::int64_t lo = total * t / tasks / align * align,
                 hi = total * (t + 1) / tasks / align * align;
    if (t == tasks - 1) hi = total;
    std::int64_t idx[max_rank] = {};
    std::int64_t j = space.locate(lo, idx);
    for (std::int64_t e = lo; e < hi;) {
      const std::int64_t jend = std::min(inner, j + (hi - e));
      for (std::int64_t j0 = j; j0 < jend;) {
        std::int64_t n = unit ? jend - j0 : std::min(chunk, jend - j0);
        if (stream &&
            first_out < no) { // (a unit pass) the elements before its stores align run apart
          const std::size_t b = size_of(outs[first_out].type);
          const std::int64_t head =
              stream_head(static_cast<unsigned char*>(outs[first_out].data) +
                              (row_offset(idx, st[first_out].data(), outer) + j0) * std::int64_t(b),
                          b, std::size_t(k.lanes) * b);
          if (head > 0) n = std::min(n, head);
        }
        for (std::size_t m = 0; m < n_moving; ++m) {
          const int l = moving[m];
          const std::int64_t s = st[no + l][outer];
          const unsigned char* p = base[l] + (row_offset(idx, st[no + l].data(), outer) + j0 * s) *
                                                 std::int64_t(bytes[l]);
          if (s == 1) {
            in[l] = p;
          } else if (s == 0) { // one value along the row: filled when it changes
            if (packed_from[l] != p) {
              copy_strided(packed[l], 1, p, 0, chunk, bytes[l]);
              packed_from[l] = p;
            }
            in[l] = packed[l];
          } else {
            copy_strided(packed[l], 1, p, s, n, bytes[l]);
            in[l] = packed[l];
          }
        }
        for (std::size_t m = 0; m < n_copies; ++m)
          in[copies[m]] = in[rep[copies[m]]];
        for (std::size_t o = 0; o < no; ++o) {
          if (!active[o]) {
            out[o] = nullptr;
            continue;
          }
          const std::int64_t s = st[o][outer];
          out[o] = s == 1 ? static_cast<unsigned char*>(outs[o].data) +
                                (row_offset(idx, st[o].data(), outer) + j0) *
                                    std::int64_t(size_of(outs[o].type))
                          : packed[nl + o];
        }
        k.run({in.data(), scalars.data(), m.slots.data(), m.store.data(), memo.n_slots, out.data(),
               n, stream, apart, pass_prefetch(launch)});
        for (std::size_t o = 0; o < no; ++o) {
          const std::int64_t s = st[o][outer];
          if (!active[o] || s == 1) continue;
          const std::size_t b = size_of(outs[o].type);
          copy_strided(static_cast<unsigned char*>(outs[o].data) +
                           (row_offset(idx, st[o].data(), outer) + j0 * s) * std::int64_t(b),
                       s, packed[nl + o], 1, n, b);
        }
        j0 += n;
      }
      e += jend - j;
      j = 0;
      space.next_row(idx);
    }
    if (stream) stream_fence();
  };
  if (tasks <= 1)
    body(0);
  else
    thread_pool::instance().parallel_for(tasks, body, threads, double(total) * double(k.cost));
}

} // namespace kiln::detail
