#pragma once
// cuBLAS as the provider of plain products on CUDA (the planner asks through
// device_executor::provider_gemm, contractions/device_matmul_impl.hpp): opened with dlopen at
// the first product that may use it, never linked, so a program runs the same without it.
// KILN_CUBLAS_LIBRARY names the library (`none`: no provider; one that does not load or cannot
// make a handle on the device is a kiln::error at the products that would use it); by default
// the first of CUDA 13's, 12's and 11's that loads (from the CUDA toolkit's lib64, then by
// soname), else none; one that then cannot make a handle on the device is no provider.
#include "kiln/error.hpp"
#include "kiln/executor.hpp"
#include "kiln/jit/cuda/context.hpp"
#include "kiln/settings.hpp"

#include <dlfcn.h>
#include <map>
#include <mutex>
#include <vector>

namespace kiln::jit::cuda {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;

struct cublas_library {
  std::string path;   // empty: no provider
  bool named = false; // by KILN_CUBLAS_LIBRARY: a failure is an error, not "none"
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, CUstream) = nullptr;
  cublasStatus_t (*gemm)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int,
                         int, long long, const void*, int, int, long long, const void*, void*, int,
                         int, long long, int, int, int) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, int) = nullptr;
};

// Opens `name` (a path or a soname) and finds what kiln calls; why not, else "".
inline std::string open_cublas(const std::string& name, cublas_library& l) {
  void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    return e ? e : "dlopen failed";
  }
  auto sym = [&](auto& f, const char* s) {
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(::dlsym(h, s));
    return f != nullptr;
  };
  if (!sym(l.create, "cublasCreate_v2") || !sym(l.set_stream, "cublasSetStream_v2") ||
      !sym(l.gemm, "cublasGemmStridedBatchedEx")) {
    ::dlclose(h);
    return name + " has no cublasCreate_v2, cublasSetStream_v2 or cublasGemmStridedBatchedEx";
  }
  sym(l.status_string, "cublasGetStatusString");
  sym(l.set_math_mode, "cublasSetMathMode");
  l.path = name;
  return {}; // the library stays open for the process
}

