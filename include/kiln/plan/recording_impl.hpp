#pragma once
// A plan recording's definitions (declared in recording.hpp; see kiln/linkage.hpp for where
// they are compiled).
#include "kiln/eval/device_pass.hpp"
#include "kiln/eval/host_pass.hpp"
#include "kiln/eval/host_pass_impl.hpp"
#include "kiln/plan/recording.hpp"

#include <algorithm>
#include <deque>
#include <mutex>

namespace kiln::detail {

inline std::string plan_tensor_words(const kiln::layout& l, dtype t) {
  return "a tensor<" + std::string(name(t)) + "> of shape " + l.shape.str();
}

KILN_CORE_INLINE void note_made_storage(const std::shared_ptr<storage>& s) {
  if (plan_recording* r = recording_now()) r->made(s);
}

// The storages of note_constant_storage, kept for the program.
inline std::vector<std::shared_ptr<storage>>& plan_constants(std::mutex*& m) {
  static std::mutex lock;
  static std::vector<std::shared_ptr<storage>> all;
  m = &lock;
  return all;
}
KILN_CORE_INLINE void note_constant_storage(std::shared_ptr<storage> s) {
  std::mutex* m = nullptr;
  auto& all = plan_constants(m);
  const std::lock_guard<std::mutex> hold(*m);
  all.push_back(std::move(s));
}
inline bool is_plan_constant(const storage* s) {
  std::mutex* m = nullptr;
  const auto& all = plan_constants(m);
  const std::lock_guard<std::mutex> hold(*m);
  return std::any_of(all.begin(), all.end(),
                     [&](const std::shared_ptr<storage>& c) { return c.get() == s; });
}

KILN_CORE_INLINE void refuse_in_capture(const char* op, const char* why) {
  throw error(std::string("plan ") + recording_now()->name(),
              std::string(op) + " cannot run inside a captured function", why);
}

KILN_CORE_INLINE plan_recording::plan_recording(std::string name, const void* signature)
    : name_(std::move(name)), signature_(signature) {}
KILN_CORE_INLINE plan_recording::~plan_recording() = default;

inline std::pair<std::uintptr_t, std::uintptr_t> bytes_of(const bound_argument& a) {
  return byte_range(flat_leaf{a.st, a.layout, a.type}, *a.layout);
}
// Pairs (i, j) of arguments over distinct storages whose bytes meet (borrowed memory: two
// views of another library's array), one bit each, in order.
inline std::uint64_t overlap_bits(std::span<const bound_argument> args) {
  std::uint64_t bits = 0;
  int bit = 0;
  for (std::size_t i = 0; i < args.size(); ++i)
    for (std::size_t j = 0; j < i; ++j, ++bit)
      if (bit < 64 && args[i].st != args[j].st && args[i].st->on_host() && args[j].st->on_host() &&
          intersect(bytes_of(args[i]), bytes_of(args[j])))
        bits |= std::uint64_t{1} << bit;
  return bits;
}

KILN_CORE_INLINE std::vector<std::shared_ptr<storage>>
plan_recording::bind_for_capture(std::span<const bound_argument> args) {
  std::vector<std::shared_ptr<storage>> per_arg;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bound_argument& a = args[i];
    int same = int(i);
    for (std::size_t j = 0; j < i && same == int(i); ++j)
      if (args[j].st == a.st) same = int(j);
    plan_argument p{*a.layout, a.st->device(), same, 0};
    if (same == int(i)) {
      p.slot = int(slots_.size());
      slots_.push_back(a.st->on_host()
                           ? std::make_shared<storage>(a.type, a.st->count(), a.st->data())
                           : std::make_shared<storage>(a.type, a.st->count(), a.st->device(),
                                                       a.st->shared_backend(), a.st->handle()));
      real_.push_back(a.st);
    } else {
      p.slot = args_[std::size_t(same)].slot;
    }
    borrowed_ = borrowed_ || (a.st->on_host() && !a.st->owned());
    per_arg.push_back(slots_[std::size_t(p.slot)]);
    args_.push_back(std::move(p));
  }
  if (borrowed_) overlaps_ = overlap_bits(args);
  return per_arg;
}

KILN_CORE_INLINE void plan_recording::made(const std::shared_ptr<storage>& s) {
  made_.emplace(s.get(), s);
}

KILN_CORE_INLINE void plan_recording::adopt(const std::shared_ptr<storage>& s) {
  adopted_.emplace(s.get(), s);
}

