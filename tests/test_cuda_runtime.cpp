// The CUDA backend's run-time loading and what it decides without a GPU: cuda:0 listed with
// the reason where no driver or GPU is found, the loader's reasons for a bad CUDA home or a
// missing library, NVRTC's version and architectures, the target chosen for a device, and
// the disk-cache key (NVRTC version and architecture are part of it).
#include "support.hpp"

#include "kiln/jit/cuda/backend.hpp"

#include "kiln/kiln.hpp"

#include <cstdlib>
#include <filesystem>

namespace cuda = kiln::jit::cuda;

TEST_CASE("cuda: cuda:0 is listed, unavailable with the reason where there is no driver",
          "[cuda]") {
  const auto all = kiln::devices();
  const kiln::device_info* info = nullptr;
  for (const auto& d : all)
    if (d.device == kiln::device(kiln::device_kind::cuda, 0)) info = &d;
  REQUIRE(info != nullptr);
  CHECK(info->description.find("not built into") == std::string::npos);
  if (cuda::driver().ok() && cuda::nvrtc().ok()) {
    CHECK(info->available);
    return;
  }
  CHECK_FALSE(info->available);
  CHECK(info->description ==
        (cuda::driver().ok() ? cuda::nvrtc().why_not : cuda::driver().why_not));
  // Naming it is a kiln::error carrying the same reason.
  CHECK_THROWS_WITH(kiln::device("cuda:0"), Catch::Contains("device is not available") &&
                                                Catch::Contains(info->description));
  if (!cuda::driver().ok()) CHECK(info->description.find("libcuda.so.1") != std::string::npos);
}

TEST_CASE("cuda loader: a missing driver library is a reason, not a crash", "[cuda][loader]") {
  const auto d = cuda::load_driver("libcuda-kiln-test-missing.so.1");
  CHECK_FALSE(d.ok());
  CHECK(d.why_not.find("no CUDA driver") != std::string::npos);
  CHECK(d.why_not.find("libcuda-kiln-test-missing.so.1") != std::string::npos);
}

TEST_CASE("cuda loader: a bad KILN_CUDA_HOME makes NVRTC unavailable with that reason",
          "[cuda][loader]") {
  const auto home = cuda::find_cuda_home("/nonexistent/kiln-cuda", "/usr/local/cuda");
  CHECK(home.path.empty());
  CHECK(home.why_not == "KILN_CUDA_HOME=/nonexistent/kiln-cuda is not a directory");
  const auto nv = cuda::load_nvrtc(home, true); // explicit: not replaced by another NVRTC
  CHECK_FALSE(nv.ok());
  CHECK(nv.why_not.find("KILN_CUDA_HOME=/nonexistent/kiln-cuda") != std::string::npos);

  // A directory without NVRTC in it: every place tried is named.
  const auto empty = std::filesystem::temp_directory_path();
  const auto nv2 = cuda::load_nvrtc(cuda::find_cuda_home(empty.c_str(), nullptr), true);
  CHECK_FALSE(nv2.ok());
  CHECK(nv2.why_not.find("NVRTC (libnvrtc.so) not found") != std::string::npos);
  CHECK(nv2.why_not.find((empty / "lib64/libnvrtc.so").string()) != std::string::npos);
}

TEST_CASE("cuda loader: the CUDA home falls back from CUDA_HOME to /usr/local/cuda",
          "[cuda][loader]") {
  const auto h = cuda::find_cuda_home(nullptr, "/nonexistent/cuda-home");
  if (cuda::is_directory("/usr/local/cuda")) {
    CHECK(h.path == "/usr/local/cuda");
    CHECK(h.include_dir() == "/usr/local/cuda/include");
  } else {
    CHECK(h.path.empty());
    CHECK(h.why_not.find("no CUDA toolkit") != std::string::npos);
  }
}

TEST_CASE("cuda loader: NVRTC is loaded here, with its version and architectures",
          "[cuda][loader]") {
  const auto& nv = cuda::nvrtc();
  const char* k = std::getenv("KILN_CUDA_HOME");
  if (k && *k && !cuda::is_directory(k)) {
    WARN("skipped: KILN_CUDA_HOME=" << k << " points nowhere on purpose");
    return;
  }
  REQUIRE(nv.ok()); // installed where these tests run: its absence is a failure
  CHECK(nv.major >= 11);
  CHECK(nv.version().rfind("NVRTC ", 0) == 0);
  CHECK(std::find(nv.archs.begin(), nv.archs.end(), 80) != nv.archs.end());
  CHECK(std::find(nv.archs.begin(), nv.archs.end(), 90) != nv.archs.end());
}

