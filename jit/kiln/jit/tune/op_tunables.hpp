#pragma once
// The tunables a kernel's custom ops offer to tune over (kiln::tunable's `values`): each one
// a parameter after the family's own, named `<op>.<NAME>`, its default the op's own value;
// and the kernel's IR under a configuration, with those ops' tunables set to its values (the
// generated code differs, so each configuration compiles its own kernels). Kernel ids stay
// those of the ops' own values.
#include "kiln/ir/ir.hpp"
#include "kiln/jit/tune/space.hpp"

#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace kiln::jit::tune {

class op_tunables {
public:
  // The tunables of `ir`'s ops that list values, in the order their ops first appear.
  explicit op_tunables(const ir::kernel_ir& ir) {
    for (const auto& in : ir.code) {
      if (!in.op) continue;
      bool seen = false;
      for (const auto& r : refs_)
        seen = seen || r.op == in.op;
      if (seen) continue;
      for (std::size_t t = 0; t < in.op->tunable_count; ++t)
        if (!in.op->tunables[t].values.empty()) refs_.push_back({in.op, t});
    }
  }

  bool empty() const { return refs_.empty(); }

  // `base` with a parameter per tunable; a name that repeats (two ops of one name) gets
  // `#2`, `#3`...
  space extend(const space& base) const {
    std::vector<param> more;
    std::map<std::string, int> uses;
    for (const auto& r : refs_) {
      const tunable& t = r.op->tunables[r.index];
      std::string name = std::string(r.op->name) + "." + t.name;
      if (const int k = ++uses[name]; k > 1) name += "#" + std::to_string(k);
      std::vector<std::int64_t> vs(t.values.begin(), t.values.end());
      vs.push_back(t.value);
      std::sort(vs.begin(), vs.end());
      vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
      more.push_back({name, std::string("the op's tunable ") + t.name, vs, t.value});
    }
    return base.with(more);
  }

  // The values configuration c gives the tunables (its parameters from `first` on).
  std::vector<long long> values_of(const config& c, std::size_t first) const {
    std::vector<long long> v;
    for (std::size_t k = 0; k < refs_.size(); ++k)
      v.push_back(c[first + k]);
    return v;
  }
  bool defaults(const std::vector<long long>& values) const {
    for (std::size_t k = 0; k < refs_.size(); ++k)
      if (values[k] != refs_[k].op->tunables[refs_[k].index].value) return false;
    return true;
  }

  // `ir` with its tuned ops replaced by copies whose tunables take `values`. The copies live
  // as long as this object (kernels compiled from the IR keep pointers to them).
  ir::kernel_ir apply(ir::kernel_ir ir, const std::vector<long long>& values) {
    const auto& map = ops_for(values);
    for (auto& in : ir.code)
      if (in.op)
        if (auto it = map.find(in.op); it != map.end()) in.op = it->second;
    return ir;
  }

private:
  struct ref {
    const ir::ir_op* op;
    std::size_t index; // of the tunable in the op's
  };

  const std::map<const ir::ir_op*, const ir::ir_op*>& ops_for(const std::vector<long long>& vs) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = rewrites_.try_emplace(vs);
    if (!fresh) return it->second;
    std::map<const ir::ir_op*, std::vector<tunable>*> arrays;
    for (std::size_t k = 0; k < refs_.size(); ++k) {
      const ir::ir_op* op = refs_[k].op;
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

  std::vector<ref> refs_;
  std::mutex mutex_;
  std::deque<std::vector<tunable>> arrays_;
  std::deque<ir::ir_op> ops_;
  std::map<std::vector<long long>, std::map<const ir::ir_op*, const ir::ir_op*>> rewrites_;
};

} // namespace kiln::jit::tune