KILN_CORE_INLINE const storage* plan_recording::use(const storage* s, const kiln::layout& l,
                                                    dtype t, const char* op, bool held) {
  bool slot = false;
  for (std::size_t i = 0; i < slots_.size() && !slot; ++i)
    if (slots_[i].get() == s || real_[i] == s) s = slots_[i].get(), slot = true;
  if (!slot && !made_.count(s) && !adopted_.count(s) && !is_plan_constant(s))
    throw error("plan " + name_, std::string(op) + " uses a tensor that is not an argument",
                plan_tensor_words(l, t) +
                    " reached from inside the captured function (a reference it holds) and "
                    "neither passed as an argument nor made inside it; pass it as an argument");
  used_[s] += held ? 1 : 0;
  const std::size_t at = steps_.size(); // (the step being recorded)
  if (auto [it, fresh] = span_.try_emplace(s, at, at); !fresh) it->second.second = at;
  return s;
}

KILN_CORE_INLINE const std::shared_ptr<storage>&
plan_recording::slot_handle(const storage* slot) const {
  return *std::find_if(slots_.begin(), slots_.end(),
                       [&](const std::shared_ptr<storage>& x) { return x.get() == slot; });
}

KILN_CORE_INLINE void plan_recording::add(std::unique_ptr<plan_step> step) {
  if (nested == 0) steps_.push_back(std::move(step));
}

KILN_CORE_INLINE void
plan_recording::check_arguments(std::span<const bound_argument> proxies) const {
  for (std::size_t i = 0; i < proxies.size(); ++i) {
    const plan_argument& a = args_[i];
    if (proxies[i].st != slots_[std::size_t(a.slot)].get() || *proxies[i].layout != a.layout)
      throw error("plan " + name_, "the captured function replaced an argument's handle",
                  "argument " + std::to_string(i + 1) +
                      " now refers to other memory or another layout (a plan writes into its "
                      "arguments in place; assign values, not tensors of another shape)");
  }
}

KILN_CORE_INLINE void plan_recording::finish() {
  const auto held = [&](const storage* s) {
    const auto u = used_.find(s);
    return u == used_.end() ? 0L : u->second;
  };
  for (const std::shared_ptr<storage>& s : slots_)
    if (s.use_count() > 1 + held(s.get()))
      throw error("plan " + name_, "the captured function keeps an argument's handle",
                  "a handle to an argument outlives the call (stored outside the function); a "
                  "replay would change what it reads");
  for (auto& [raw, s] : made_) {
    const auto u = used_.find(raw);
    if (u == used_.end()) continue;
    if (!adopted_.count(raw) && s.use_count() > 1 + u->second)
      throw error("plan " + name_, "the captured function keeps a tensor it made",
                  "a tensor of " + std::to_string(s->count()) +
                      " elements made inside the function outlives the call (kept in a handle "
                      "outside it); every replay would write it again: make it outside and pass "
                      "it as an argument");
    arena_.push_back(s);
  }
  for (auto& [raw, s] : adopted_)
    if (used_.count(raw) && !made_.count(raw)) arena_.push_back(s);
  share_arena();
  made_.clear();
  used_.clear();
  adopted_.clear();
  span_.clear();
}

// The function's own host temporaries as uncaptured statements have them: a block freed at a
// statement's end is the next one's (and stays in cache); kept apart, a plan's temporaries
// made its working set the sum of them all. Storages whose first-to-last step spans do not
// meet share a block (first fit, in order of first use); one a component adopted, or one a
// step holds without knowing (none today), keeps its own.
KILN_CORE_INLINE void plan_recording::share_arena() {
  struct use {
    storage* st;
    std::size_t first, last, bytes;
  };
  std::vector<use> uses;
  for (const std::shared_ptr<storage>& s : arena_) {
    if (!s->on_host() || !s->owned() || adopted_.count(s.get()) || !made_.count(s.get())) continue;
    const auto sp = span_.find(s.get());
    if (sp == span_.end()) continue;
    const std::size_t bytes = (std::size_t(s->count()) * size_of(s->dtype()) + 63) / 64 * 64;
    if (bytes == 0) continue;
    uses.push_back({s.get(), sp->second.first, sp->second.second, bytes});
  }
  std::sort(uses.begin(), uses.end(), [](const use& a, const use& b) { return a.first < b.first; });
  struct block {
    std::size_t bytes, free_after; // (the last step of its latest user)
    std::vector<storage*> users;
  };
  std::vector<block> shared;
  for (const use& u : uses) {
    block* fit = nullptr;
    for (block& b : shared)
      if (b.free_after < u.first && (!fit || (b.bytes >= u.bytes) > (fit->bytes >= u.bytes)))
        fit = &b;
    if (!fit) fit = &shared.emplace_back(block{0, 0, {}});
    fit->bytes = std::max(fit->bytes, u.bytes);
    fit->free_after = u.last;
    fit->users.push_back(u.st);
  }
  for (const block& b : shared) {
    if (b.users.size() < 2) continue; // (alone: its own block as it is)
    void* p = std::aligned_alloc(64, b.bytes);
    if (!p) continue; // (out of memory: the storages keep their own blocks)
    blocks_.emplace_back(p);
    for (storage* s : b.users)
      s->share_memory(p);
  }
}

