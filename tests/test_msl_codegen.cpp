// MSL code generation, checked without a Mac: every op of the catalog on every dtype Metal
// has (f64 is a clear error), every reduction at every stage with and without SIMD-group
// folding, 32- and 64-bit indices, linear and strided, every elementwise shape,
// multi-output kernels, a custom op and raw ops. The generated MSL is compiled by the host
// compiler through a shim of Metal's built-ins (msl_codegen_support.hpp), together with the
// entry points a CPU runner would call; by Apple's compiler too where there is one.
#include "catalog_exprs.hpp"
#include "msl_codegen_support.hpp"

#include "kiln/kiln.hpp"

namespace jit = kiln::jit;
using kiln::dtype;
using kiln::tensor;

namespace {

// Every dtype Metal has; integers without math (computed in f64: an error, checked below).
template <class T>
auto catalog() {
  return catalog_exprs::catalog<T, false>();
}

template <class... T>
std::vector<std::string> catalog_sources(bool strided, int rank, bool wide) {
  std::vector<std::string> out;
  for (auto&& v :
       {msl_test::elementwise_sources(msl_test::ir_of_tuple(strided, rank, wide, catalog<T>()))...})
    out.insert(out.end(), v.begin(), v.end());
  return out;
}

bool contains(const std::vector<std::string>& srcs, const std::string& text) {
  for (const auto& s : srcs)
    if (s.find(text) != std::string::npos) return true;
  return false;
}

} // namespace

TEST_CASE("msl codegen: every op on every dtype but f64 compiles through the host shim, "
          "32-bit linear and 64-bit strided",
          "[msl][codegen]") {
  auto srcs = catalog_sources<bool, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t,
                              kiln::half, kiln::bfloat16, float>(false, 1, false);
  const std::size_t narrow = srcs.size();
  REQUIRE(narrow > 8); // the catalog kernels bind more than 30 buffers: split into stages
  CHECK(contains(srcs, "as_type<half>(ushort("));
  CHECK(contains(srcs, "as_type<ushort>(half("));
  CHECK(contains(srcs, "metal::erf") == false); // MSL has none: kiln's own
  CHECK(contains(srcs, "float kiln_erfc(float x)"));
  CHECK(contains(srcs, "constant float kiln_erfc_c_f32[10] = {"));
  CHECK(contains(srcs, "return metal::sin(a);"));
  CHECK(contains(srcs, "const int a0 = P.o0 + i;"));
  CHECK(contains(srcs, "constant kiln_params& P [[buffer("));
  CHECK(!contains(srcs, "double"));
  for (const auto& s : srcs)
    CHECK(s.find("[[buffer(31)]]") == std::string::npos);
  const auto wide = catalog_sources<bool, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t,
                                    kiln::half, kiln::bfloat16, float>(true, 2, true);
  CHECK(contains(wide, "int64_t r = i;"));
  CHECK(contains(wide, "P.s0_1"));
  srcs.insert(srcs.end(), wide.begin(), wide.end());
  msl_test::compile(srcs);
}

TEST_CASE("msl codegen: f64 anywhere is a kiln::error saying Metal has no 64-bit floats",
          "[msl][codegen]") {
  const tensor<double> d(kiln::shape{4});
  const tensor<float> x(kiln::shape{4});
  auto check = [](auto&& f, const std::string& details) {
    CHECK_THROWS_WITH(f(), Catch::StartsWith("kiln::jit: Metal has no 64-bit floats") &&
                               Catch::Contains(details));
  };
  const auto in = msl_test::ir_of(false, 1, false, d + d);
  check([&] { jit::metal::generate(in, msl_test::layout_of(in)); }, "f64 in buffer b0 (an input)");
  const auto out = msl_test::ir_of(false, 1, false, kiln::cast<double>(x));
  check([&] { jit::metal::generate(out, msl_test::layout_of(out)); },
        "f64 in buffer b1 (an output)");
  // Math on integers computes in double: the value, though no buffer holds one.
  const tensor<std::int32_t> i(kiln::shape{4});
  const auto value = msl_test::ir_of(false, 1, false, kiln::cast<float>(kiln::sqrt(i)));
  check([&] { jit::metal::generate(value, msl_test::layout_of(value)); }, "f64 computing value v1");
  // A reduction accumulating f32 in f64 (what a device with f64 gets) is refused on Metal.
  const auto& sum = kiln::reduction_info_of<kiln::reductions::sum>;
  const auto v = msl_test::ir_of(false, 1, false, x * x);
  const jit::reduce_spec spec{&sum,       jit::reduce_stage::group,
                              dtype::f32, sum.accumulator(dtype::f32, true),
                              dtype::f32, dtype::f32};
  const auto sir = jit::stage_ir(v, spec);
  check([&] { jit::metal::generate_reduction(sir, msl_test::layout_of(sir, 4), spec); },
        "f64 as the accumulator");
  // Without f64 the accumulator is f32, and the kernel generates.
  CHECK(sum.accumulator(dtype::f32, false) == dtype::f32);
}

