#pragma once
// Recording the kernels a program launches (KILN_TUNE_RECORD=PATH), so that `kiln-tune run
// --from PATH` tunes exactly those, in its own process (Kernel Launcher's capture): each
// distinct (device, kernel, size bucket) is appended once per process as one checksummed
// line holding the kernel's IR — ops by their definitions' text: spellings, tunable values,
// raw bodies — and one launch's shapes, strides, offsets and scalars. Replayed, the IR is
// rebuilt with ops that own that text, inputs are filled with values in [1, 2) (no zero
// divisors, no logarithms of negatives) and the launch goes through the same executor as
// the program's. Reductions replay where they are kiln's own (looked up by name: a user's
// reduction's device code is a function, not text); host passes are recorded, not replayed
// (their code is the program's: tune them there with kiln::tune).
#include "kiln/eval/host_launch.hpp"
#include "kiln/executor.hpp"
#include "kiln/jit/tune/database.hpp"
#include "kiln/jit/tune/space.hpp"
#include "kiln/settings.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <set>

namespace kiln::jit::tune {

// --- a line of space-separated tokens; strings hex-encoded ("~" null, "-" empty)
class token_writer {
public:
  token_writer& num(std::int64_t v) {
    out_ += std::to_string(v) + ' ';
    return *this;
  }
  token_writer& text(const char* s) {
    if (!s) {
      out_ += "~ ";
      return *this;
    }
    if (!*s) {
      out_ += "- ";
      return *this;
    }
    static constexpr char hex[] = "0123456789abcdef";
    for (const char* p = s; *p; ++p) {
      const auto c = static_cast<unsigned char>(*p);
      out_ += hex[c >> 4];
      out_ += hex[c & 15];
    }
    out_ += ' ';
    return *this;
  }
  const std::string& str() const { return out_; }

private:
  std::string out_;
};

class token_reader {
public:
  explicit token_reader(std::string_view s) : s_(s) {}
  std::int64_t num() {
    const std::string_view t = next();
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail();
    return v;
  }
  // nullopt for a null string.
  std::optional<std::string> text() {
    const std::string_view t = next();
    if (t == "~") return std::nullopt;
    if (t == "-") return std::string();
    if (t.size() % 2) fail();
    std::string out;
    for (std::size_t i = 0; i < t.size(); i += 2)
      out += static_cast<char>(digit(t[i]) * 16 + digit(t[i + 1]));
    return out;
  }
  bool done() const { return s_.find_first_not_of(' ') == std::string_view::npos; }

private:
  [[noreturn]] static void fail() {
    throw error("kiln-tune", "a damaged record of launches", "a token is not what it should be");
  }
  static int digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail();
  }
  std::string_view next() {
    const auto b = s_.find_first_not_of(' ');
    if (b == std::string_view::npos) fail();
    const auto e = s_.find(' ', b);
    const std::string_view t = s_.substr(b, e - b);
    s_ = e == std::string_view::npos ? std::string_view() : s_.substr(e);
    return t;
  }
  std::string_view s_;
};

// --- the IR, written and read back
inline void write_spelling(token_writer& w, const spelling* s) {
  if (!s) {
    w.num(0);
    return;
  }
  w.num(1).text(s->boolean).text(s->integer).text(s->f32).text(s->f64).text(s->any);
}

