// A cuBLAS that computes on the CPU, in the same library as the CUDA driver stand-in (device
// memory is host memory there): what kiln opens as KILN_CUBLAS_LIBRARY in the tests of the
// provider path, so that the operands' mapping onto the library's column-major call (which
// operand goes first, transposes, leading dims, batch strides, the result's dtype) is checked
// against independent references without a GPU. Arguments are checked as cuBLAS documents
// them (a leading dim shorter than its matrix's rows is CUBLAS_STATUS_INVALID_VALUE); products
// accumulate in double and round once to the result's dtype.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using status = int;
constexpr status success = 0, not_initialized = 1, invalid_value = 7, not_supported = 15;
constexpr int r32f = 0, r64f = 1, r16f = 2, r16bf = 14;

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h >> 15) << 31;
  const int e = (h >> 10) & 31;
  const std::uint32_t m = h & 1023;
  float v;
  if (e == 0)
    v = std::ldexp(float(m), -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(float(m | 1024), e - 25);
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Round to nearest even, through the exact value's scaled mantissa.
std::uint16_t float_to_half(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  x = std::fabs(x);
  if (std::isnan(x)) return sign | 0x7e00;
  if (x >= 65520.0) return sign | 0x7c00; // rounds past the largest half
  int e;
  std::frexp(x, &e);                                  // x = f * 2^e, f in [0.5, 1)
  const int q = std::max(e - 11, -24);                // the unit of the last place kept
  const double r = std::nearbyint(std::ldexp(x, -q)); // (the default mode: to nearest even)
  const double v = std::ldexp(r, q);
  if (v == 0) return sign;
  std::frexp(v, &e);
  if (e < -13) return sign | std::uint16_t(std::ldexp(v, 24)); // subnormal
  const std::uint32_t m = std::uint32_t(std::ldexp(v, 11 - e)) & 1023;
  return sign | std::uint16_t((e + 14) << 10) | std::uint16_t(m);
}

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Round to nearest even from the exact value (8 significant bits, subnormals from 2^-133),
// then the float it is exactly, whose top half is the bfloat16.
std::uint16_t float_to_bf16(double x) {
  if (std::isnan(x)) return 0x7fc0;
  int e;
  std::frexp(x, &e);
  const int q = std::max(e - 8, -133);
  const double v = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  const float f = std::fabs(v) >= 0x1p128 ? std::copysign(INFINITY, x) : static_cast<float>(v);
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return std::uint16_t(bits >> 16);
}

double get(const void* p, int type, std::int64_t i) {
  switch (type) {
  case r32f:
    return static_cast<const float*>(p)[i];
  case r64f:
    return static_cast<const double*>(p)[i];
  case r16f:
    return half_to_float(static_cast<const std::uint16_t*>(p)[i]);
  default:
    return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
  }
}

void put(void* p, int type, std::int64_t i, double v) {
  switch (type) {
  case r32f:
    static_cast<float*>(p)[i] = static_cast<float>(v);
    break;
  case r64f:
    static_cast<double*>(p)[i] = v;
    break;
  case r16f:
    static_cast<std::uint16_t*>(p)[i] = float_to_half(v);
    break;
  default:
    static_cast<std::uint16_t*>(p)[i] = float_to_bf16(v);
    break;
  }
}

struct handle {
  void* stream = nullptr;
};

} // namespace

extern "C" {
status cublasCreate_v2(handle** h) {
  if (!h) return invalid_value;
  *h = new handle; // kept for the process, as kiln keeps it
  return success;
}
status cublasSetStream_v2(handle* h, void* s) {
  if (!h) return not_initialized;
  h->stream = s; // every call finishes before it returns: the stream's order holds
  return success;
}
status cublasSetMathMode(handle* h, int mode) {
  if (!h) return not_initialized;
  return mode == 0 || mode == 16 ? success : invalid_value; // (kiln asks for 16: f32 reductions)
}
const char* cublasGetStatusString(status s) {
  switch (s) {
  case success:
    return "CUBLAS_STATUS_SUCCESS";
  case invalid_value:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case not_supported:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  }
}

// Column-major C (m x n, ldc) = op(A) (m x k) op(B) (k x n) per batch element, alpha 1, beta 0
// (what kiln asks for: anything else is not supported here).
status cublasGemmStridedBatchedEx(handle* h, int ta, int tb, int m, int n, int k, const void* alpha,
                                  const void* a, int atype, int lda, long long sa, const void* b,
                                  int btype, int ldb, long long sb, const void* beta, void* c,
                                  int ctype, int ldc, long long sc, int batch, int compute,
                                  int algo) {
  if (!h) return not_initialized;
  const bool f64 = compute == 70;
  for (int t : {atype, ctype})
    if (t != r32f && t != r64f && t != r16f && t != r16bf) return not_supported;
  if ((compute != 68 && !f64) || algo != -1 || atype != btype || (f64 && atype != r64f) ||
      (!f64 && atype == r64f))
    return not_supported;
  const double al = f64 ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = f64 ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  if (al != 1 || be != 0) return not_supported;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return invalid_value;
  const int arows = ta ? k : m, brows = tb ? n : k;
  if (lda < std::max(1, arows) || ldb < std::max(1, brows) || ldc < std::max(1, m))
    return invalid_value;
  for (long long bi = 0; bi < batch; ++bi)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          const std::int64_t ia =
              bi * sa + (ta ? std::int64_t(i) * lda + p : std::int64_t(p) * lda + i);
          const std::int64_t ib =
              bi * sb + (tb ? std::int64_t(p) * ldb + j : std::int64_t(j) * ldb + p);
          s += get(a, atype, ia) * get(b, btype, ib);
        }
        put(c, ctype, bi * sc + std::int64_t(j) * ldc + i, s);
      }
  return success;
}
} // extern "C"
