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
#include <string>
#include <unordered_map>

namespace kiln::detail {

// A tensor argument as a capture saw it: what a replay compares (the layout, the device,
// which earlier argument shares its storage) and where its slot is.
struct plan_argument {
  kiln::layout layout;
  kiln::device device;
  int same_as; // the first argument over the same storage (itself if none)
  int slot;
};

class plan_recording {
public:
  plan_recording(std::string name, const void* signature);
  plan_recording(const plan_recording&) = delete;
  plan_recording& operator=(const plan_recording&) = delete;
  ~plan_recording();

  const std::string& name() const noexcept { return name_; }
  const void* signature() const noexcept { return signature_; }

  // --- capturing
  // The arguments: a slot each (shared where they share storage); returns the slot storage
  // of each, through which the captured function reads and writes them.
  std::vector<std::shared_ptr<storage>> bind_for_capture(std::span<const bound_argument> args);
  // A cell for each parameter (its bits, as a flat_scalar holds them).
  std::uint64_t* add_parameter() { return cells_.emplace_back(new std::uint64_t(0)).get(); }
  void made(const std::shared_ptr<storage>& s);
  // Memory a component of kiln owns and updates itself (an optimizer's moments and the
  // parameters it holds): steps may use it, and the plan keeps it alive.
  void adopt(const std::shared_ptr<storage>& s);
  // Memory a step uses: an argument's slot or the function's own (kept); anything else
  // is a kiln::error naming `op` and the tensor. Returns what the step is to use: the slot
  // where s is an argument's own storage, else s. `held`: the step keeps a handle to it.
  const storage* use(const storage* s, const kiln::layout& l, dtype t, const char* op,
                     bool held = false);
  // The handle of a slot use() returned.
  const std::shared_ptr<storage>& slot_handle(const storage* slot) const;
  // Adds a step, unless a step that records itself whole is being recorded (nested).
  void add(std::unique_ptr<plan_step> step);
  // After the function returned: the handles it was given (`proxies`) must still be its
  // arguments' slots, as they were laid out (it assigned values, not other tensors).
  void check_arguments(std::span<const bound_argument> proxies) const;
  // Then, the handles let go: the function's own memory in use moves to the arena, and an
  // argument handle or a tensor the function made that is still held elsewhere (kept in a
  // handle outside the function) is an error.
  void finish();

  // --- replaying
  // Whether args are what the capture saw (matches() == 0, without saying why not).
  bool replays(std::span<const bound_argument> args) const noexcept;
  // 0 where args are what the capture saw; else (with *why set, where given, to what
  // changed) 1 where only layouts differ, ranks kept, and 2 for anything else.
  int matches(std::span<const bound_argument> args, std::string* why) const;
  void bind(std::span<const bound_argument> args);
  void unbind() noexcept;
  void replay();
  // The batch device steps of executor ex append their launches to (null: it has none).
  launch_batch* batch_for(device_executor& ex);
  std::size_t steps() const noexcept { return steps_.size(); }
  std::uint64_t* parameter(std::size_t i) noexcept { return cells_[i].get(); }

private:
  std::string name_;
  const void* signature_;
  std::vector<plan_argument> args_;
  std::vector<std::shared_ptr<storage>> slots_;
  std::vector<const storage*> real_; // per slot: the argument's own storage at capture
  std::vector<std::unique_ptr<std::uint64_t>> cells_;
  std::vector<std::unique_ptr<plan_step>> steps_;
  // One per device executor whose launches the steps replay.
  std::vector<std::pair<device_executor*, std::unique_ptr<launch_batch>>> batches_;
  std::vector<std::shared_ptr<storage>> arena_;
  // The memory the function's own host temporaries share (those whose steps never meet).
  struct free_block {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  std::vector<std::unique_ptr<void, free_block>> blocks_;
  void share_arena();