inline void write_ir(token_writer& w, const ir::kernel_ir& ir) {
  auto dtypes = [&](const std::vector<dtype>& v) {
    w.num(std::int64_t(v.size()));
    for (dtype d : v)
      w.num(static_cast<int>(d));
  };
  dtypes(ir.inputs);
  dtypes(ir.outputs);
  dtypes(ir.scalars);
  std::vector<const ir::ir_op*> ops;
  for (const auto& in : ir.code)
    if (in.op && std::find(ops.begin(), ops.end(), in.op) == ops.end()) ops.push_back(in.op);
  w.num(std::int64_t(ops.size()));
  for (const ir::ir_op* op : ops) {
    w.text(op->name);
    write_spelling(w, op->glsl);
    write_spelling(w, op->cuda);
    write_spelling(w, op->msl);
    write_spelling(w, op->device);
    w.num(std::int64_t(op->tunable_count));
    for (std::size_t t = 0; t < op->tunable_count; ++t) {
      const tunable& tu = op->tunables[t];
      w.text(tu.name).num(tu.value).num(std::int64_t(tu.values.size()));
      for (long long v : tu.values) // the values a tuner may try (op_tunables.hpp)
        w.num(v);
    }
    w.num(op->raw ? 1 : 0);
    if (op->raw) w.text(op->raw->inputs).text(op->raw->output).text(op->raw->body);
  }
  w.num(std::int64_t(ir.code.size()));
  for (const auto& in : ir.code) {
    w.num(int(in.code)).num(int(in.type)).num(int(in.compute)).num(in.nargs);
    for (auto a : in.args)
      w.num(a);
    w.num(in.slot);
    w.num(in.op ? std::find(ops.begin(), ops.end(), in.op) - ops.begin() : -1);
  }
  w.num(std::int64_t(ir.results.size()));
  for (auto r : ir.results)
    w.num(r);
  w.num(ir.strided).num(ir.rank).num(ir.wide_index);
}

// Ops read back own their text; the IR points into this, which outlives it.
struct op_arena {
  std::deque<std::string> strings;
  std::deque<spelling> spellings;
  std::deque<std::vector<tunable>> tunables; // one array per op: ir_op reads them in a row
  std::deque<std::vector<long long>> values; // each tunable's values to tune over
  std::deque<raw_source> raws;
  std::deque<ir::ir_op> ops;
  const char* keep(const std::optional<std::string>& s) {
    if (!s) return nullptr;
    strings.push_back(*s);
    return strings.back().c_str();
  }
};

inline const spelling* read_spelling(token_reader& r, op_arena& a) {
  if (r.num() == 0) return nullptr;
  spelling s;
  s.boolean = a.keep(r.text());
  s.integer = a.keep(r.text());
  s.f32 = a.keep(r.text());
  s.f64 = a.keep(r.text());
  s.any = a.keep(r.text());
  a.spellings.push_back(s);
  return &a.spellings.back();
}

inline ir::kernel_ir read_ir(token_reader& r, op_arena& a) {
  auto dtypes = [&] {
    std::vector<dtype> v(static_cast<std::size_t>(r.num()));
    for (auto& d : v) {
      const auto x = r.num();
      if (x < 0 || x > 8) throw error("kiln-tune", "a damaged record of launches", "a dtype");
      d = static_cast<dtype>(x);
    }
    return v;
  };
  ir::kernel_ir ir;
  ir.inputs = dtypes();
  ir.outputs = dtypes();
  ir.scalars = dtypes();
  std::vector<const ir::ir_op*> ops(static_cast<std::size_t>(r.num()));
  for (auto& op : ops) {
    ir::ir_op o{};
    o.name = a.keep(r.text());
    o.glsl = read_spelling(r, a);
    o.cuda = read_spelling(r, a);
    o.msl = read_spelling(r, a);
    o.device = read_spelling(r, a);
    o.tunable_count = static_cast<std::size_t>(r.num());
    auto& ts = a.tunables.emplace_back();
    for (std::size_t t = 0; t < o.tunable_count; ++t) {
      const char* name = a.keep(r.text());
      const long long value = r.num();
      const auto count = r.num();
      if (count < 0 || count > 4096)
        throw error("kiln-tune", "a damaged record of launches", "a tunable's values");
      auto& vs = a.values.emplace_back(static_cast<std::size_t>(count));
      for (auto& v : vs)
        v = r.num();
      ts.push_back({name, value, {vs.data(), vs.size()}});
    }
    o.tunables = ts.empty() ? nullptr : ts.data();
    if (r.num()) {
      raw_source raw{};
      raw.inputs = a.keep(r.text());
      raw.output = a.keep(r.text());
      raw.body = a.keep(r.text());
      a.raws.push_back(raw);
      o.raw = &a.raws.back();
    }
    a.ops.push_back(o);
    op = &a.ops.back();
  }
  ir.code.resize(static_cast<std::size_t>(r.num()));
  for (auto& in : ir.code) {
    in.code = static_cast<ir::ir_code>(r.num());
    in.type = static_cast<dtype>(r.num());
    in.compute = static_cast<dtype>(r.num());
    in.nargs = static_cast<std::uint8_t>(r.num());
    for (auto& x : in.args)
      x = static_cast<std::int32_t>(r.num());
    in.slot = static_cast<std::int32_t>(r.num());
    const auto k = r.num();
    in.op = k < 0 ? nullptr : ops.at(static_cast<std::size_t>(k));
  }
  ir.results.resize(static_cast<std::size_t>(r.num()));
  for (auto& x : ir.results)
    x = static_cast<std::int32_t>(r.num());
  ir.strided = r.num() != 0;
  ir.rank = static_cast<int>(r.num());
  ir.wide_index = r.num() != 0;
  return ir;
}