namespace {

using lowering_test::case_of;
using lowering_test::reduction_case;
namespace rd = kiln::reductions;
const reduction_case all_kinds[] = {
    case_of<rd::sum>(),          case_of<rd::prod>(),       case_of<rd::mean>(),
    case_of<rd::max>(),          case_of<rd::min>(),        case_of<rd::argmax>(),
    case_of<rd::argmin>(),       case_of<rd::all>(),        case_of<rd::any>(),
    case_of<rd::logsumexp>(),    case_of<rd::sum_sq_dev>(), case_of<rd::norm2>(),
    case_of<rd::count_nonzero>()};
constexpr jit::reduce_stage all_stages[] = {jit::reduce_stage::thread, jit::reduce_stage::group,
                                            jit::reduce_stage::partial, jit::reduce_stage::merge};

// The kernel of reduction c at one stage, as a Metal backend (no f64) would specialize it.
std::string reduction_source(const jit::kernel_ir& ir, const reduction_case& c,
                             jit::reduce_stage stage, bool subgroup) {
  const dtype v = ir.outputs[0];
  jit::reduce_spec spec{c.info, stage, v, c.info->accumulator(v, false), c.result(v), dtype::f32};
  spec.subgroup = subgroup;
  const jit::kernel_ir sir = jit::stage_ir(ir, spec);
  return jit::metal::generate_reduction(sir, msl_test::layout_of(sir, jit::reduce_extras), spec);
}

std::vector<std::string> reductions_over(const std::vector<jit::kernel_ir>& irs) {
  std::vector<std::string> srcs;
  for (const auto& ir : irs)
    for (auto k : all_kinds)
      for (auto st : all_stages)
        for (bool sub : {false, true})
          if (k.result(ir.outputs[0]) == dtype::f64) // an integer mean: a double result
            CHECK_THROWS_WITH(reduction_source(ir, k, st, sub),
                              Catch::Contains("Metal has no 64-bit floats"));
          else if (!sub || st != jit::reduce_stage::thread)
            srcs.push_back(reduction_source(ir, k, st, sub));
  return srcs;
}

} // namespace

TEST_CASE("msl codegen: every reduction at every stage, with and without SIMD-group folding, "
          "both index widths, compiles through the host shim",
          "[msl][codegen][reduce]") {
  const tensor<float> x(kiln::shape{8, 8});
  const tensor<std::int32_t> i(kiln::shape{8, 8});
  const tensor<kiln::half> h(kiln::shape{8, 8});
  const tensor<bool> b(kiln::shape{8, 8});
  const tensor<std::int64_t> l(kiln::shape{8, 8});
  auto srcs = reductions_over({msl_test::ir_of(false, 1, false, kiln::exp(x) * 2.0f),
                               msl_test::ir_of(true, 2, false, i + i),
                               msl_test::ir_of(false, 1, false, h * h),
                               msl_test::ir_of(true, 2, false, b && b)});
  // f32 sums accumulate in f32; threadgroup arrays live in the kernel; the prologue gets
  // the input buffers and P.
  // srcs: sum at thread, group, group with folding, partial...
  CHECK(srcs[1].find("  threadgroup float kiln_sa[64];") != std::string::npos);
  CHECK(srcs[1].find("kiln_value(kiln_b0, P, o * P.x0 + r)") != std::string::npos);
  CHECK(srcs[1].find("threadgroup_barrier(mem_flags::mem_threadgroup);") != std::string::npos);
  CHECK(srcs[1].find("[[max_total_threads_per_threadgroup(64)]] kernel void") != std::string::npos);
  CHECK(srcs[2].find("simd_shuffle_down(") != std::string::npos);
  CHECK(srcs[2].find("[[thread_index_in_simdgroup]]") != std::string::npos);
  CHECK(srcs[1].find("simd_shuffle_down(") == std::string::npos);
  CHECK(!contains(srcs, "double"));
  const auto wide = reductions_over(
      {msl_test::ir_of(true, 2, true, kiln::sqrt(x)), msl_test::ir_of(true, 3, true, l * l)});
  CHECK(wide[0].find("for (int64_t o = ") != std::string::npos);
  CHECK(contains(wide, "as_type<int64_t>(simd_shuffle_down(as_type<uint2>(x), ushort(h)))"));
  srcs.insert(srcs.end(), wide.begin(), wide.end());
  msl_test::compile(srcs);
}

