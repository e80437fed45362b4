// The CPU stand-in for a CUDA device (device_on_cpu/cuda_driver.cpp) on its own: what the
// `cuda-on-cpu:` tests rely on it to do. Kernels written here, compiled through its NVRTC,
// launched through its driver API (kiln's loader binds both, as KILN_CUDA_DRIVER and
// KILN_NVRTC_LIBRARY make it): group barriers and warp shuffles compute what CUDA defines,
// and what CUDA leaves undefined (a __syncthreads not every thread reaches, a shuffle after
// lanes left) fails the launch instead of passing or hanging.
#include "support.hpp"

#include "kiln/jit/cuda/nvrtc.hpp"

#include <chrono>
#include <cstring>

#ifdef CUDA_ON_CPU_LIBRARY

namespace {

namespace cuda = kiln::jit::cuda;

struct device_on_cpu {
  cuda::driver_library d = cuda::load_driver(CUDA_ON_CPU_LIBRARY);
  cuda::nvrtc_library nv = cuda::load_nvrtc_file(CUDA_ON_CPU_LIBRARY);
  std::vector<cuda::CUdeviceptr> blocks;
  ~device_on_cpu() {
    for (auto p : blocks)
      d.cuMemFree_v2(p);
  }

  cuda::CUfunction kernel(const std::string& source, const char* name) {
    const auto options =
        cuda::nvrtc_options({80, false}, cuda::cuda_home_from_environment().include_dir());
    const auto image = cuda::compile_cuda(nv, source, options, false);
    cuda::CUmodule m = nullptr;
    REQUIRE(d.cuModuleLoadData(&m, image.bytes.data()) == 0);
    cuda::CUfunction f = nullptr;
    REQUIRE(d.cuModuleGetFunction(&f, m, name) == 0);
    return f;
  }
  template <class T>
  cuda::CUdeviceptr upload(const std::vector<T>& v) {
    cuda::CUdeviceptr p = 0;
    REQUIRE(d.cuMemAlloc_v2(&p, v.size() * sizeof(T)) == 0);
    blocks.push_back(p);
    REQUIRE(d.cuMemcpyHtoDAsync_v2(p, v.data(), v.size() * sizeof(T), nullptr) == 0);
    return p;
  }
  template <class T>
  std::vector<T> download(cuda::CUdeviceptr p, std::size_t n) {
    std::vector<T> v(n);
    REQUIRE(d.cuMemcpyDtoHAsync_v2(v.data(), p, n * sizeof(T), nullptr) == 0);
    return v;
  }
  // The launch's result, and the driver's message when it failed.
  std::pair<int, std::string> launch(cuda::CUfunction f, unsigned groups, unsigned threads,
                                     const void* params) {
    void* args[] = {const_cast<void*>(params)};
    const int r = d.cuLaunchKernel(f, groups, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr);
    return {r, r == 0 ? "" : d.error_string(r)};
  }
};

struct sum_params {
  const double* in;
  double* out;
  int n; // values per group
};

// One sum per group of `threads` values: a tree through shared memory, then (warp_tail) the
// last 32 partials through warp shuffles. `diverge`: only the even threads reach the barrier;
// `racy`: the tree's steps have no barrier between them.
std::string group_sum(bool warp_tail, bool diverge, bool racy = false) {
  std::string s = "struct sum_params { const double* in; double* out; int n; };\n"
                  "extern \"C\" __global__ void group_sum(const sum_params P) {\n"
                  "  __shared__ double s[1024];\n"
                  "  const unsigned t = threadIdx.x;\n"
                  "  s[t] = P.in[blockIdx.x * P.n + t];\n";
  s += diverge ? "  if (t % 2 == 0) __syncthreads();\n" : "  __syncthreads();\n";
  s += std::string("  for (unsigned h = blockDim.x / 2; h >= ") + (warp_tail ? "32" : "1") +
       "; h /= 2) {\n"
       "    if (t < h) s[t] += s[t + h];\n" +
       (racy ? "" : "    __syncthreads();\n") + "  }\n";
  if (warp_tail)
    s += "  if (t < 32) {\n"
         "    double v = s[t];\n"
         "    for (unsigned h = 16; h >= 1; h /= 2) v += __shfl_down_sync(0xffffffffu, v, h);\n"
         "    if (t == 0) P.out[blockIdx.x] = v;\n"
         "  }\n";
  else
    s += "  if (t == 0) P.out[blockIdx.x] = s[0];\n";
  return s + "}\n";
}

// Launches `src`'s group_sum over `groups` groups of 256 random integers in doubles (every
// order of summation gives the same exact sum); how many of the groups' sums are wrong.
unsigned wrong_group_sums(device_on_cpu& dev, const std::string& src, unsigned groups) {
  const unsigned threads = 256;
  std::vector<double> in;
  for (auto i : test::integers<int>(threads * groups, -1000000, 1000000))
    in.push_back(i);
  const auto f = dev.kernel(src, "group_sum");
  const sum_params p{reinterpret_cast<const double*>(dev.upload(in)),
                     reinterpret_cast<double*>(dev.upload(std::vector<double>(groups, -1))),
                     int(threads)};
  const auto [r, why] = dev.launch(f, groups, threads, &p);
  REQUIRE(r == 0);
  const auto out = dev.download<double>(reinterpret_cast<cuda::CUdeviceptr>(p.out), groups);
  unsigned wrong = 0;
  for (unsigned g = 0; g < groups; ++g) {
    double want = 0;
    for (unsigned t = 0; t < threads; ++t)
      want += in[g * threads + t];
    wrong += out[g] != want;
  }
  return wrong;
}

// Launches kernel `name` of `src`, which takes no parameters: why the launch failed, or
// empty where it did not.
std::string launch_failure(device_on_cpu& dev, const std::string& src, const char* name,
                           unsigned groups, unsigned threads) {
  const auto f = dev.kernel(src, name);
  const int* none = nullptr;
  const auto [r, why] = dev.launch(f, groups, threads, &none);
  CHECK(r != 0);
  return r != 0 ? why : std::string();
}

} // namespace