// --- the recorder
// KILN_TUNE_RECORD, read once; record_to changes it (a program recording one phase) while
// other threads launch: the path is published as an immutable string under a mutex, and
// launches test only `on` (one relaxed load), never the string.
struct record_state {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::shared_ptr<const std::string> path; // under mutex; never null
  record_state() {
    std::string v = settings::text("KILN_TUNE_RECORD").value_or("");
    if (!v.empty()) kiln::detail::host_chooser_wanted().store(true, std::memory_order_relaxed);
    on.store(!v.empty(), std::memory_order_relaxed);
    path = std::make_shared<const std::string>(std::move(v));
  }
};
inline record_state& record_slot() {
  static record_state s;
  return s;
}
// Whether launches are being recorded: what every launch asks.
inline bool recording() { return record_slot().on.load(std::memory_order_relaxed); }
// The file launches are recorded to ("" when none); a copy, as record_to may change it.
inline std::string record_path() {
  auto& s = record_slot();
  std::lock_guard lock(s.mutex);
  return *s.path;
}
inline void record_to(const std::string& path) {
  if (!path.empty()) kiln::detail::host_chooser_wanted().store(true, std::memory_order_relaxed);
  auto next = std::make_shared<const std::string>(path);
  auto& s = record_slot();
  std::lock_guard lock(s.mutex);
  s.path = std::move(next);
  s.on.store(!path.empty(), std::memory_order_relaxed);
}

// Appends a line (a checksum, a tab, the tokens body() writes) once per distinct key in this
// process: a launch already recorded costs a set lookup, not its line.
template <class Body>
void record_line(const std::string& key, Body&& body) {
  static std::mutex m;
  static std::set<std::string> seen;
  const std::string path = record_path(); // one path for the write and its error
  if (path.empty()) return;               // record_to("") since the launch asked
  {
    std::lock_guard lock(m);
    if (!seen.insert(key).second) return;
  }
  detail::append_line(path, {}, detail::checked_line(body()) + "\n",
                      [&path](const std::string& reason, const std::string& details) {
                        throw error("KILN_TUNE_RECORD",
                                    "the record of launches " + path + " " + reason, details);
                      });
}

inline void write_operand(token_writer& w, const storage& s, std::int64_t offset,
                          const operand_strides& st, int rank) {
  w.num(s.count()).num(offset);
  for (int d = 0; d < rank; ++d)
    w.num(st[std::size_t(d)]);
}

// What begins every device launch's record: kind, device identity, kernel, bucket, the
// device's name and the kernel's IR.
inline void write_head(token_writer& w, const char* kind, const std::string& identity,
                       const std::string& kernel, const size_bucket& bucket,
                       const kiln::device& device, const ir::kernel_ir& ir) {
  w.text(kind).text(identity.c_str()).text(kernel.c_str()).text(format_bucket(bucket).c_str());
  w.text(device.str().c_str());
  write_ir(w, ir);
}