  // While capturing: what the function made, what steps use (and how many handles to it they
  // hold, and the first and last step), what components adopted; let go when it ends.
  struct capturing;
  std::unique_ptr<capturing> capturing_;
  std::uint64_t overlaps_ = 0; // pairs of borrowed arguments whose memory meets
  // The argument storages of the last call replays() accepted (one call at a time: a plan
  // runs one, plan_core::running).
  mutable std::vector<const storage*> last_;
  bool borrowed_ = false;

public:
  int nested = 0;
};

inline std::string plan_tensor_words(const kiln::layout& l, dtype t) {
  return "a tensor<" + std::string(name(t)) + "> of shape " + l.shape.str();
}

KILN_CORE_INLINE void recording_deleter::operator()(plan_recording* r) const noexcept { delete r; }
KILN_CORE_INLINE recording_ptr make_recording(std::string name, const void* signature) {
  return recording_ptr(new plan_recording(std::move(name), signature));
}
KILN_CORE_INLINE std::size_t recording_steps(const plan_recording& r) { return r.steps(); }
KILN_CORE_INLINE const storage* plan_use(plan_recording& r, const storage* s, const kiln::layout& l,
                                         dtype t, const char* op, bool held) {
  return r.use(s, l, t, op, held);
}
KILN_CORE_INLINE const std::shared_ptr<storage>& plan_slot_handle(const plan_recording& r,
                                                                  const storage* slot) {
  return r.slot_handle(slot);
}
KILN_CORE_INLINE void plan_add(plan_recording& r, std::unique_ptr<plan_step> step) {
  r.add(std::move(step));
}
// The step plan_add's second form makes.
class thunk_step final : public plan_step {
public:
  thunk_step(void* data, void (*run)(void*), void (*drop)(void*)) noexcept
      : data_(data), run_(run), drop_(drop) {}
  thunk_step(const thunk_step&) = delete;
  thunk_step& operator=(const thunk_step&) = delete;
  ~thunk_step() override { drop_(data_); }
  void run() override { run_(data_); }

private:
  void* data_;
  void (*run_)(void*);
  void (*drop_)(void*);
};
KILN_CORE_INLINE void plan_add(plan_recording& r, void* data, void (*run)(void*),
                               void (*drop)(void*)) {
  std::unique_ptr<thunk_step> s;
  try {
    s = std::make_unique<thunk_step>(data, run, drop);
  } catch (...) {
    drop(data);
    throw;
  }
  r.add(std::move(s));
}
KILN_CORE_INLINE void plan_adopt(plan_recording& r, const std::shared_ptr<storage>& s) {
  r.adopt(s);
}
KILN_CORE_INLINE void plan_nest(plan_recording& r, int by) { r.nested += by; }
KILN_CORE_INLINE std::vector<std::shared_ptr<storage>>
plan_bind_for_capture(plan_recording& r, std::span<const bound_argument> args) {
  return r.bind_for_capture(args);
}
KILN_CORE_INLINE std::uint64_t* plan_add_parameter(plan_recording& r) { return r.add_parameter(); }
KILN_CORE_INLINE std::uint64_t* plan_parameter(plan_recording& r, std::size_t i) {
  return r.parameter(i);
}
KILN_CORE_INLINE void plan_check_arguments(const plan_recording& r,
                                           std::span<const bound_argument> proxies) {
  r.check_arguments(proxies);
}
KILN_CORE_INLINE void plan_finish(plan_recording& r) {
  r.finish();
  r.unbind();
}
KILN_CORE_INLINE void plan_replay(plan_recording& r, std::span<const bound_argument> args) {
  r.bind(args);
  struct unbind {
    plan_recording& r;
    ~unbind() { r.unbind(); }
  } const u{r};
  r.replay();
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

struct plan_recording::capturing {
  std::unordered_map<const storage*, std::shared_ptr<storage>> made, adopted;
  std::unordered_map<const storage*, long> used;
  std::unordered_map<const storage*, std::pair<std::size_t, std::size_t>> span;
};

KILN_CORE_INLINE plan_recording::plan_recording(std::string name, const void* signature)
    : name_(std::move(name)), signature_(signature), capturing_(std::make_unique<capturing>()) {}
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

// The first argument over the same storage as argument i (i itself if none).
inline int first_sharing(std::span<const bound_argument> args, std::size_t i) {
  for (std::size_t j = 0; j < i; ++j)
    if (args[j].st == args[i].st) return int(j);
  return int(i);
}

KILN_CORE_INLINE std::vector<std::shared_ptr<storage>>
plan_recording::bind_for_capture(std::span<const bound_argument> args) {
  std::vector<std::shared_ptr<storage>> per_arg;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bound_argument& a = args[i];
    const int same = first_sharing(args, i);
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
  capturing_->made.emplace(s.get(), s);
}

KILN_CORE_INLINE void plan_recording::adopt(const std::shared_ptr<storage>& s) {
  capturing_->adopted.emplace(s.get(), s);
}

KILN_CORE_INLINE const storage* plan_recording::use(const storage* s, const kiln::layout& l,
                                                    dtype t, const char* op, bool held) {
  bool slot = false;
  for (std::size_t i = 0; i < slots_.size() && !slot; ++i)
    if (slots_[i].get() == s || real_[i] == s) s = slots_[i].get(), slot = true;
  if (!slot && !capturing_->made.count(s) && !capturing_->adopted.count(s) && !is_plan_constant(s))
    throw error("plan " + name_, std::string(op) + " uses a tensor that is not an argument",
                plan_tensor_words(l, t) +
                    " reached from inside the captured function (a reference it holds) and "
                    "neither passed as an argument nor made inside it; pass it as an argument");
  capturing_->used[s] += held ? 1 : 0;
  const std::size_t at = steps_.size(); // (the step being recorded)
  if (auto [it, fresh] = capturing_->span.try_emplace(s, at, at); !fresh) it->second.second = at;
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
    const auto u = capturing_->used.find(s);
    return u == capturing_->used.end() ? 0L : u->second;
  };
  for (const std::shared_ptr<storage>& s : slots_)
    if (s.use_count() > 1 + held(s.get()))
      throw error("plan " + name_, "the captured function keeps an argument's handle",
                  "a handle to an argument outlives the call (stored outside the function); a "
                  "replay would change what it reads");
  for (auto& [raw, s] : capturing_->made) {
    const auto u = capturing_->used.find(raw);
    if (u == capturing_->used.end()) continue;
    if (!capturing_->adopted.count(raw) && s.use_count() > 1 + u->second)
      throw error("plan " + name_, "the captured function keeps a tensor it made",
                  "a tensor of " + std::to_string(s->count()) +
                      " elements made inside the function outlives the call (kept in a handle "
                      "outside it); every replay would write it again: make it outside and pass "
                      "it as an argument");
    arena_.push_back(s);
  }
  for (auto& [raw, s] : capturing_->adopted)
    if (capturing_->used.count(raw) && !capturing_->made.count(raw)) arena_.push_back(s);
  share_arena();
  capturing_.reset(); // (a recording made is never captured into again)
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
    if (!s->on_host() || !s->owned() || capturing_->adopted.count(s.get()) ||
        !capturing_->made.count(s.get()))
      continue;
    const auto sp = capturing_->span.find(s.get());
    if (sp == capturing_->span.end()) continue;
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
    const int same = first_sharing(args, i);
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
  if (batches_.empty()) {
    for (const std::unique_ptr<plan_step>& s : steps_)
      s->run();
    return;
  }
  launch_batch* open = nullptr;
  try {
    for (const std::unique_ptr<plan_step>& s : steps_) {
      if (open && s->batch != open) open->finish();
      open = s->batch;
      s->run();
    }
    if (open) open->finish();
  } catch (...) {
    for (const auto& b : batches_)
      b.second->clear();
    throw;
  }
}

KILN_CORE_INLINE launch_batch* plan_recording::batch_for(device_executor& ex) {
  for (const auto& b : batches_)
    if (b.first == &ex) return b.second.get();
  std::unique_ptr<launch_batch> b = ex.make_batch();
  if (!b) return nullptr;
  return batches_.emplace_back(&ex, std::move(b)).second.get();
}

// A host pass, replayed: its operands' layouts are the plan's copies and their storages
// the plan's (slots or its own), so a replay only reads each storage's current address.
// A pass that runs as one task with no memo sites and no streaming stores (most small
// passes) is resolved once: the kernel's arguments are laid out, and a replay calls the
// kernel itself, once over contiguous operands or once per row of their merged space
// (views: a stencil's interior), as run_host_pass would.
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
      if (rows_ == 1) return k_.run(args_);
      return run_rows();
    }
    for (std::size_t o = 0; o < outs_.size(); ++o)
      outs_[o].data = static_cast<unsigned char*>(out_stores_[o]->data()) +
                      outs_[o].layout->offset * std::int64_t(size_of(outs_[o].type));
    run_host_pass(k_, outs_, leaves_, scalars_, shape_);
  }