TEST_CASE("nvrtc: a cubin for a known architecture, PTX for a newer device, an error for an "
          "older one",
          "[cuda][nvrtc]") {
  const std::vector<int> archs{75, 80, 86, 89, 90, 100, 120};
  const auto t90 = cuda::target_for(90, archs);
  CHECK(t90.arch == 90);
  CHECK_FALSE(t90.ptx);
  CHECK(t90.option() == "-arch=sm_90");
  const auto newer = cuda::target_for(130, archs); // newer than this NVRTC knows
  CHECK(newer.arch == 120);
  CHECK(newer.ptx);
  CHECK(newer.option() == "-arch=compute_120");
  const auto between = cuda::target_for(87, archs); // unknown: the closest older one, as PTX
  CHECK(between.arch == 86);
  CHECK(between.ptx);
  CHECK_THROWS_WITH(cuda::target_for(50, archs),
                    Catch::Contains("NVRTC cannot compile for this device") &&
                        Catch::Contains("compute capability 5.0"));
}

TEST_CASE("cuda cache key: NVRTC version, architecture, driver, options and source all count",
          "[cuda][cache]") {
  const auto base = cuda::kernel_key("src", "-arch=sm_80", "NVRTC 13.0", 80, 13000);
  CHECK(base == cuda::kernel_key("src", "-arch=sm_80", "NVRTC 13.0", 80, 13000));
  CHECK(base != cuda::kernel_key("src", "-arch=sm_80", "NVRTC 12.9", 80, 13000));
  CHECK(base != cuda::kernel_key("src", "-arch=sm_80", "NVRTC 13.0", 90, 13000));
  CHECK(base != cuda::kernel_key("src", "-arch=sm_80", "NVRTC 13.0", 80, 12040));
  CHECK(base != cuda::kernel_key("src", "-arch=sm_90", "NVRTC 13.0", 80, 13000));
  CHECK(base != cuda::kernel_key("src2", "-arch=sm_80", "NVRTC 13.0", 80, 13000));
  // The NVRTC options carry the target architecture and the include directory.
  const auto o = cuda::nvrtc_options({86, false}, "/opt/cuda/include");
  CHECK(cuda::joined(o) == "-arch=sm_86 -std=c++17 -default-device --fmad=false "
                           "-I/opt/cuda/include");
}

TEST_CASE("cuda cache: an image from the disk cache is checked before it is loaded",
          "[cuda][cache]") {
  const std::string elf = "\x7f"
                          "ELF....";
  const std::string ptx = std::string(".version 8.0\n") + '\0';
  auto bytes = [](const std::string& s) {
    return std::span(reinterpret_cast<const std::byte*>(s.data()), s.size());
  };
  CHECK(cuda::looks_like(bytes(elf), false));
  CHECK_FALSE(cuda::looks_like(bytes(ptx), false));
  CHECK(cuda::looks_like(bytes(ptx), true));
  CHECK_FALSE(cuda::looks_like(bytes("truncated ptx"), true)); // no terminating NUL
  CHECK_FALSE(cuda::looks_like({}, false));
}

TEST_CASE("cuda: 16-bit floats without a CUDA toolkit are a reason, other dtypes are not",
          "[cuda][loader]") {
  const auto none = cuda::find_cuda_home("/nonexistent/kiln-cuda", nullptr);
  std::array<bool, 9> used{};
  used[static_cast<int>(kiln::dtype::f32)] = true;
  used[static_cast<int>(kiln::dtype::i64)] = true;
  CHECK(cuda::missing_headers(used, none).empty());
  used[static_cast<int>(kiln::dtype::bf16)] = true;
  CHECK(
      cuda::missing_headers(used, none) ==
      "f16 and bf16 kernels include cuda_fp16.h/cuda_bf16.h: KILN_CUDA_HOME=/nonexistent/kiln-cuda "
      "is not a directory");
  if (cuda::is_directory("/usr/local/cuda"))
    CHECK(cuda::missing_headers(used, cuda::find_cuda_home(nullptr, nullptr)).empty());
}

TEST_CASE("cuda: the graph kernel node's parameters are laid out as cuda.h's v2 struct", "[cuda]") {
  using p = cuda::kernel_node_params;
  // CUDA_KERNEL_NODE_PARAMS_v2 as cuda.h of CUDA 13.0 lays it out on x86-64 and aarch64.
  CHECK(sizeof(p) == 72);
  CHECK(offsetof(p, func) == 0);
  CHECK(offsetof(p, grid_x) == 8);
  CHECK(offsetof(p, block_x) == 20);
  CHECK(offsetof(p, shared_bytes) == 32);
  CHECK(offsetof(p, kernel_params) == 40);
  CHECK(offsetof(p, extra) == 48);
  CHECK(offsetof(p, kern) == 56);
  CHECK(offsetof(p, ctx) == 64);
}