KILN_CORE_INLINE bool plan_recording::replays(std::span<const bound_argument> args) const noexcept {
  if (args.size() != args_.size()) return false;
  // The storages of the last call that matched: the same ones share memory as they did then
  // (a loop passing the same tensors skips comparing every pair).
  bool as_last = last_.size() == args.size();
  for (std::size_t i = 0; i < args.size() && as_last; ++i)
    as_last = last_[i] == args[i].st;
  bool borrowed = borrowed_;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const plan_argument& p = args_[i];
    const storage* s = args[i].st;
    if (!(*args[i].layout == p.layout) || s->device() != p.device) return false;
    borrowed = borrowed || (s->on_host() && !s->owned());
    if (as_last) continue;
    if (p.same_as != int(i)) {
      if (args[std::size_t(p.same_as)].st != s) return false;
    } else {
      for (std::size_t j = 0; j < i; ++j)
        if (args[j].st == s) return false;
    }
  }
  if (borrowed && overlap_bits(args) != overlaps_) return false;
  if (!as_last) {
    last_.resize(args.size());
    for (std::size_t i = 0; i < args.size(); ++i)
      last_[i] = args[i].st;
  }
  return true;
}

KILN_CORE_INLINE int plan_recording::matches(std::span<const bound_argument> args,
                                             std::string* why) const {
  const auto say = [&](std::size_t i, const std::string& what, int code = 2) {
    if (why) *why = "argument " + std::to_string(i + 1) + " " + what;
    return code;
  };
  if (args.size() != args_.size()) {
    if (why) *why = "the call has another number of tensor arguments";
    return 2;
  }
  int code = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const plan_argument& p = args_[i];
    const bound_argument& a = args[i];
    if (a.st->device() != p.device)
      return say(i, "was captured on " + p.device.str() + " and is now on " + a.st->device().str());
    // Another layout: 1 where the rank is kept (a shapeless plan captures it), else 2; the
    // first argument of the worst kind is the one named.
    const int differs = *a.layout == p.layout ? 0 : a.layout->rank() == p.layout.rank() ? 1 : 2;
    if (differs > code)
      code =
          say(i,
              a.layout->shape == p.layout.shape
                  ? "has the captured shape " + p.layout.shape.str() +
                        " but another layout (strides " + a.layout->strides.str() + " offset " +
                        std::to_string(a.layout->offset) + ", captured " + p.layout.strides.str() +
                        " offset " + std::to_string(p.layout.offset) + ")"
                  : "was captured with shape " + p.layout.shape.str() + " and is now " +
                        a.layout->shape.str(),
              differs);
    int same = int(i);
    for (std::size_t j = 0; j < i && same == int(i); ++j)
      if (args[j].st == a.st) same = int(j);
    if (same != p.same_as)
      return say(i, p.same_as == int(i)
                        ? "shares memory with argument " + std::to_string(same + 1) +
                              "; they were distinct when the plan was captured"
                        : "was captured sharing memory with argument " +
                              std::to_string(p.same_as + 1) + " and now does not");
  }
  if (borrowed_ || std::any_of(args.begin(), args.end(), [](const bound_argument& a) {
        return a.st->on_host() && !a.st->owned();
      }))
    if (overlap_bits(args) != overlaps_) {
      if (why) *why = "arguments over borrowed memory overlap differently than when captured";
      return 2;
    }
  return code;
}

KILN_CORE_INLINE void plan_recording::bind(std::span<const bound_argument> args) {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args_[i].same_as == int(i))
      slots_[std::size_t(args_[i].slot)]->rebind(
          args[i].st->on_host() ? args[i].st->data() : args[i].st->handle(), args[i].st->count());
}

KILN_CORE_INLINE void plan_recording::unbind() noexcept {
  for (const std::shared_ptr<storage>& s : slots_)
    s->rebind(nullptr, 0);
}

