#pragma once
// The host_matmul family: the host's products (contractions/gemm_kernel.hpp), tuned as the
// host's passes are, keyed by the host's identity, the product's kind (accumulator dtype,
// whether an epilogue or a prologue is fused) and log2 of K and of its outputs. Its
// parameters: the cache blocking, the threads, and whether the BLAS provider
// (contractions/blas.hpp) computes the product — so the tuner measures kiln's fused kernel
// against "provider GEMM, then the epilogue as one pass" per shape and records the faster,
// as XLA's GEMM autotuner does between cuBLAS and its own fusions.
#include "kiln/contractions/blas.hpp"
#include "kiln/jit/tune/host.hpp"

namespace kiln::jit::tune {

namespace hm {
enum : std::size_t { provider, threads, kc, mc, nc, small };
} // namespace hm

// `provider`: whether one is loaded (else only 0); `by_default`: the default rule's choice.
inline space host_gemm_space(int pool_threads, bool provider, bool by_default) {
  std::vector<std::int64_t> threads;
  for (std::int64_t t = 1; t < pool_threads; t *= 2)
    threads.push_back(t);
  threads.push_back(pool_threads);
  return space(
      "host_matmul",
      {{"provider",
        provider ? "1: the BLAS provider (" + kiln::blas_library() +
                       ") computes the product, an epilogue then runs as one pass; 0: kiln's "
                       "kernel with the epilogue fused"
                 : std::string("0 only: no BLAS provider is loaded (KILN_BLAS_LIBRARY)"),
        provider ? std::vector<std::int64_t>{0, 1} : std::vector<std::int64_t>{0},
        provider && by_default ? 1 : 0},
       {"threads", "threads at most, the caller included", threads, pool_threads},
       {"kc",
        "contracted elements per packed panel (0: from the L1 size)",
        {0, 128, 256, 384, 512},
        0},
       {"mc", "rows of A per packed block (0: from the L2 size)", {0, 48, 96, 192, 384}, 0},
       {"nc", "cols of B per packed block (0: from the L3 size)", {0, 512, 1024, 2048, 4096}, 0},
       {"small",
        "1: the small kernel (operands read in place, no packing, one thread per product) "
        "where it can read both operands; 2: the packed kernel; 0: the rule (README, "
        "\"Contractions\")",
        {0, 1, 2},
        0}});
}

namespace detail {
// One space per (provider loaded, default choice): a kernel's default differs by size. Each
// made when first asked for: only the provider's name the library (and so open it).
inline const space& gemm_space_for(bool provider, bool by_default) {
  if (!provider) {
    static const space none = host_gemm_space(num_threads(), false, false);
    return none;
  }
  if (by_default) {
    static const space on = host_gemm_space(num_threads(), true, true);
    return on;
  }
  static const space off = host_gemm_space(num_threads(), true, false);
  return off;
}

// Per product kind: its id and memoized choices.
inline std::pair<const std::string*, choice_memo*> gemm_state(const kiln::detail::gemm_site& s) {
  static std::mutex m;
  static std::map<int, std::pair<std::string, std::unique_ptr<choice_memo>>> states;
  const int key = s.dtype * 4 + (s.epilogue ? 2 : 0) + (s.prologue ? 1 : 0);
  std::lock_guard lock(m);
  auto& st = states[key];
  if (!st.second) {
    st.first = hash_of(std::string("host product ") +
                       std::string(kiln::name(static_cast<dtype>(s.dtype))) +
                       (s.epilogue ? " epilogue" : "") + (s.prologue ? " prologue" : ""))
                   .hex();
    st.second = std::make_unique<choice_memo>();
  }
  return {&st.first, st.second.get()};
}
} // namespace detail

// The space `kiln-tune list` prints: the provider's, where one loads.
inline const space& host_gemm_tuning_space() {
  return detail::gemm_space_for(!kiln::blas_library().empty(), false);
}

inline kiln::detail::gemm_blocking host_gemm_choice(const kiln::detail::gemm_site& s) {
  if (!host_lookup_wanted()) return {}; // the defaults: choose_gemm applies the rule
  const auto [id, memo] = detail::gemm_state(s);
  const space& sp = detail::gemm_space_for(s.provider, kiln::detail::blas_by_default(s));
  const size_bucket bucket{log2_floor(std::max<std::int64_t>(s.k, 1)),
                           log2_floor(std::max<std::int64_t>(s.batch * s.m * s.n, 1))};
  if (recording()) record_host(host_identity(), *id, bucket);
  const config c = memo->get(nullptr, host_identity(), sp, *id, bucket, [](const config&) {});
  // Untuned, the default rule decides per product: the memo keeps one choice per bucket,
  // and products of one bucket may fall on either side of the rule.
  const bool tuned = last_choice(sp.family()).tuned;
  return {c[hm::mc],
          c[hm::nc],
          c[hm::kc],
          static_cast<int>(c[hm::threads]),
          tuned ? static_cast<int>(c[hm::provider]) : -1,
          static_cast<int>(c[hm::small])};
}

// Installed by the runtime (src.hpp) at static initialization.
inline bool install_host_gemm_chooser() {
  kiln::detail::host_gemm_chooser_slot().store(&host_gemm_choice, std::memory_order_release);
  return true;
}

} // namespace kiln::jit::tune
