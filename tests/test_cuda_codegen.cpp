// CUDA kernels that need no GPU to check: reductions (all nine, every stage, 32- and
// 64-bit index), multi-output kernels, the 200-leaf expression split into stages that fit
// the parameter space, cubins for sm_80 and sm_90, and the errors of code generation and
// compilation. Every program is compiled by NVRTC and its PTX assembled by ptxas (not where
// KILN_TEST_PTXAS=0: see cuda_codegen_support.hpp).
#include "cuda_codegen_support.hpp"

#include "kiln/jit/backend/run_reduction.hpp"
#include "kiln/jit/pipeline/stages.hpp"
#include "kiln/kiln.hpp"

namespace jit = kiln::jit;
using kiln::dtype;

namespace {

using lowering_test::case_of;
using lowering_test::reduction_case;

// The reduction kernel of reduction c over the IR of a value expression, for one stage.
std::string reduction_source(const jit::kernel_ir& ir, const reduction_case& c,
                             jit::reduce_stage stage) {
  const dtype v = ir.outputs[0];
  const jit::reduce_spec spec{c.info, stage, v, c.info->accumulator(v, true), c.result(v)};
  const jit::kernel_ir sir = jit::stage_ir(ir, spec);
  return jit::cuda::generate_reduction(
      sir, jit::param_layout(sir, jit::cuda::max_param_bytes, jit::reduce_extras), spec);
}

constexpr jit::reduce_stage all_stages[] = {jit::reduce_stage::thread, jit::reduce_stage::group,
                                            jit::reduce_stage::partial, jit::reduce_stage::merge};

namespace rd = kiln::reductions;
const reduction_case all_kinds[] = {
    case_of<rd::sum>(),          case_of<rd::prod>(),       case_of<rd::mean>(),
    case_of<rd::max>(),          case_of<rd::min>(),        case_of<rd::argmax>(),
    case_of<rd::argmin>(),       case_of<rd::all>(),        case_of<rd::any>(),
    case_of<rd::logsumexp>(),    case_of<rd::sum_sq_dev>(), case_of<rd::norm2>(),
    case_of<rd::count_nonzero>()};

} // namespace

TEST_CASE("cuda codegen: every reduction over fused prologues, every stage, both "
          "index widths, compile and assemble",
          "[cuda][codegen][reduce]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{8, 8});
  const kiln::tensor<std::int32_t> i(kiln::shape{8, 8});
  const kiln::tensor<kiln::half> h(kiln::shape{8, 8});
  const kiln::tensor<bool> b(kiln::shape{8, 8});
  // Reduced expressions of several dtypes: the prologue is fused into kiln_value().
  const std::vector<jit::kernel_ir> narrow = {
      cuda_test::ir_of(false, 1, false, kiln::exp(x) * 2.0f),
      cuda_test::ir_of(true, 2, false, i + i), cuda_test::ir_of(false, 1, false, h * h),
      cuda_test::ir_of(true, 2, false, b && b)};
  std::vector<std::string> srcs;
  for (const auto& ir : narrow)
    for (auto k : all_kinds)
      for (auto st : all_stages)
        srcs.push_back(reduction_source(ir, k, st));
  CHECK(srcs[1].find("__shared__ double kiln_sa[64];") != std::string::npos); // f32 sum in f64
  CHECK(srcs[0].find("kiln_value(P, o * P.x0 + r)") != std::string::npos);
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);

  // 64-bit indexing, strided, for sm_90: f64 and i64 values.
  const kiln::tensor<double> d(kiln::shape{8, 8});
  const kiln::tensor<std::int64_t> l(kiln::shape{8, 8});
  const std::vector<jit::kernel_ir> wide = {cuda_test::ir_of(true, 2, true, kiln::sqrt(d)),
                                            cuda_test::ir_of(true, 3, true, l * l)};
  srcs.clear();
  for (const auto& ir : wide)
    for (auto k : all_kinds)
      for (auto st : all_stages)
        srcs.push_back(reduction_source(ir, k, st));
  CHECK(srcs[0].find("for (int64_t o = ") != std::string::npos);
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 90);
}