KILN_CORE_INLINE void plan_recording::replay() {
  for (const std::unique_ptr<plan_step>& s : steps_)
    s->run();
}

// A host pass, replayed: its operands' layouts are the plan's copies and their storages
// the plan's (slots or its own), so a replay only reads each storage's current address.
// A pass that runs as one contiguous run of one task (most small passes) is resolved once:
// the kernel's arguments are laid out and a replay calls the kernel itself.
class host_pass_step final : public plan_step {
public:
  host_pass_step(const host_kernel_ref& k, std::span<const host_output> outs,
                 std::span<const storage* const> stores, std::span<const flat_leaf> leaves,
                 std::span<const flat_scalar> scalars, const kiln::shape& shape)
      : k_(k), shape_(shape), scalars_(scalars.begin(), scalars.end()) {
    const std::size_t no = outs.size(), nl = leaves.size();
    layouts_.reserve(no + nl);
    for (const host_output& o : outs)
      layouts_.push_back(*o.layout);
    for (const flat_leaf& l : leaves)
      layouts_.push_back(*l.layout);
    for (std::size_t o = 0; o < no; ++o) {
      outs_.push_back({nullptr, &layouts_[o], outs[o].type, outs[o].active});
      out_stores_.push_back(stores[o]);
    }
    for (std::size_t l = 0; l < nl; ++l)
      leaves_.push_back({leaves[l].storage, &layouts_[no + l], leaves[l].type});
    for (std::size_t s = 0; s < scalars_.size(); ++s)
      if (scalars_[s].source) parameters_.push_back(s);
    resolve(outs, leaves);
  }

  void run() override {
    for (const std::size_t s : parameters_)
      std::memcpy(&scalars_[s].bits, scalars_[s].source, sizeof scalars_[s].bits);
    if (n_ > 0) {
      const std::size_t nl = in_.size(), no = out_.size();
      for (std::size_t i = 0; i < nl; ++i)
        if (const direct_operand& d = direct_[i]; d.st)
          in_[i] = static_cast<const unsigned char*>(d.st->data()) + d.bytes;
      for (std::size_t o = 0; o < no; ++o)
        if (const direct_operand& d = direct_[nl + o]; d.st)
          out_[o] = static_cast<unsigned char*>(d.st->data()) + d.bytes;
      k_.run(args_);
      return;
    }
    for (std::size_t o = 0; o < outs_.size(); ++o)
      outs_[o].data = static_cast<unsigned char*>(out_stores_[o]->data()) +
                      outs_[o].layout->offset * std::int64_t(size_of(outs_[o].type));
    run_host_pass(k_, outs_, leaves_, scalars_, shape_);
  }

private:
  // Whether the pass runs as run_contiguous_pass (host_pass_impl.hpp) runs a pass of one
  // task with no memo sites and no streaming stores; then its kernel's arguments, once.
  void resolve(std::span<const host_output> outs, std::span<const flat_leaf> leaves) {
    const std::int64_t total = numel(shape_);
    const host_launch launch = host_launch_for(k_, total);
    if (!k_.memos.empty() || total > pass_grain(k_, launch)) return;
    const auto plain = [&](const kiln::layout& l) {
      return l.shape == shape_ && l.is_contiguous();
    };
    if (total == 0) return; // (run_host_pass does nothing)
    std::int64_t footprint = 0;
    const std::size_t nl = leaves.size();
    std::vector<direct_operand> d(nl + outs.size(), direct_operand{nullptr, 0});
    for (std::size_t p = 0; p < outs.size(); ++p) {
      if (!outs[p].active) continue;
      if (!plain(*outs[p].layout)) return;
      d[nl + p] = {out_stores_[p], outs[p].layout->offset * std::int64_t(size_of(outs[p].type))};
      footprint += std::int64_t(size_of(outs[p].type));
    }
    for (std::size_t l = 0, o = 0; l < nl; ++l) {
      while (o + 1 < outs.size() && int(l) >= k_.leaf_start[o + 1])
        ++o;
      if (!outs[o].active) continue;
      if (!plain(*leaves[l].layout)) return;
      d[l] = {leaves[l].storage, leaves[l].layout->offset * std::int64_t(size_of(leaves[l].type))};
      footprint += std::int64_t(size_of(leaves[l].type));
    }
    if (k_.may_stream && streams(launch, footprint * total)) return;
    direct_ = std::move(d);
    in_.assign(nl, nullptr);
    out_.assign(outs.size(), nullptr);
    n_ = total;
    // The kernel's arguments, laid out once (built at each call, their stores were still in
    // flight when the kernel read them back).
    args_ = {in_.data(),
             scalars_.data(),
             nullptr,
             nullptr,
             0,
             out_.data(),
             n_,
             false,
             total >= k_.lanes && total % k_.lanes != 0 &&
                 outputs_apart(outs, leaves, k_.leaf_start),
             pass_prefetch(launch)};
  }