private:
  // Whether the pass runs as one task of run_host_pass (host_pass_impl.hpp) with no memo
  // sites and no streaming stores: then its kernel's arguments, once, and its rows.
  void resolve(std::span<const host_output> outs, std::span<const flat_leaf> leaves) {
    const std::int64_t total = numel(shape_);
    const host_launch launch = host_launch_for(k_, total);
    if (!k_.memos.empty() || total > pass_grain(k_, launch)) return;
    if (total == 0) return; // (run_host_pass does nothing)
    const std::size_t no = outs.size(), nl = leaves.size();
    // The leaves and outputs run_host_pass reads and writes (those of active outputs).
    scratch<bool, 32> used(nl + no);
    for (std::size_t p = 0; p < no; ++p) {
      used[nl + p] = outs[p].active;
      for (int l = k_.leaf_start[p]; l < k_.leaf_start[p + 1]; ++l)
        used[std::size_t(l)] = outs[p].active;
    }
    const auto layout_of = [&](std::size_t i) -> const kiln::layout& {
      return i < nl ? *leaves[i].layout : *outs[i - nl].layout;
    };
    const auto bytes_of = [&](std::size_t i) {
      return std::int64_t(size_of(i < nl ? leaves[i].type : outs[i - nl].type));
    };
    std::vector<direct_operand> d(nl + no, direct_operand{nullptr, 0});
    std::int64_t footprint = 0;
    bool plain = true, whole = true;
    for (std::size_t i = 0; i < nl + no; ++i)
      if (used[i]) {
        const kiln::layout& l = layout_of(i);
        d[i] = {i < nl ? leaves[i].storage : out_stores_[i - nl], l.offset * bytes_of(i)};
        footprint += l.size() * bytes_of(i);
        plain = plain && l.shape == shape_ && l.is_contiguous();
        if (i >= nl) whole = whole && l.is_contiguous();
      }
    std::int64_t inner = total;
    bool apart;
    if (!plain) { // run_host_pass's merged space: every operand contiguous along its rows
      // Operand k of the space (outputs first, as run_host_pass adds them) in d's order.
      const auto op = [&](std::size_t k) { return k < no ? nl + k : k - no; };
      iteration_space space;
      for (std::size_t k = 0; k < nl + no; ++k)
        used[op(k)] ? space.add(layout_of(op(k)), shape_) : space.add_idle();
      space.merge(shape_);
      const int outer = space.extents.size() - 1;
      inner = space.extents[outer];
      for (std::size_t k = 0; k < nl + no; ++k)
        if (used[op(k)] && space.strides[k][outer] != 1) return; // packed rows: the general pass
      if (k_.may_stream && whole && streams(launch, footprint)) return;
      rows_ = total / inner;
      for (int dim = 0; dim < outer; ++dim)
        extents_.push_back(space.extents[dim]);
      // Per dim of the rows, per operand: the bytes to the next row, and back to the first.
      steps_.assign(std::size_t(outer) * (nl + no) * 2, 0);
      for (int dim = 0; dim < outer; ++dim)
        for (std::size_t k = 0; k < nl + no; ++k) {
          const std::int64_t st = space.strides[k][dim] * bytes_of(op(k));
          steps_[(std::size_t(dim) * (nl + no) + op(k)) * 2] = st;
          steps_[(std::size_t(dim) * (nl + no) + op(k)) * 2 + 1] = -st * (extents_[dim] - 1);
        }
      apart = inner >= k_.lanes && outputs_apart(outs, leaves, k_.leaf_start);
    } else if (k_.may_stream && streams(launch, footprint)) {
      return;
    } else {
      apart =
          total >= k_.lanes && total % k_.lanes != 0 && outputs_apart(outs, leaves, k_.leaf_start);
    }
    direct_ = std::move(d);
    in_.assign(nl, nullptr);
    out_.assign(no, nullptr);
    n_ = inner;
    // The kernel's arguments, laid out once (built at each call, their stores were still in
    // flight when the kernel read them back).
    args_ = {in_.data(), scalars_.data(),      nullptr, nullptr, 0, out_.data(), n_, false,
             apart,      pass_prefetch(launch)};
  }

  // One kernel call per row, every operand's address stepped to the next row between them.
  void run_rows() {
    const std::size_t nl = in_.size(), ops = direct_.size();
    std::int64_t idx[max_rank] = {};
    for (std::int64_t r = 0;;) {
      k_.run(args_);
      if (++r == rows_) return;
      for (int dim = int(extents_.size()) - 1; dim >= 0; --dim) {
        const bool wrap = ++idx[dim] == extents_[dim];
        const std::int64_t* step = steps_.data() + std::size_t(dim) * ops * 2 + (wrap ? 1 : 0);
        for (std::size_t i = 0; i < nl; ++i)
          if (in_[i]) in_[i] = static_cast<const unsigned char*>(in_[i]) + step[2 * i];
        for (std::size_t o = 0; o < out_.size(); ++o)
          if (out_[o]) out_[o] = static_cast<unsigned char*>(out_[o]) + step[2 * (nl + o)];
        if (!wrap) break;
        idx[dim] = 0;
      }
    }
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
  std::int64_t n_ = 0;    // elements per kernel call
  std::int64_t rows_ = 1; // kernel calls
  kiln::shape extents_;   // the extents of the rows' dims
  std::vector<std::int64_t> steps_;
  kernel_args args_{};
  std::vector<const void*> in_;
  std::vector<void*> out_;
};