TEST_CASE("cuda-on-cpu: group sums through shared memory, barriers and warp shuffles are exact",
          "[device-on-cpu]") {
  device_on_cpu dev;
  REQUIRE(dev.d.ok());
  REQUIRE(dev.nv.ok());
  for (const bool warp_tail : {false, true})
    CHECK(wrong_group_sums(dev, group_sum(warp_tail, false), 5) == 0);
}

TEST_CASE("cuda-on-cpu: a __syncthreads that not every thread reaches fails the launch",
          "[device-on-cpu]") {
  device_on_cpu dev;
  const auto f = dev.kernel(group_sum(false, true), "group_sum");
  const std::vector<double> in(128, 1.0);
  const sum_params p{reinterpret_cast<const double*>(dev.upload(in)),
                     reinterpret_cast<double*>(dev.upload(std::vector<double>(1, 0))), 128};
  const auto [r, why] = dev.launch(f, 1, 128, &p);
  CHECK(r != 0);
  CHECK(why.find("group_sum: the threads of a group did not all reach the same __syncthreads") !=
        std::string::npos);
}

// The group's threads take turns between barriers, each group in the other order to the one
// before: a read that no barrier orders after another thread's write comes first in one of
// them, so a missing barrier gives a wrong sum, as it would on a GPU, not a right one.
TEST_CASE("cuda-on-cpu: a missing __syncthreads shows as a wrong value", "[device-on-cpu]") {
  device_on_cpu dev;
  CHECK(wrong_group_sums(dev, group_sum(false, false, true), 4) >= 2);
}

