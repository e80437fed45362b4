// Lowering an expression to the kernel IR (include/kiln/ir/): the IR of small expressions
// written out by hand, instruction by instruction, so a change in what the device code
// computes (an operand's dtype, a conversion, a scalar's bits, which leaves share a buffer)
// fails here before any device runs it.
#include "support.hpp"

#include "kiln/ir/lower.hpp"

#include <bit>
#include <cstring>

namespace {

using kiln::dtype;
using kiln::ir::ir_code;
using kiln::ir::ir_instr;

struct lowered {
  kiln::ir::leaf_table lt;
  kiln::ir::kernel_ir ir;
};

template <class... E>
lowered lower_all(const E&... e) {
  lowered r;
  kiln::ir::collect(r.lt, e...);
  r.ir = kiln::ir::lower(r.lt.pattern, false, 1, false, e...);
  return r;
}

// What one instruction must be: code, value dtype, compute dtype, args, slot, op name.
struct want {
  ir_code code;
  dtype type;
  dtype compute;
  std::vector<int> args = {};
  int slot = -1;
  const char* op = nullptr;
};

void check_code(const kiln::ir::kernel_ir& ir, const std::vector<want>& code) {
  REQUIRE(ir.code.size() == code.size());
  for (std::size_t i = 0; i < code.size(); ++i) {
    INFO("instruction " << i);
    const ir_instr& in = ir.code[i];
    CHECK(in.code == code[i].code);
    CHECK(in.type == code[i].type);
    CHECK(in.compute == code[i].compute);
    REQUIRE(in.nargs == code[i].args.size());
    for (std::size_t a = 0; a < code[i].args.size(); ++a)
      CHECK(in.args[a] == code[i].args[a]);
    CHECK(in.slot == code[i].slot);
    if (code[i].op)
      CHECK(std::string(in.op->name) == code[i].op);
    else
      CHECK(in.op == nullptr);
  }
}

// Runs f, requires a kiln::error from `op` whose message contains `part`.
template <class F>
void require_error(F&& f, const std::string& op, const std::string& part) {
  try {
    f();
  } catch (const kiln::error& e) {
    INFO("message: " << e.what());
    CHECK(e.op() == op);
    CHECK(std::string(e.what()).find(part) != std::string::npos);
    return;
  }
  FAIL("no kiln::error was thrown (expected one from " << op << ")");
}

std::uint64_t float_bits(float f) {
  std::uint64_t b = 0;
  std::memcpy(&b, &f, sizeof f);
  return b;
}

} // namespace

TEST_CASE("lowering: a float expression, a leaf used twice, a scalar", "[lowering]") {
  const auto a = kiln::from(test::uniform<float>(16, -1, 1));
  const auto b = kiln::from(test::uniform<float>(16, -1, 1));
  const float s = test::uniform<float>(1, 0.5, 2)[0];
  const auto r = lower_all(a * b + kiln::sin(a) * s);

  // Leaves in tree order: a, b, a, s. `a` twice is one buffer.
  CHECK(r.lt.pattern == std::vector<std::int16_t>{0, 1, 0, -1});
  REQUIRE(r.lt.inputs.size() == 2);
  CHECK(r.lt.inputs[0].storage == a.storage().get());
  CHECK(r.lt.inputs[1].storage == b.storage().get());
  REQUIRE(r.lt.scalars.size() == 1);
  CHECK(r.lt.scalars[0].type == dtype::f32);
  CHECK(r.lt.scalars[0].bits == float_bits(s));

  const auto f = dtype::f32;
  check_code(r.ir, {
                       {ir_code::load, f, f, {}, 0},              // 0: a
                       {ir_code::load, f, f, {}, 1},              // 1: b
                       {ir_code::apply, f, f, {0, 1}, -1, "mul"}, // 2: a * b
                       {ir_code::apply, f, f, {0}, -1, "sin"},    // 3: sin(a), a loaded once
                       {ir_code::param, f, f, {}, 0},             // 4: s
                       {ir_code::apply, f, f, {3, 4}, -1, "mul"}, // 5
                       {ir_code::apply, f, f, {2, 5}, -1, "add"}, // 6
                   });
  CHECK(r.ir.inputs == std::vector<dtype>{f, f});
  CHECK(r.ir.scalars == std::vector<dtype>{f});
  CHECK(r.ir.outputs == std::vector<dtype>{f});
  CHECK(r.ir.results == std::vector<std::int32_t>{6});
}