TEST_CASE("cuda codegen: a multi-output kernel shares leaves and common subexpressions",
          "[cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{16}), y(kiln::shape{16});
  const auto s = kiln::sin(x) * y;
  const auto ir = cuda_test::ir_of(false, 1, false, s + 1.0f, s - y, kiln::cast<kiln::half>(s));
  CHECK(ir.inputs.size() == 2);
  CHECK(ir.outputs.size() == 3);
  const std::string src = cuda_test::elementwise_source(ir);
  // One sinf for the three outputs, and three stores.
  CHECK(src.find("sinf(") == src.rfind("sinf("));
  CHECK(src.find("P.b4[a4] = ") != std::string::npos);
  cuda_test::compile_and_assemble(src, 80, true);
  cuda_test::compile_and_assemble(src, 90, true); // cubins for both architectures too
}

TEST_CASE("cuda codegen: 200 distinct leaves split into stages that fit the parameter space",
          "[cuda][codegen][stages]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  // The IR lowering gives a + b + c + ... over 200 f32 tensors (built directly: a 200-deep
  // expression type is slow to compile and lowers to exactly this).
  jit::kernel_ir ir;
  ir.strided = true;
  ir.rank = 8;
  ir.wide_index = true; // the widest parameters: 64-bit, rank 8
  std::int32_t acc = -1;
  for (int k = 0; k < 200; ++k) {
    ir.inputs.push_back(dtype::f32);
    jit::ir_instr ld{jit::ir_code::load, dtype::f32, dtype::f32};
    ld.slot = k;
    const std::int32_t v = ir.add(ld);
    if (acc < 0) {
      acc = v;
      continue;
    }
    jit::ir_instr add{jit::ir_code::apply, dtype::f32, dtype::f32};
    add.nargs = 2;
    add.args = {acc, v, -1};
    add.op = &jit::op_info<kiln::ops::add>;
    acc = ir.add(add);
  }
  ir.outputs = {dtype::f32};
  ir.results = {acc};
  // Unsplit, it overflows CUDA's 4 KiB of kernel parameters: a clear error, not a crash.
  CHECK_THROWS_WITH(cuda_test::elementwise_source(ir),
                    Catch::Contains("kernel parameters exceed CUDA's parameter space"));
  const auto plan = jit::split_stages(ir, jit::cuda::max_buffers);
  REQUIRE(plan.stages.size() > 1);
  std::vector<std::string> srcs;
  for (const auto& st : plan.stages) {
    const jit::param_layout layout(st.ir, jit::cuda::max_param_bytes);
    CHECK(jit::cuda::struct_bytes(layout) <= jit::cuda::max_param_bytes);
    srcs.push_back(jit::cuda::generate(st.ir, layout));
  }
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
}

TEST_CASE("cuda codegen: an op with no CUDA spelling is a kiln::error naming it",
          "[cuda][codegen]") {
  static constexpr kiln::spelling none{};
  static constexpr jit::ir_op fake{"fake_op", &none, &none, &none};
  jit::kernel_ir ir;
  ir.inputs = {dtype::f32};
  ir.outputs = {dtype::f32};
  jit::ir_instr ld{jit::ir_code::load, dtype::f32, dtype::f32};
  ld.slot = 0;
  jit::ir_instr op{jit::ir_code::apply, dtype::f32, dtype::f32};
  op.nargs = 1;
  op.args = {ir.add(ld), -1, -1};
  op.op = &fake;
  ir.results = {ir.add(op)};
  CHECK_THROWS_WITH(cuda_test::elementwise_source(ir),
                    Catch::StartsWith("kiln::fake_op: the op has no CUDA spelling for f32"));
}

namespace {
// x + s0 + s1 + ... with `count` f64 scalar parameters, each used once.
jit::kernel_ir many_scalars(int count) {
  jit::kernel_ir ir;
  ir.inputs = {dtype::f64};
  ir.outputs = {dtype::f64};
  jit::ir_instr ld{jit::ir_code::load, dtype::f64, dtype::f64};
  ld.slot = 0;
  std::int32_t acc = ir.add(ld);
  for (int k = 0; k < count; ++k) {
    ir.scalars.push_back(dtype::f64);
    jit::ir_instr p{jit::ir_code::param, dtype::f64, dtype::f64};
    p.slot = k;
    jit::ir_instr add{jit::ir_code::apply, dtype::f64, dtype::f64};
    add.nargs = 2;
    add.args = {acc, ir.add(p), -1};
    add.op = &jit::op_info<kiln::ops::add>;
    acc = ir.add(add);
  }
  ir.results = {acc};
  return ir;
}
} // namespace