TEST_CASE("msl codegen: the contraction kernel over fused operand prologues compiles through "
          "the host shim, and an f64 product is a kiln::error",
          "[msl][codegen][matmul]") {
  const tensor<float> x(kiln::shape{8, 8});
  const tensor<kiln::half> h(kiln::shape{8, 8});
  const tensor<std::int32_t> i(kiln::shape{8, 8});
  std::vector<std::string> srcs;
  auto add = [&](const jit::kernel_ir& operands, dtype acc, dtype result, int batch_rank,
                 const kiln::kernels::contraction_tile& t) {
    const jit::contract_spec spec{acc, result, batch_rank, t};
    const jit::kernel_ir ir = jit::contract_ir(operands, spec);
    srcs.push_back(
        jit::metal::generate_contraction(ir, msl_test::layout_of(ir, jit::contract_extras), spec));
  };
  add(msl_test::ir_of(true, 3, false, kiln::cast<float>(h), kiln::cast<float>(h)), dtype::f32,
      dtype::f16, 0, {});
  add(msl_test::ir_of(true, 5, false, kiln::relu(x) * 2.0f, x), dtype::f32, dtype::f32, 2,
      {16, 16, 8, 1, 1});
  add(msl_test::ir_of(true, 3, true, kiln::cast<std::int64_t>(i), kiln::cast<std::int64_t>(i)),
      dtype::i64, dtype::i32, 0, {128, 64, 16, 8, 4});
  CHECK(srcs[0].find("  threadgroup float kiln_ta[") != std::string::npos);
  CHECK(srcs[0].find("kiln_a(kiln_b0, P, bt, gi, gk)") != std::string::npos);
  CHECK(!contains(srcs, "double"));
  msl_test::compile(srcs);
  const tensor<double> d(kiln::shape{8, 8});
  const jit::contract_spec f64{dtype::f64, dtype::f64, 0, {}};
  const jit::kernel_ir ir = jit::contract_ir(msl_test::ir_of(true, 3, false, d, d), f64);
  CHECK_THROWS_AS(
      jit::metal::generate_contraction(ir, msl_test::layout_of(ir, jit::contract_extras), f64),
      kiln::error);
}

namespace ops {
// 2 e^x through kiln's device math name: one shared C-family body for every dialect.
struct twice_exp : kiln::op_base {
  static constexpr const char* name = "twice_exp";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    return T(2) * std::exp(x);
  }
  static constexpr kiln::spelling device{.any = "($T(2) * kiln_exp($0))"};
};
// A raw body with a loop and a math call.
struct softclip : kiln::op_base {
  static constexpr const char* name = "softclip";
  static constexpr const char* inputs = "x, k";
  static constexpr const char* output = "y";
  static constexpr const char* body = R"(
  y = $T(0);
  for (int j = 0; j < 3; ++j) y = y + kiln_tanh(x * k) / $T(3);
)";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x, T k) {
    return std::tanh(x * k);
  }
};
} // namespace ops