KILN_CORE_INLINE void record_and_run_host_pass(const void* stores, const host_kernel_ref& k,
                                               std::span<const host_output> outs,
                                               std::span<const flat_leaf> leaves,
                                               std::span<const flat_scalar> scalars,
                                               const kiln::shape& shape) {
  plan_recording& r = *recording_now();
  const auto* st = static_cast<const storage* const*>(stores);
  std::vector<const storage*> used(st, st + outs.size());
  std::vector<flat_leaf> reads(leaves.begin(), leaves.end());
  for (std::size_t o = 0; o < outs.size(); ++o)
    used[o] = r.use(st[o], *outs[o].layout, outs[o].type, "assign");
  for (flat_leaf& l : reads)
    l.storage = r.use(l.storage, *l.layout, l.type, "assign");
  r.add(std::make_unique<host_pass_step>(k, outs, used, reads, scalars, shape));
  run_host_pass(k, outs, leaves, scalars, shape);
}

// A device step's recorded launches: the storages they name (a replay binds each one's
// memory of the moment), the kernel scalars' leaf table and its pattern at the capture.
struct recorded_launches {
  std::shared_ptr<kiln::backend> keep; // (outlives the record, which frees through it)
  std::unique_ptr<launch_record> record;
  std::vector<const storage*> bound;
  std::vector<std::int16_t> pattern;
  std::vector<std::uint64_t> bits;
  ir::leaf_table lt;