TEST_CASE("lowering: mixed dtypes convert operands to the op's compute dtype", "[lowering]") {
  const auto i = kiln::from(test::integers<std::int32_t>(8, -100, 100));
  const auto x = kiln::from(test::uniform<double>(8, -1, 1)); // f64
  const kiln::tensor<kiln::half> h =
      kiln::cast<kiln::half>(kiln::from(test::uniform<float>(8, -1, 1)));
  // i32 + f64 is f64; then compared with a half tensor (a bool); that bool selects.
  const auto r = lower_all(kiln::where(i + x > h, x, 1.5));

  const auto d = dtype::f64;
  check_code(r.ir, {
                       {ir_code::load, dtype::i32, dtype::i32, {}, 0}, // 0: i
                       {ir_code::load, d, d, {}, 1},                   // 1: x
                       {ir_code::convert, d, d, {0}},                  // 2: i as f64
                       {ir_code::apply, d, d, {2, 1}, -1, "add"},      // 3
                       {ir_code::load, dtype::f16, dtype::f32, {}, 2}, // 4: h (held in float)
                       {ir_code::convert, d, d, {4}},                  // 5: h as f64
                       {ir_code::apply, dtype::b8, d, {3, 5}, -1, "greater"}, // 6
                       {ir_code::param, d, d, {}, 0},                         // 7: 1.5
                       {ir_code::apply, d, d, {6, 1, 7}, -1, "where"},        // 8
                   });
  CHECK(r.ir.inputs == std::vector<dtype>{dtype::i32, d, dtype::f16});
  CHECK(r.lt.scalars[0].bits == std::bit_cast<std::uint64_t>(1.5));
}

TEST_CASE("lowering: 16-bit float scalars reach the kernel as float, bool and u8 as words",
          "[lowering]") {
  const float v = test::uniform<float>(1, -4, 4)[0];
  const kiln::half hv(v);
  const kiln::bfloat16 bv(v);
  const kiln::tensor<kiln::half> h =
      kiln::cast<kiln::half>(kiln::from(test::uniform<float>(4, -1, 1)));
  const kiln::tensor<kiln::bfloat16> bf =
      kiln::cast<kiln::bfloat16>(kiln::from(test::uniform<float>(4, -1, 1)));
  const auto u = kiln::from(test::integers<std::uint8_t>(4, 0, 255));
  const kiln::tensor<bool> k = u > std::uint8_t{100};
  const std::uint8_t uv = 200;
  const auto r = lower_all(h * hv, bf * bv, u + uv, k && true);

  REQUIRE(r.lt.scalars.size() == 4);
  CHECK(r.lt.scalars[0].type == dtype::f16);
  CHECK(r.lt.scalars[0].bits == float_bits(static_cast<float>(hv)));
  CHECK(r.lt.scalars[1].type == dtype::bf16);
  CHECK(r.lt.scalars[1].bits == float_bits(static_cast<float>(bv)));
  CHECK(r.lt.scalars[2].type == dtype::u8);
  CHECK(r.lt.scalars[2].bits == 200);
  CHECK(r.lt.scalars[3].type == dtype::b8);
  CHECK(r.lt.scalars[3].bits == 1);
  // Four outputs, one per expression, each converted to its own dtype.
  CHECK(r.ir.outputs == std::vector<dtype>{dtype::f16, dtype::bf16, dtype::u8, dtype::b8});
  REQUIRE(r.ir.results.size() == 4);
  CHECK(r.ir.code[r.ir.results[0]].type == dtype::f16);
  CHECK(r.ir.code[r.ir.results[3]].type == dtype::b8);
}

TEST_CASE("lowering: equal scalars share a parameter, outputs share leaves", "[lowering]") {
  const auto a = kiln::from(test::uniform<float>(16, -1, 1));
  const float s = test::uniform<float>(1, 0.5, 2)[0];
  const auto r = lower_all(a * s, a + s, a * s);
  CHECK(r.lt.pattern == std::vector<std::int16_t>{0, -1, 0, -1, 0, -1});
  CHECK(r.lt.inputs.size() == 1);
  CHECK(r.lt.scalars.size() == 1);
  // The third output is the first one's value: one instruction computes both.
  REQUIRE(r.ir.results.size() == 3);
  CHECK(r.ir.results[0] == r.ir.results[2]);
  CHECK(r.ir.results[0] != r.ir.results[1]);
  CHECK(r.ir.code.size() == 4); // load, param, mul, add
}

TEST_CASE("lowering: one output dtype per expression, or a kiln::error", "[lowering][errors]") {
  const auto a = kiln::from(test::uniform<float>(4, -1, 1));
  const auto e = a + 1.0f;
  kiln::ir::leaf_table lt;
  kiln::ir::collect(lt, e);
  const dtype outs[] = {dtype::f32, dtype::f32};
  const kiln::ir::expr_description exprs[] = {
      kiln::ir::described<std::remove_cvref_t<decltype(e)>>};
  require_error([&] { kiln::ir::lower(outs, lt.pattern, false, 1, false, exprs); }, "eval",
                "one output dtype per expression");
}