// A launch's extents (their count first); the rank.
inline int write_extents(token_writer& w, const kiln::shape& extents) {
  const int rank = extents.size();
  w.num(rank);
  for (int d = 0; d < rank; ++d)
    w.num(extents[d]);
  return rank;
}

// A launch's inputs (their count first), input i at strides[i], and its scalars' bits.
inline void write_inputs(token_writer& w, std::span<const device_leaf> inputs,
                         std::span<const operand_strides> strides, int rank) {
  w.num(std::int64_t(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i)
    write_operand(w, *inputs[i].storage, inputs[i].layout->offset, strides[i], rank);
}
inline void write_scalars(token_writer& w, std::span<const std::uint64_t> scalars) {
  w.num(std::int64_t(scalars.size()));
  for (auto b : scalars)
    w.num(static_cast<std::int64_t>(b));
}

// kind device identity kernel bucket | device name | IR | launch
inline void record_pass(const std::string& identity, const std::string& kernel,
                        const size_bucket& bucket, const device_pass& p) {
  const std::string key = "pass " + identity + " " + kernel + " " + format_bucket(bucket);
  record_line(key, [&] {
    token_writer w;
    write_head(w, "pass", identity, kernel, bucket, p.targets.front()->device(), p.lowered.ir);
    const int rank = write_extents(w, p.extents);
    w.num(p.n);
    w.num(std::int64_t(p.targets.size()));
    for (std::size_t o = 0; o < p.targets.size(); ++o)
      write_operand(w, *p.targets[o], p.target_layouts[o]->offset, p.strides[o], rank);
    write_inputs(w, p.inputs, p.strides.subspan(p.targets.size()), rank);
    write_scalars(w, p.scalars);
    return w.str();
  });
}

inline void record_reduction(const std::string& identity, const std::string& kernel,
                             const size_bucket& bucket, const device_reduction& r) {
  const std::string key = "reduction " + identity + " " + kernel + " " + format_bucket(bucket);
  record_line(key, [&] {
    token_writer w;
    write_head(w, "reduction", identity, kernel, bucket, r.out.device(), r.lowered.ir);
    w.text(r.info.name).num(r.info.builtin ? 1 : 0);
    const int rank = write_extents(w, r.extents);
    w.num(r.count).num(r.nout).num(int(r.value)).num(int(r.result));
    write_inputs(w, r.inputs, r.strides, rank);
    write_scalars(w, r.scalars);
    w.num(std::int64_t(r.params.size()));
    for (double q : r.params) {
      std::int64_t bits;
      std::memcpy(&bits, &q, 8);
      w.num(bits);
    }
    return w.str();
  });
}

// kind device identity kernel bucket | device name | IR | acc result batch_rank product |
// extents | targets | inputs | scalars
inline void record_contraction(const std::string& identity, const std::string& kernel,
                               const size_bucket& bucket, const device_contraction& c) {
  const std::string key = "contraction " + identity + " " + kernel + " " + format_bucket(bucket);
  record_line(key, [&] {
    token_writer w;
    write_head(w, "contraction", identity, kernel, bucket, c.targets.front()->device(),
               c.lowered.ir);
    w.num(int(c.acc)).num(int(c.result)).num(c.batch_rank).num(c.product);
    const int rank = write_extents(w, c.extents);
    w.num(std::int64_t(c.targets.size()));
    for (std::size_t o = 0; o < c.targets.size(); ++o)
      write_operand(w, *c.targets[o], c.target_offsets[o], c.target_strides[o], rank);
    write_inputs(w, c.inputs, c.strides, rank);
    write_scalars(w, c.scalars);
    return w.str();
  });
}

inline void record_host(const std::string& identity, const std::string& kernel,
                        const size_bucket& bucket) {
  const std::string key = "host " + identity + " " + kernel + " " + format_bucket(bucket);
  record_line(key, [&] {
    token_writer w;
    w.text("host").text(identity.c_str()).text(kernel.c_str()).text(format_bucket(bucket).c_str());
    return w.str();
  });
}

} // namespace kiln::jit::tune
