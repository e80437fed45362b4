#pragma once
// Splitting a kernel that binds more buffers than the device allows (a 200-leaf sum on a
// device with 32 storage-buffer bindings) into stages: the largest subtree whose inputs
// fit is computed into a temporary by a kernel of its own, and the rest reads that
// temporary instead, until what is left fits. Temporaries hold the iteration's elements in
// its (merged) row-major order, so every stage walks one iteration space.
#include "kiln/error.hpp"
#include "kiln/jit/pipeline/ir.hpp"

#include <algorithm>
#include <set>

namespace kiln::jit {

// Where a stage's buffer comes from.
struct buffer_source {
  enum kind_t : std::uint8_t { input, temp, output } kind;
  std::int32_t index; // the pass's input slot, temporary, or output
};

struct stage {
  kernel_ir ir;
  std::vector<buffer_source> buffers; // binding order: ir.inputs, then ir.outputs
};

struct stage_plan {
  std::vector<stage> stages;
  std::vector<dtype> temps; // dtype of each temporary
  std::array<bool, 9> dtypes_used() const {
    std::array<bool, 9> u{};
    for (const auto& s : stages) {
      const auto v = s.ir.dtypes_used();
      for (int i = 0; i < 9; ++i)
        u[i] = u[i] || v[i];
    }
    return u;
  }
};

namespace detail {

// The IR computing `roots` (values of `ir`), with its loads renumbered to the inputs it
// uses; `sources` gets, per new input, where it comes from in `from`.
inline kernel_ir extract(const kernel_ir& ir, const std::vector<std::int32_t>& roots,
                         const std::vector<buffer_source>& from,
                         std::vector<buffer_source>& sources) {
  kernel_ir out;
  out.strided = ir.strided;
  out.rank = ir.rank;
  out.wide_index = ir.wide_index;
  out.scalars = ir.scalars; // scalar slots keep their numbers (params are packed whole)
  std::vector<std::int32_t> map(ir.code.size(), -1);
  std::vector<std::int32_t> slot_map(ir.inputs.size(), -1);
  // Instructions are in dependency order: copy the needed ones in that order.
  std::vector<bool> need(ir.code.size(), false);
  for (auto r : roots)
    need[r] = true;
  for (std::size_t v = ir.code.size(); v-- > 0;)
    if (need[v])
      for (int a = 0; a < ir.code[v].nargs; ++a)
        need[ir.code[v].args[a]] = true;
  for (std::size_t v = 0; v < ir.code.size(); ++v) {
    if (!need[v]) continue;
    ir_instr in = ir.code[v];
    for (int a = 0; a < in.nargs; ++a)
      in.args[a] = map[in.args[a]];
    if (in.code == ir_code::load) {
      if (slot_map[in.slot] < 0) {
        slot_map[in.slot] = static_cast<std::int32_t>(out.inputs.size());
        out.inputs.push_back(ir.inputs[in.slot]);
        sources.push_back(from[in.slot]);
      }
      in.slot = slot_map[in.slot];
    }
    map[v] = out.add(in);
  }
  for (auto r : roots)
    out.results.push_back(map[r]);
  return out;
}

// Input slots each value depends on.
inline std::vector<std::set<std::int32_t>> input_sets(const kernel_ir& ir) {
  std::vector<std::set<std::int32_t>> s(ir.code.size());
  for (std::size_t v = 0; v < ir.code.size(); ++v) {
    const auto& in = ir.code[v];
    if (in.code == ir_code::load) s[v].insert(in.slot);
    for (int a = 0; a < in.nargs; ++a)
      s[v].insert(s[in.args[a]].begin(), s[in.args[a]].end());
  }
  return s;
}

} // namespace detail

inline stage_plan split_stages(const kernel_ir& whole, int max_buffers);

namespace detail {
// Several outputs that do not fit together: each output gets its own kernels (their
// shared leaves would keep every stage of a joint split as wide as the whole). An output's
// target may be what a later output reads (an optimizer step updates a moment and the
// parameter computed from the old moment), so every output but the last is computed into
// a temporary and copied into its target once all are computed.
inline stage_plan split_outputs(const kernel_ir& whole, int max_buffers) {
  stage_plan plan;
  std::vector<buffer_source> from;
  for (std::size_t i = 0; i < whole.inputs.size(); ++i)
    from.push_back({buffer_source::input, static_cast<std::int32_t>(i)});
  std::vector<std::int32_t> held(whole.outputs.size(), -1); // output o's temporary
  for (std::size_t o = 0; o < whole.outputs.size(); ++o) {
    std::vector<buffer_source> sources;
    kernel_ir one = extract(whole, {whole.results[o]}, from, sources);
    one.outputs = {whole.outputs[o]};
    stage_plan sub = split_stages(one, max_buffers);
    const auto temp_base = static_cast<std::int32_t>(plan.temps.size());
    plan.temps.insert(plan.temps.end(), sub.temps.begin(), sub.temps.end());
    if (o + 1 < whole.outputs.size()) {
      held[o] = static_cast<std::int32_t>(plan.temps.size());
      plan.temps.push_back(whole.outputs[o]);
    }
    for (auto& st : sub.stages) {
      for (auto& b : st.buffers) {
        if (b.kind == buffer_source::input)
          b = sources[b.index];
        else if (b.kind == buffer_source::temp)
          b.index += temp_base;
        else if (held[o] >= 0)
          b = {buffer_source::temp, held[o]};
        else
          b.index = static_cast<std::int32_t>(o);
      }
      plan.stages.push_back(std::move(st));
    }
  }
  for (std::size_t o = 0; o + 1 < whole.outputs.size(); ++o) {
    stage copy;
    copy.ir.strided = whole.strided;
    copy.ir.rank = whole.rank;
    copy.ir.wide_index = whole.wide_index;
    copy.ir.scalars = whole.scalars; // (params are packed whole)
    copy.ir.inputs = {whole.outputs[o]};
    copy.ir.outputs = {whole.outputs[o]};
    ir_instr ld{ir_code::load, whole.outputs[o], compute_dtype(whole.outputs[o])};
    ld.slot = 0;
    copy.ir.results = {copy.ir.add(ld)};
    copy.buffers = {{buffer_source::temp, held[o]},
                    {buffer_source::output, static_cast<std::int32_t>(o)}};
    plan.stages.push_back(std::move(copy));
  }
  return plan;
}
} // namespace detail

inline stage_plan split_stages(const kernel_ir& whole, int max_buffers) {
  if (whole.outputs.size() > 1 &&
      static_cast<int>(whole.inputs.size() + whole.outputs.size()) > max_buffers)
    return detail::split_outputs(whole, max_buffers);
  stage_plan plan;
  kernel_ir ir = whole;
  std::vector<buffer_source> from; // where each input of `ir` comes from
  for (std::size_t i = 0; i < ir.inputs.size(); ++i)
    from.push_back({buffer_source::input, static_cast<std::int32_t>(i)});
  const int nout = static_cast<int>(ir.outputs.size());
  if (nout + 1 > max_buffers)
    throw error("eval", "too many outputs for one kernel on this device",
                std::to_string(nout) + " outputs, " + std::to_string(max_buffers) + " buffers");
  while (static_cast<int>(ir.inputs.size()) + nout > max_buffers) {
    const auto sets = detail::input_sets(ir);
    // The largest subtree a stage of its own can compute (its inputs + one temporary).
    std::int32_t best = -1;
    for (std::size_t v = 0; v < ir.code.size(); ++v) {
      const auto k = sets[v].size();
      if (ir.code[v].code == ir_code::load || k < 2 || static_cast<int>(k) + 1 > max_buffers)
        continue;
      if (best < 0 || k > sets[best].size()) best = static_cast<std::int32_t>(v);
    }
    if (best < 0)
      throw error("eval", "cannot split this expression into kernels the device can run",
                  std::to_string(ir.inputs.size()) + " inputs, " + std::to_string(max_buffers) +
                      " buffers per kernel");
    // The stage: compute `best` into a new temporary.
    const auto t = static_cast<std::int32_t>(plan.temps.size());
    plan.temps.push_back(ir.code[best].type);
    stage st;
    st.ir = detail::extract(ir, {best}, from, st.buffers);
    st.ir.outputs = {ir.code[best].type};
    st.buffers.push_back({buffer_source::temp, t});
    plan.stages.push_back(std::move(st));
    // The rest: `best` becomes a load of the temporary.
    kernel_ir rest = ir;
    const auto slot = static_cast<std::int32_t>(rest.inputs.size());
    rest.inputs.push_back(ir.code[best].type);
    ir_instr ld{ir_code::load, ir.code[best].type, compute_dtype(ir.code[best].type)};
    ld.slot = slot;
    rest.code[best] = ld;
    from.push_back({buffer_source::temp, t});
    std::vector<buffer_source> rest_from;
    kernel_ir pruned = detail::extract(rest, rest.results, from, rest_from);
    pruned.outputs = rest.outputs;
    ir = std::move(pruned);
    from = std::move(rest_from);
  }
  stage last;
  last.ir = ir;
  last.buffers = from;
  for (int o = 0; o < nout; ++o)
    last.buffers.push_back({buffer_source::output, o});
  plan.stages.push_back(std::move(last));
  return plan;
}

} // namespace kiln::jit
