#pragma once
// The tunables a kernel's custom ops offer to tune over (kiln::tunable's `values`), and a
// custom reduction's own: each one a parameter after the family's own, named `<op>.<NAME>`
// (`<reduction>.<NAME>`), its default the definition's value; and the kernel's IR under a
// configuration, with those ops' tunables set to its values, and the reduction's tunables
// for its device code (the generated code differs, so each configuration compiles its own
// kernels). Kernel ids stay those of the definitions' own values.
#include "kiln/ir/ir.hpp"
#include "kiln/jit/tune/space.hpp"

#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace kiln::jit::tune {

class op_tunables {
public:
  // The tunables of `ir`'s ops that list values, in the order their ops first appear, then
  // those of reduction `reduction` (its name; its definition's tunables `own`), as
  // parameters after those of the family's space `base`.
  op_tunables(const ir::kernel_ir& ir, const space& base, const char* reduction = nullptr,
              std::span<const tunable> own = {})
      : reduction_(reduction), own_(own), first_(base.size()) {
    for (const auto& in : ir.code) {
      if (!in.op) continue;
      bool seen = false;
      for (const auto& r : refs_)
        seen = seen || r.op == in.op;
      if (seen) continue;
      for (std::size_t t = 0; t < in.op->tunable_count; ++t)
        if (!in.op->tunables[t].values.empty()) refs_.push_back({in.op, t});
    }
    for (std::size_t t = 0; t < own_.size(); ++t)
      if (!own_[t].values.empty()) refs_.push_back({nullptr, t});
    space_ = std::make_unique<space>(extend(base));
  }

  bool empty() const { return refs_.empty(); }

  // The kernel's space: the family's with a parameter per tunable.
  const space& kernel_space() const { return *space_; }

  // The values configuration c (of kernel_space) gives the tunables.
  std::vector<long long> values_of(const config& c) const {
    std::vector<long long> v;
    for (std::size_t k = 0; k < refs_.size(); ++k)
      v.push_back(c[first_ + k]);
    return v;
  }
  // Whether they are the definitions' own.
  bool defaults(const std::vector<long long>& values) const {
    for (std::size_t k = 0; k < refs_.size(); ++k)
      if (values[k] != tunable_of(refs_[k]).value) return false;
    return true;
  }

  // The reduction's tunables under `values` (for reduce_spec::tunables); empty where they
  // keep the definition's values.
  std::vector<tunable> reduction_tunables(const std::vector<long long>& values) const {
    std::vector<tunable> out(own_.begin(), own_.end());
    bool changed = false;
    for (std::size_t k = 0; k < refs_.size(); ++k)
      if (!refs_[k].op && out[refs_[k].index].value != values[k]) {
        out[refs_[k].index].value = values[k];
        changed = true;
      }
    return changed ? out : std::vector<tunable>();
  }

  // `ir` with its tuned ops replaced by copies whose tunables take `values` (`ir` itself
  // where they are the ops' own). The copies live as long as this object (kernels compiled
  // from the IR keep pointers to them).
  ir::kernel_ir apply(ir::kernel_ir ir, const std::vector<long long>& values) {
    if (defaults(values)) return ir;
    const auto& map = ops_for(values);
    for (auto& in : ir.code)
      if (in.op)
        if (auto it = map.find(in.op); it != map.end()) in.op = it->second;
    return ir;
  }

private:
  // `base` with a parameter per tunable; a name that repeats (two ops of one name) gets
  // `#2`, `#3`...
  space extend(const space& base) const {
    std::vector<param> more;
    std::map<std::string, int> uses;
    for (const auto& r : refs_) {
      const tunable& t = tunable_of(r);
      std::string name = std::string(r.op ? r.op->name : reduction_) + "." + t.name;
      if (const int k = ++uses[name]; k > 1) name += "#" + std::to_string(k);
      std::vector<std::int64_t> vs(t.values.begin(), t.values.end());
      vs.push_back(t.value);
      std::sort(vs.begin(), vs.end());
      vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
      more.push_back({name, std::string("the op's tunable ") + t.name, vs, t.value});
    }
    return base.with(more);
  }

  struct ref {
    const ir::ir_op* op; // null: the reduction's own
    std::size_t index;   // of the tunable in the op's (the reduction's)
  };
  const tunable& tunable_of(const ref& r) const {
    return r.op ? r.op->tunables[r.index] : own_[r.index];
  }

  const std::map<const ir::ir_op*, const ir::ir_op*>& ops_for(const std::vector<long long>& vs) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = rewrites_.try_emplace(vs);
    if (!fresh) return it->second;
    std::map<const ir::ir_op*, std::vector<tunable>*> arrays;
    for (std::size_t k = 0; k < refs_.size(); ++k) {
      const ir::ir_op* op = refs_[k].op;
      if (!op) continue;
      auto& a = arrays[op];
      if (!a) {
        a = &arrays_.emplace_back(op->tunables, op->tunables + op->tunable_count);
        ir::ir_op copy = *op;
        copy.tunables = a->data();
        ops_.push_back(copy);
        it->second[op] = &ops_.back();
      }
      (*a)[refs_[k].index].value = vs[k];
    }
    return it->second;
  }

  const char* reduction_;
  std::span<const tunable> own_;
  std::size_t first_; // the first tunable's parameter in kernel_space
  std::vector<ref> refs_;
  std::unique_ptr<space> space_;
  std::mutex mutex_;
  std::deque<std::vector<tunable>> arrays_;
  std::deque<ir::ir_op> ops_;
  std::map<std::vector<long long>, std::map<const ir::ir_op*, const ir::ir_op*>> rewrites_;
};

// The tunables of a kernel whose ops (or reduction) offer some, else null; and the space
// its launches take: theirs, else the family's.
inline std::unique_ptr<op_tunables> op_tunables_of(const ir::kernel_ir& ir, const space& base,
                                                   const char* reduction = nullptr,
                                                   std::span<const tunable> own = {}) {
  auto t = std::make_unique<op_tunables>(ir, base, reduction, own);
  return t->empty() ? nullptr : std::move(t);
}
inline const space& space_of(const std::unique_ptr<op_tunables>& t, const space& base) {
  return t ? t->kernel_space() : base;
}

} // namespace kiln::jit::tune