  // Runs fn(data), the step's first run, recording its launches where bound[0]'s executor
  // can (then `batch`, the step's, is the plan's batch for that executor); the pattern is
  // the leaf table's as it stands. `parameters`: its kernel scalars change between replays.
  void capture(plan_recording& r, launch_batch*& batch, void (*fn)(void*), void* data,
               const char* op, bool parameters) {
    pattern = lt.pattern;
    device_executor& ex = executor_of(*bound[0], op);
    keep = bound[0]->shared_backend();
    record = ex.record_launches(fn, data, bound, parameters);
    if (record) batch = r.batch_for(ex);
    if (!batch) record.reset();
  }
  // Appends the launches to `batch`, their kernel scalars taken from the leaf table where
  // `scalars`; false where the step must run again (the table's pattern changed: equal
  // parameters now merge, or no longer do): the batch is finished then.
  bool replay(launch_batch& batch, bool scalars) {
    if (!scalars) {
      record->replay(batch, bound, {});
      return true;
    }
    if (lt.pattern != pattern) {
      batch.finish();
      return false;
    }
    record->replay(batch, bound, scalar_bits(lt, bits));
    return true;
  }
};

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
  // The capture's run: its launches recorded where the executor can.
  void capture(plan_recording& r, bool kept) {
    if (!kept) return run_pass();
    for (const flat_leaf& t : targets_)
      rec_.bound.push_back(t.storage);
    for (const flat_leaf& l : leaves_)
      rec_.bound.push_back(l.storage);
    if (!parameters_.empty()) scalar_table();
    rec_.capture(
        r, batch, [](void* p) { static_cast<device_pass_step*>(p)->run_pass(); }, this, "eval",
        !parameters_.empty());
  }
  void run() override {
    for (const std::size_t s : parameters_)
      std::memcpy(&scalars_[s].bits, scalars_[s].source, sizeof scalars_[s].bits);
    if (!rec_.record) return run_pass();
    if (!parameters_.empty()) scalar_table();
    if (!rec_.replay(*batch, !parameters_.empty())) run_pass();
  }