TEST_CASE("cuda codegen: scalars past the parameter space are a kiln::error, and large kernel "
          "parameters are used where the device, driver and NVRTC allow them",
          "[cuda][codegen]") {
  // 600 f64 scalars: 4816 bytes with the two buffer pointers and the count.
  const jit::kernel_ir ir = many_scalars(600);
  CHECK_THROWS_WITH(cuda_test::elementwise_source(ir), Catch::Contains("parameter space") &&
                                                           Catch::Contains("600 scalars") &&
                                                           Catch::Contains("the limit is 4096"));
  // Which devices get 32764 bytes: sm_70+, driver 12.1+, NVRTC 12.1+.
  CHECK(jit::cuda::param_limit(70, 12010, 12, 1) == jit::cuda::max_large_param_bytes);
  CHECK(jit::cuda::param_limit(90, 13000, 13, 0) == jit::cuda::max_large_param_bytes);
  CHECK(jit::cuda::param_limit(61, 13000, 13, 0) == jit::cuda::max_param_bytes);
  CHECK(jit::cuda::param_limit(90, 12000, 13, 0) == jit::cuda::max_param_bytes);
  CHECK(jit::cuda::param_limit(90, 13000, 12, 0) == jit::cuda::max_param_bytes);
  CHECK(jit::cuda::param_limit(90, 13000, 11, 8) == jit::cuda::max_param_bytes);
  const std::string src =
      jit::cuda::generate(ir, jit::param_layout(ir, jit::cuda::max_large_param_bytes));
  if (cuda_test::nvrtc_or_skip() &&
      (jit::cuda::nvrtc().major > 12 ||
       (jit::cuda::nvrtc().major == 12 && jit::cuda::nvrtc().minor >= 1))) {
    cuda_test::compile_and_assemble(src, 80, true); // ptxas takes a 4816-byte parameter
    cuda_test::compile_and_assemble(src, 90);
  }
  // Past the large space too: 4100 scalars, 32816 bytes.
  const jit::kernel_ir huge = many_scalars(4100);
  CHECK_THROWS_WITH(
      jit::cuda::generate(huge, jit::param_layout(huge, jit::cuda::max_large_param_bytes)),
      Catch::Contains("4100 scalars") && Catch::Contains("the limit is 32764"));
}

TEST_CASE("nvrtc: a compile error is a kiln::error with NVRTC's log and the numbered source",
          "[cuda][nvrtc]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const std::string bad = "extern \"C\" __global__ void kiln_kernel() {\n  undeclared_x = 1;\n}\n";
  try {
    jit::cuda::compile_for(bad, {80, true});
    FAIL("no error");
  } catch (const kiln::error& e) {
    const std::string what = e.what();
    CHECK(what.find("NVRTC failed to compile the generated CUDA") != std::string::npos);
    CHECK(what.find("undeclared_x") != std::string::npos);           // NVRTC's log
    CHECK(what.find("2:   undeclared_x = 1;") != std::string::npos); // the numbered line
    CHECK(what.find("-arch=compute_80") != std::string::npos);       // the options
  }
}

TEST_CASE("ptxas: PTX it rejects is a kiln::error with its message", "[cuda][nvrtc]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  jit::cuda::module_image junk;
  const std::string text = ".version 8.0\n.target sm_80\nnot ptx at all\n";
  for (char c : text)
    junk.bytes.push_back(static_cast<std::byte>(c));
  CHECK_THROWS_WITH(jit::cuda::assemble_ptx(junk, 80),
                    Catch::Contains("ptxas rejected the PTX") && Catch::Contains("sm_80"));
}