// Lanes of a warp at a shuffle while the others wait at __syncthreads: neither barrier can
// open; the launch fails at once (no thread can go on) instead of hanging.
TEST_CASE("cuda-on-cpu: threads waiting on each other's barriers fail the launch",
          "[device-on-cpu]") {
  device_on_cpu dev;
  const std::string src = "extern \"C\" __global__ void stuck(const int* P) {\n"
                          "  if (threadIdx.x % 32 < 16) {\n"
                          "    int v = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);\n"
                          "    (void)v;\n"
                          "  } else {\n"
                          "    __syncthreads();\n"
                          "  }\n"
                          "}\n";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(launch_failure(dev, src, "stuck", 3, 64)
            .find("stuck: the threads of a group wait on each other's barriers") !=
        std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}

TEST_CASE("cuda-on-cpu: a warp shuffle after lanes of the warp returned fails the launch",
          "[device-on-cpu]") {
  device_on_cpu dev;
  const std::string src = "extern \"C\" __global__ void early(const int* P) {\n"
                          "  if (threadIdx.x % 32 >= 16) return;\n"
                          "  int v = __shfl_down_sync(0xffffffffu, int(threadIdx.x), 1);\n"
                          "  (void)v;\n"
                          "}\n";
  CHECK(launch_failure(dev, src, "early", 2, 64)
            .find("a shuffle ran while lanes of its warp had left") != std::string::npos);
}

TEST_CASE("cuda-on-cpu: a block past 1024 threads is a launch error, a compile error has the "
          "compiler's message",
          "[device-on-cpu]") {
  device_on_cpu dev;
  const auto f = dev.kernel(group_sum(false, false), "group_sum");
  const sum_params p{nullptr, nullptr, 0};
  const auto [r, why] = dev.launch(f, 1, 2048, &p);
  CHECK(r != 0);
  CHECK(why.find("invalid launch configuration") != std::string::npos);
  CHECK_THROWS_WITH(
      dev.kernel("extern \"C\" __global__ void k(const int* P) {\n  undeclared_x();\n}\n", "k"),
      Catch::Contains("NVRTC failed to compile the generated CUDA") &&
          Catch::Contains("kiln_kernel.cu:2") && Catch::Contains("undeclared_x"));
}

// Hidden ([.]): run by the asan preset only, as its own CTest test that passes when
// AddressSanitizer stops the process — kernels are compiled with the suite's sanitizers.
TEST_CASE("cuda-on-cpu: a kernel writing one element past its buffer", "[.][asan-kernel]") {
  device_on_cpu dev;
  const auto f = dev.kernel("extern \"C\" __global__ void past(float* const* P) {\n"
                            "  P[0][blockIdx.x * blockDim.x + threadIdx.x + 1] = 1.0f;\n"
                            "}\n",
                            "past");
  const auto p = reinterpret_cast<float*>(dev.upload(std::vector<float>(64, 0.0f)));
  float* const* params = &p;
  dev.launch(f, 1, 64, &params);
  FAIL("the write past the buffer was not caught");
}

TEST_CASE("cuda-on-cpu: a KILN_NVRTC_LIBRARY or KILN_CUDA_DRIVER that does not load is the "
          "reason",
          "[device-on-cpu]") {
  const auto nv = kiln::jit::cuda::load_nvrtc_file("/nonexistent/libnvrtc-kiln-test.so");
  CHECK_FALSE(nv.ok());
  CHECK(nv.why_not.find("KILN_NVRTC_LIBRARY=/nonexistent/libnvrtc-kiln-test.so") !=
        std::string::npos);
  const auto d = kiln::jit::cuda::load_driver("/nonexistent/libcuda-kiln-test.so");
  CHECK_FALSE(d.ok());
  CHECK(d.why_not.find("/nonexistent/libcuda-kiln-test.so") != std::string::npos);
}

#else
TEST_CASE("cuda-on-cpu: not built (KILN_TEST_CUDA_ON_CPU=OFF)", "[device-on-cpu]") {
  WARN("the CPU stand-in for a CUDA device is not built in this configuration");
}
#endif