private:
  void run_pass() {
    run_device_pass(table_, targets_, shape_, exprs_, leaves_, scalars_,
                    {active_.get(), n_active_});
  }
  // The pass's kernel scalars as run_device_pass's leaf table has them (equal ones merged).
  void scalar_table() {
    ir::leaf_table& lt = rec_.lt;
    lt.clear();
    std::span<const flat_leaf> l = leaves_;
    std::span<const flat_scalar> s = scalars_;
    for (std::size_t k = 0; k < exprs_.size(); ++k)
      if (n_active_ == 0 || active_[k])
        lt.add(exprs_[k], l, s);
      else
        ir::leaf_table::skip(exprs_[k], l, s);
  }

  lowering_table& table_;
  kiln::shape shape_;
  std::span<const ir::expr_description> exprs_; // (the pass type's, static)
  std::vector<flat_leaf> targets_, leaves_;
  std::vector<flat_scalar> scalars_;
  std::vector<std::size_t> parameters_;
  std::unique_ptr<bool[]> active_; // (empty span: every output)
  std::size_t n_active_;
  std::deque<kiln::layout> layouts_; // (stable addresses)
  recorded_launches rec_;
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
  auto step = std::make_unique<device_pass_step>(table, outs, shape, exprs, reads, scalars, active);
  step->capture(r, r.nested == 0);
  r.add(std::move(step));
}

// A typed device step (a reduction, a product), its launches recorded at the capture where
// the executor can: a replay appends them, the operand's kernel scalars renewed.
class device_step final : public plan_step {
public:
  device_step(void* data, device_step_hooks hooks) noexcept : data_(data), hooks_(hooks) {}
  device_step(const device_step&) = delete;
  device_step& operator=(const device_step&) = delete;
  ~device_step() override {
    rec_.record.reset(); // (before the memory and the backend it frees through)
    hooks_.drop(data_);
  }
  void capture(plan_recording& r, bool kept) {
    parameters_ = hooks_.leaves(data_, rec_.bound, rec_.lt);
    if (!kept) return hooks_.run(data_);
    // What it runs on the way (a hand-written kernel's operand) is part of this step.
    const nested_recording nested(r);
    rec_.capture(r, batch, hooks_.run, data_, "reduce", parameters_);
  }
  void run() override {
    if (!rec_.record) return hooks_.run(data_);
    if (parameters_) {
      hooks_.leaves(data_, rec_.bound, rec_.lt);
      if (!hooks_.scalars) {
        batch->finish();
        return hooks_.run(data_);
      }
    }
    if (!rec_.replay(*batch, parameters_)) hooks_.run(data_);
  }

private:
  void* data_;
  device_step_hooks hooks_;
  bool parameters_ = false;
  recorded_launches rec_;
};

KILN_CORE_INLINE void record_device_step(plan_recording& r, void* data, device_step_hooks hooks) {
  auto step = std::make_unique<device_step>(data, hooks);
  step->capture(r, r.nested == 0);
  r.add(std::move(step));
}

} // namespace kiln::detail