TEST_CASE("cuda codegen: elementwise kernels in every shape compile and assemble, with their "
          "launch bounds, and a flat kernel's aligned units load and store as vectors",
          "[cuda][codegen][tune]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{8, 8});
  const kiln::tensor<double> d(kiln::shape{8, 8});
  const kiln::tensor<kiln::half> h(kiln::shape{8, 8});
  const kiln::tensor<bool> b(kiln::shape{8, 8});
  const kiln::tensor<std::int32_t> i(kiln::shape{8, 8});
  const std::vector<jit::kernel_ir> irs = {
      cuda_test::ir_of(false, 1, false, x * x + 2.0f * x),
      cuda_test::ir_of(false, 1, false, h * h, d + d), // 2-byte and 8-byte units together
      cuda_test::ir_of(false, 1, true, kiln::sqrt(d)), // 64-bit index
      cuda_test::ir_of(false, 1, false, b && b),
      cuda_test::ir_of(true, 2, false, i * i + i)}; // strided: elements one by one
  std::vector<std::string> srcs;
  for (const auto& ir : irs)
    for (int e : {1, 2, 4, 8})
      for (int v : {1, 2, 4, 8}) {
        const jit::param_layout layout(ir, jit::cuda::max_param_bytes);
        srcs.push_back(jit::cuda::generate(ir, layout, {512, e, v}));
        INFO(srcs.back());
        CHECK(srcs.back().find("__launch_bounds__(512)") != std::string::npos);
        CHECK((srcs.back().find("kiln_vcopy<") != std::string::npos) == (v > 1 && !ir.strided));
      }
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  // The flat float kernel with units of 4: one 16-byte load per input, one store.
  const jit::kernel_ir& flat = irs[0];
  const auto ptx = jit::cuda::compile_for(
      jit::cuda::generate(flat, jit::param_layout(flat, jit::cuda::max_param_bytes), {256, 2, 4}),
      {80, true});
  const std::string text(reinterpret_cast<const char*>(ptx.bytes.data()));
  INFO(text);
  CHECK(text.find(".maxntid 256") != std::string::npos);
  CHECK((text.find("ld.global.v4") != std::string::npos ||
         text.find("ld.global.nc.v4") != std::string::npos));
  CHECK(text.find("st.global.v4") != std::string::npos);
}

TEST_CASE("cuda codegen: the contraction kernel over fused operand prologues, every dtype "
          "rule, both index widths and several tiles, compiles and assembles for sm_80 and sm_90",
          "[cuda][codegen][matmul]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{8, 8});
  const kiln::tensor<kiln::half> h(kiln::shape{8, 8});
  const kiln::tensor<double> d(kiln::shape{8, 8});
  const kiln::tensor<std::int32_t> i(kiln::shape{8, 8});
  struct product {
    jit::kernel_ir ir;
    dtype acc, result;
    int batch_rank;
  };
  // The operands' values in the accumulator type over (batch..., m, n, k): f16 operands into
  // an f32 product, an expression with a scalar, f64, i32 accumulated in i64; 64-bit indices.
  const std::vector<product> products = {
      {cuda_test::ir_of(true, 3, false, kiln::cast<float>(h), kiln::cast<float>(h)), dtype::f32,
       dtype::f16, 0},
      {cuda_test::ir_of(true, 5, false, kiln::relu(x) * 2.0f, x), dtype::f32, dtype::f32, 2},
      {cuda_test::ir_of(true, 4, true, d, kiln::sqrt(d)), dtype::f64, dtype::f64, 1},
      {cuda_test::ir_of(true, 3, true, kiln::cast<std::int64_t>(i), kiln::cast<std::int64_t>(i)),
       dtype::i64, dtype::i32, 0}};
  const kiln::kernels::contraction_tile tiles[] = {{},
                                                   {16, 16, 8, 1, 1},
                                                   {128, 64, 16, 8, 4},
                                                   {128, 128, 8, 8, 8, 1, 2},
                                                   {32, 64, 16, 2, 4, 0, 2}};
  std::vector<std::string> srcs;
  for (const auto& p : products)
    for (const auto& t : tiles) {
      const jit::contract_spec spec{p.acc, p.result, p.batch_rank, t};
      const jit::kernel_ir ir = jit::contract_ir(p.ir, spec);
      srcs.push_back(jit::cuda::generate_contraction(
          ir, jit::param_layout(ir, jit::cuda::max_param_bytes, jit::contract_extras), spec));
    }
  CHECK(srcs[0].find("__launch_bounds__(256)") != std::string::npos);
  CHECK(srcs[0].find("__shared__ float kiln_ta[520]") != std::string::npos);  // 8 x (64 + 1)
  CHECK(srcs[3].find("__shared__ float kiln_ta[2112]") != std::string::npos); // 2 x 8 x (128 + 4)
  CHECK(srcs[3].find("kiln_s = 1u - kiln_s;") != std::string::npos);
  CHECK(srcs[5].find("kiln_a(P, bt, gi, gk)") != std::string::npos);
  CHECK(srcs[10].find("__shared__ double kiln_tb[") != std::string::npos);
  CHECK(srcs[15].find("for (int64_t w = kiln_group;") != std::string::npos);
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 90);
}