TEST_CASE("msl codegen: multi-output kernels, every elementwise shape, a custom op and a raw "
          "op compile through the host shim",
          "[msl][codegen]") {
  const tensor<float> x(kiln::shape{16}), y(kiln::shape{16});
  const tensor<kiln::half> h(kiln::shape{16});
  const tensor<std::int32_t> i(kiln::shape{4, 4});
  const auto s = kiln::sin(x) * y;
  const auto multi =
      msl_test::ir_of(false, 1, false, s + 1.0f, s - y, kiln::cast<kiln::half>(s), h * h);
  std::vector<std::string> srcs = msl_test::elementwise_sources(multi);
  REQUIRE(srcs.size() == 1);
  CHECK(srcs[0].find("= kiln_sin(") == srcs[0].rfind("= kiln_sin(")); // one sin, 3 outputs
  CHECK(srcs[0].find("kiln_b5[a5] = ") != std::string::npos);
  const auto custom = msl_test::ir_of(false, 1, false, kiln::make_node<ops::twice_exp>(x),
                                      kiln::make_node<ops::softclip>(x, y));
  for (const auto& src : msl_test::elementwise_sources(custom)) {
    CHECK(src.find("(float(2) * kiln_exp(") != std::string::npos);
    CHECK(src.find("//@kiln-body kx_") != std::string::npos);
    CHECK(src.find("inline float kiln_tanh(float a)") != std::string::npos);
    srcs.push_back(src);
  }
  // Every shape (threadgroup bound, units per trip, vector width), 32- and 64-bit, strided.
  for (const auto& ir :
       {msl_test::ir_of(false, 1, false, x * x + 2.0f * x),
        msl_test::ir_of(false, 1, true, h * h + h), msl_test::ir_of(true, 2, false, i * i + i)})
    for (int e : {1, 2, 4})
      for (int v : {1, 4}) {
        const auto more = msl_test::elementwise_sources(ir, {256, e, v});
        CHECK(more[0].find("[[max_total_threads_per_threadgroup(256)]]") != std::string::npos);
        srcs.insert(srcs.end(), more.begin(), more.end());
      }
  msl_test::compile(srcs);
}

TEST_CASE("msl codegen: the parameter block is one struct in param_layout's byte order",
          "[msl][codegen]") {
  const tensor<float> x(kiln::shape{4, 4});
  const tensor<std::int64_t> l(kiln::shape{4, 4});
  // An f32 and an i64 scalar with 32-bit index fields: the 8-byte scalar comes first.
  const auto ir = msl_test::ir_of(true, 2, false, x * 3.0f + kiln::cast<float>(l * 5l));
  const auto layout = msl_test::layout_of(ir);
  const std::string src = jit::metal::generate(ir, layout);
  std::string members;
  for (const auto& m : layout.members())
    members += "  " + m + "\n";
  CHECK(src.find("struct kiln_params {\n" + members + "};") != std::string::npos);
  CHECK(members.rfind("  int64_t p", 0) == 0);
  CHECK(jit::metal::struct_bytes(layout) % 8 == 0);
  CHECK(jit::metal::struct_bytes(layout) >= layout.bytes);
  CHECK(src.find("const device float* kiln_b0 [[buffer(0)]]") != std::string::npos);
  CHECK(
      src.find("device float* kiln_b2 [[buffer(2)]],\n    constant kiln_params& P [[buffer(3)]]") !=
      std::string::npos);
}

TEST_CASE("msl codegen: the compile check fails on broken MSL", "[msl][codegen]") {
  const tensor<float> x(kiln::shape{4});
  const auto ir = msl_test::ir_of(false, 1, false, x + x);
  std::string src = jit::metal::generate(ir, msl_test::layout_of(ir));
  msl_test::host_compile({src}); // as generated: accepted
  const auto at = src.find("const float v");
  REQUIRE(at != std::string::npos);
  src.insert(at, "undeclared_msl_name = 1;\n");
  CHECK_THROWS_WITH(msl_test::host_compile({src}),
                    Catch::Contains("the host compiler rejected the generated MSL") &&
                        Catch::Contains("undeclared_msl_name"));
  // A kernel whose argument has no Metal attribute cannot be given an entry point.
  CHECK_THROWS(kiln_msl_unit::host_unit({"kernel void k(device float* kiln_b0) {}\n"}));
}