inline const cublas_library& cublas() {
  static const cublas_library l = [] {
    cublas_library r;
    if (const auto v = settings::text("KILN_CUBLAS_LIBRARY")) {
      if (*v == "none") return r;
      r.named = true;
      if (std::string why = open_cublas(*v, r); !why.empty())
        throw error("matmul", "the cuBLAS library does not load",
                    "KILN_CUBLAS_LIBRARY=" + *v + ": " + why);
      return r;
    }
    // The CUDA toolkit's own first (NVRTC's home), then by soname on the loader's path.
    std::vector<std::string> names;
    const cuda_home home = cuda_home_from_environment();
    // (Not an unversioned libcublas.so: it may be a CUDA 10 one, without the compute types.)
    for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"})
      if (!home.path.empty()) names.push_back(home.path + "/lib64/" + n);
    for (const char* n : {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"})
      names.push_back(n);
    for (const std::string& n : names)
      if (open_cublas(n, r).empty()) break;
    return r;
  }();
  return l;
}

// The library's handle for a device's context, its work queued on kiln's stream; none where
// it cannot make one (a default library on a machine where it does not work: no provider).
class cublas_handles {
public:
  cublasHandle_t get(context& ctx, int index) {
    const cublas_library& l = cublas();
    if (l.path.empty()) return nullptr;
    std::lock_guard lock(mutex_);
    auto [it, fresh] = handles_.try_emplace(index, nullptr);
    if (fresh) {
      ctx.make_current();
      cublasHandle_t h = nullptr;
      cublasStatus_t r = l.create(&h);
      if (r == 0) r = l.set_stream(h, ctx.stream());
      // 16-bit results reduced in f32 (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), as
      // kiln's rule and kernel do: the default lets split-K reductions run in f16/bf16.
      if (r == 0 && l.set_math_mode) r = l.set_math_mode(h, 16);
      if (r != 0) {
        if (l.named) {
          handles_.erase(it); // (asked again at the next product: an error each time)
          throw error("matmul", "cuBLAS cannot start on the device",
                      "cuda:" + std::to_string(index) + ": " + status(r));
        }
        h = nullptr;
      }
      it->second = h; // (a handle lives as long as the process, as its context does)
    }
    return it->second;
  }
  static std::string status(cublasStatus_t r) {
    const cublas_library& l = cublas();
    const char* s = l.status_string ? l.status_string(r) : nullptr;
    return "cuBLAS status " + std::to_string(r) + (s ? std::string(" (") + s + ")" : "");
  }

private:
  std::mutex mutex_;
  std::map<int, cublasHandle_t> handles_;
};

inline cublas_handles& cublas_handles_of_process() {
  static cublas_handles h;
  return h;
}

// cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h).
inline int cuda_data_type(dtype t) {
  switch (t) {
  case dtype::f32:
    return 0;
  case dtype::f64:
    return 1;
  case dtype::f16:
    return 2;
  case dtype::bf16:
    return 14;
  default:
    return -1;
  }
}

// g by cuBLAS on the device of context ctx, or false (no library, or not a product it takes).
// Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ: B is the library's first operand.
inline bool cublas_gemm(context& ctx, int index, const device_gemm& g, bool ask) {
  const int ta = cuda_data_type(g.type), tc = cuda_data_type(g.result);
  constexpr std::int64_t most = 2147483647;
  if (ta < 0 || tc < 0 || g.m > most || g.n > most || g.k > most) return false;
  cublasHandle_t h = cublas_handles_of_process().get(ctx, index);
  if (!h) return false;
  if (ask) return true;
  auto ptr = [](const storage* s, std::int64_t offset) {
    const auto* b = static_cast<const block*>(s->handle());
    return reinterpret_cast<void*>(b->handle + offset * size_of(s->dtype()));
  };
  const bool f64 = g.type == dtype::f64;
  const float one = 1, zero = 0;
  const double one64 = 1, zero64 = 0;
  constexpr int op_n = 0, op_t = 1, compute_32f = 68, compute_64f = 70, algo_default = -1;
  ctx.make_current();
  // The library's grids take at most 65,535 batch elements: longer batches in turns.
  for (std::int64_t first = 0; first < g.batch; first += 65535) {
    const int count = static_cast<int>(std::min<std::int64_t>(g.batch - first, 65535));
    const cublasStatus_t r = cublas().gemm(
        h, g.b.trans ? op_t : op_n, g.a.trans ? op_t : op_n, int(g.n), int(g.m), int(g.k),
        f64 ? static_cast<const void*>(&one64) : &one,
        ptr(g.b.st, g.b.offset + first * g.b.batch_stride), ta, int(g.b.ld), g.b.batch_stride,
        ptr(g.a.st, g.a.offset + first * g.a.batch_stride), ta, int(g.a.ld), g.a.batch_stride,
        f64 ? static_cast<const void*>(&zero64) : &zero, ptr(g.c, g.c_offset + first * g.m * g.n),
        tc, int(g.n), g.m * g.n, count, f64 ? compute_64f : compute_32f, algo_default);
    // A product this library or device does not take (NOT_SUPPORTED, ARCH_MISMATCH) before
    // anything was written: kiln's kernel computes it.
    if ((r == 15 || r == 8) && first == 0) return false;
    if (r != 0)
      throw error("matmul", "cuBLAS failed",
                  cublas_handles::status(r) + " for " + std::to_string(g.m) + " x " +
                      std::to_string(g.n) + " x " + std::to_string(g.k) + ", batch " +
                      std::to_string(g.batch) + " on cuda:" + std::to_string(index));
  }
  return true;
}

} // namespace kiln::jit::cuda