  host_kernel_ref k_;
  kiln::shape shape_;
  std::vector<flat_scalar> scalars_;
  std::vector<std::size_t> parameters_;
  std::vector<kiln::layout> layouts_;
  std::vector<host_output> outs_;
  std::vector<const storage*> out_stores_;
  std::vector<flat_leaf> leaves_;
  // The resolved form: per leaf, then per output, its storage (null: not in this run) and
  // the byte offset of its first element; empty where the pass is not resolved.
  struct direct_operand {
    const storage* st;
    std::int64_t bytes;
  };
  std::vector<direct_operand> direct_;
  std::int64_t n_ = 0;
  kernel_args args_{};
  std::vector<const void*> in_;
  std::vector<void*> out_;
};

KILN_CORE_INLINE void
record_host_pass(plan_recording& r, const host_kernel_ref& k, std::span<const host_output> outs,
                 std::span<const storage* const> stores, std::span<const flat_leaf> leaves,
                 std::span<const flat_scalar> scalars, const kiln::shape& shape) {
  std::vector<const storage*> used(stores.begin(), stores.end());
  std::vector<flat_leaf> reads(leaves.begin(), leaves.end());
  for (std::size_t o = 0; o < outs.size(); ++o)
    used[o] = r.use(stores[o], *outs[o].layout, outs[o].type, "assign");
  for (flat_leaf& l : reads)
    l.storage = r.use(l.storage, *l.layout, l.type, "assign");
  r.add(std::make_unique<host_pass_step>(k, outs, used, reads, scalars, shape));
}

// A device pass, replayed: its operands' layouts are the plan's copies, their storages the
// plan's (slots or its own), its scalars patched from their cells.
class device_pass_step final : public plan_step {
public:
  device_pass_step(lowering_table& table, std::span<const flat_leaf> targets,
                   const kiln::shape& shape, std::span<const ir::expr_description> exprs,
                   std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                   std::span<const bool> active)
      : table_(table), shape_(shape), exprs_(exprs), targets_(targets.begin(), targets.end()),
        leaves_(leaves.begin(), leaves.end()), scalars_(scalars.begin(), scalars.end()),
        active_(new bool[active.size() + 1]), n_active_(active.size()) {
    std::copy(active.begin(), active.end(), active_.get());
    for (flat_leaf& t : targets_)
      t.layout = &layouts_.emplace_back(*t.layout);
    for (flat_leaf& l : leaves_)
      l.layout = &layouts_.emplace_back(*l.layout);
    for (std::size_t s = 0; s < scalars_.size(); ++s)
      if (scalars_[s].source) parameters_.push_back(s);
  }
  void run() override {
    for (const std::size_t s : parameters_)
      std::memcpy(&scalars_[s].bits, scalars_[s].source, sizeof scalars_[s].bits);
    run_device_pass(table_, targets_, shape_, exprs_, leaves_, scalars_,
                    {active_.get(), n_active_});
  }

private:
  lowering_table& table_;
  kiln::shape shape_;
  std::span<const ir::expr_description> exprs_; // (the pass type's, static)
  std::vector<flat_leaf> targets_, leaves_;
  std::vector<flat_scalar> scalars_;
  std::vector<std::size_t> parameters_;
  std::unique_ptr<bool[]> active_; // (empty span: every output)
  std::size_t n_active_;
  std::deque<kiln::layout> layouts_; // (stable addresses)
};

KILN_CORE_INLINE void
record_device_pass(plan_recording& r, lowering_table& table, std::span<const flat_leaf> targets,
                   const kiln::shape& shape, std::span<const ir::expr_description> exprs,
                   std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                   std::span<const bool> active) {
  std::vector<flat_leaf> outs(targets.begin(), targets.end()), reads(leaves.begin(), leaves.end());
  for (flat_leaf& t : outs)
    t.storage = r.use(t.storage, *t.layout, t.type, "assign");
  for (flat_leaf& l : reads)
    l.storage = r.use(l.storage, *l.layout, l.type, "assign");
  r.add(std::make_unique<device_pass_step>(table, outs, shape, exprs, reads, scalars, active));
}

} // namespace kiln::detail
