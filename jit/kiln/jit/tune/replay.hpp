#pragma once
// A recorded launch (record.hpp) rebuilt in this process: its IR with ops that own their
// text, storages of the recorded sizes on the device (inputs filled with values in [1, 2)),
// the recorded strides, offsets and scalars; run() launches it through the device's
// executor, exactly as the recording program's evaluation did, so kiln::tune sees the same
// kernel id, size bucket and launch path.
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/tune/record.hpp"
#include "kiln/reduce.hpp"

#include <random>

namespace kiln::jit::tune {

// The built-in reductions by name: a record names its reduction; a user's cannot replay.
inline const reduction_info* builtin_reduction(std::string_view name) {
  static const reduction_info* all[] = {
      &reduction_info_of<reductions::sum>,       &reduction_info_of<reductions::prod>,
      &reduction_info_of<reductions::max>,       &reduction_info_of<reductions::min>,
      &reduction_info_of<reductions::argmax>,    &reduction_info_of<reductions::argmin>,
      &reduction_info_of<reductions::all>,       &reduction_info_of<reductions::any>,
      &reduction_info_of<reductions::mean>,      &reduction_info_of<reductions::count_nonzero>,
      &reduction_info_of<reductions::logsumexp>, &reduction_info_of<reductions::norm2>,
      &reduction_info_of<reductions::sum_sq_dev>};
  for (const reduction_info* r : all)
    if (name == r->name) return r;
  return nullptr;
}

class replayed {
public:
  std::string kind, identity, kernel, bucket, device_name, reduction;
  dtype out_type = dtype::f32;

  // Parses a record's line (after its checksum was checked); `on` overrides the recorded
  // device. Throws kiln::error for a launch that cannot be replayed, saying why.
  replayed(std::string_view body, const std::string& on) {
    token_reader r(body);
    kind = r.text().value_or("");
    identity = r.text().value_or("");
    kernel = r.text().value_or("");
    bucket = r.text().value_or("");
    if (kind == "host")
      throw error("kiln-tune", "a host pass is recorded but cannot be replayed here",
                  "its code is the program's: tune it there with kiln::tune");
    device_name = r.text().value_or("");
    dev_ = kiln::device(on.empty() ? device_name : on);
    ir_ = read_ir(r, arena_);
    if (kind == "contraction") {
      acc_ = static_cast<dtype>(r.num());
      result_ = static_cast<dtype>(r.num());
      batch_rank_ = static_cast<int>(r.num());
      product_ = static_cast<int>(r.num());
    }
    if (kind == "reduction") {
      reduction = r.text().value_or("");
      const bool builtin = r.num() != 0;
      info_ = builtin ? builtin_reduction(reduction) : nullptr;
      if (!info_)
        throw error("kiln-tune", "a reduction that is not kiln's own cannot be replayed",
                    reduction + ": its device code is a function of the program");
    }
    const int rank = static_cast<int>(r.num());
    if (rank < 1 || rank > max_rank) throw error("kiln-tune", "a damaged record", "rank");
    std::vector<std::int64_t> ext(static_cast<std::size_t>(rank));
    for (auto& e : ext)
      e = r.num();
    extents_ = kiln::shape(ext.begin(), ext.end());
    if (kind == "reduction") {
      count_ = r.num();
      nout_ = r.num();
      value_ = static_cast<dtype>(r.num());
      out_type = static_cast<dtype>(r.num());
    } else if (kind == "contraction") {
      // The targets: the product's result (its type), or with an epilogue its outputs (the
      // IR's results 2...: 0 and 1 are the operands' expressions).
      const auto nt = r.num();
      if (nt < 1 || batch_rank_ < 0 || batch_rank_ + 3 != rank)
        throw error("kiln-tune", "a damaged record", "a contraction's targets or rank");
      for (std::int64_t o = 0; o < nt; ++o)
        operand(r, rank, product_ < 0 ? result_ : ir_.outputs.at(std::size_t(o + 2)), false);
      out_type = product_ < 0 ? result_ : ir_.outputs.at(2);
    } else {
      n_ = r.num();
      const auto nt = r.num();
      for (std::int64_t o = 0; o < nt; ++o)
        operand(r, rank, ir_.outputs.at(std::size_t(o)), false);
      out_type = ir_.outputs.at(0);
    }
    const auto ni = r.num();
    for (std::int64_t i = 0; i < ni; ++i)
      operand(r, rank, ir_.inputs.at(std::size_t(i)), true);
    scalars_.resize(static_cast<std::size_t>(r.num()));
    for (auto& b : scalars_)
      b = static_cast<std::uint64_t>(r.num());
    if (kind == "reduction") {
      params_.resize(static_cast<std::size_t>(r.num()));
      for (auto& q : params_) {
        const std::int64_t bits = r.num();
        std::memcpy(&q, &bits, 8);
      }
      out_ = std::make_shared<storage>(out_type, nout_, dev_);
      out_layout_ = layout::contiguous(kiln::shape({nout_}));
    }
    lowered_ = std::make_unique<lowered_pass>(std::vector<std::int16_t>{}, ir_.strided, ir_.rank,
                                              ir_.wide_index, ir_);
    for (std::size_t i = 0; i < in_layouts_.size(); ++i)
      leaves_.push_back({inputs_[i].get(), &in_layouts_[i], ir_.inputs[i]});
    for (std::size_t o = 0; o < out_layouts_.size(); ++o) {
      targets_.push_back(outputs_[o].get());
      target_layouts_.push_back(&out_layouts_[o]);
      target_offsets_.push_back(out_layouts_[o].offset);
    }
  }

  const kiln::device& device() const { return dev_; }

  // One launch, queued (the caller waits where it times).
  void run() {
    device_executor& x = executor_of(kind == "reduction" ? *out_ : *outputs_.front(), "kiln-tune");
    if (kind == "contraction") {
      const std::size_t nt = targets_.size();
      if (!x.contract(device_contraction{*lowered_, leaves_, scalars_, extents_,
                                         std::span<const operand_strides>(strides_).subspan(nt),
                                         batch_rank_, acc_, result_, targets_, target_offsets_,
                                         std::span<const operand_strides>(strides_).first(nt),
                                         product_}))
        throw error("kiln-tune", "the device declines the recorded product",
                    device_name + ": its shape or buffers do not suit the contraction kernel "
                                  "under this configuration");
      return;
    }
    if (kind == "reduction") {
      std::array<bool, max_rank> mask{};
      x.reduce(device_reduction{*info_, *lowered_, leaves_, scalars_, extents_, strides_, count_,
                                nout_, value_, out_type, *out_, out_layout_, mask, params_});
    } else {
      x.run(device_pass{*lowered_, leaves_, scalars_, extents_, strides_, n_, targets_,
                        target_layouts_});
    }
  }

  // The first output's values (a reduction's result), read back as doubles.
  std::vector<double> output() const {
    return read(kind == "reduction" ? *out_ : *outputs_.front());
  }
  // Input i's values, as filled.
  std::vector<double> input(std::size_t i) const { return read(*inputs_.at(i)); }

private:
  static std::vector<double> read(const storage& s) {
    std::vector<std::byte> bytes(static_cast<std::size_t>(s.count()) * size_of(s.dtype()));
    s.backend()->read(s.handle(), 0, bytes.data(), bytes.size());
    std::vector<double> out(static_cast<std::size_t>(s.count()));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = to_double(s.dtype(), bytes.data() + i * size_of(s.dtype()));
    return out;
  }

  static double to_double(dtype d, const std::byte* p) {
    double v = 0;
    visit(d, [&]<class T>() {
      T x;
      std::memcpy(&x, p, sizeof(T));
      v = static_cast<double>(x);
    });
    return v;
  }
  template <class F>
  static void visit(dtype d, F&& f) {
    switch (d) {
    case dtype::b8:
      return f.template operator()<bool>();
    case dtype::u8:
      return f.template operator()<std::uint8_t>();
    case dtype::i32:
      return f.template operator()<std::int32_t>();
    case dtype::u32:
      return f.template operator()<std::uint32_t>();
    case dtype::i64:
      return f.template operator()<std::int64_t>();
    case dtype::f16:
      return f.template operator()<half>();
    case dtype::bf16:
      return f.template operator()<bfloat16>();
    case dtype::f32:
      return f.template operator()<float>();
    case dtype::f64:
      return f.template operator()<double>();
    }
  }

  // A storage of the recorded size; inputs filled with values in [1, 2) (bool: true).
  void operand(token_reader& r, int rank, dtype d, bool input) {
    const std::int64_t count = r.num(), offset = r.num();
    operand_strides st{};
    for (int k = 0; k < rank; ++k)
      st[std::size_t(k)] = r.num();
    if (count < 1 || offset < 0 || offset >= count)
      throw error("kiln-tune", "a damaged record", "an operand's size or offset");
    auto s = std::make_shared<storage>(d, count, dev_);
    if (input) {
      std::vector<std::byte> bytes(static_cast<std::size_t>(count) * size_of(d));
      std::mt19937 rng(static_cast<unsigned>(inputs_.size() + 1));
      std::uniform_real_distribution<double> u(1.0, 2.0);
      for (std::int64_t i = 0; i < count; ++i)
        visit(d, [&]<class T>() {
          const T x = static_cast<T>(u(rng));
          std::memcpy(bytes.data() + std::size_t(i) * sizeof(T), &x, sizeof(T));
        });
      s->backend()->write(s->handle(), 0, bytes.data(), bytes.size());
      inputs_.push_back(s);
      in_layouts_.push_back(layout::contiguous(kiln::shape({count}), offset));
    } else {
      outputs_.push_back(s);
      out_layouts_.push_back(layout::contiguous(kiln::shape({count}), offset));
    }
    strides_.push_back(st);
  }

  kiln::device dev_;
  op_arena arena_;
  ir::kernel_ir ir_;
  std::unique_ptr<lowered_pass> lowered_;
  const reduction_info* info_ = nullptr;
  kiln::shape extents_;
  std::int64_t n_ = 0, count_ = 0, nout_ = 0;
  dtype value_ = dtype::f32;
  dtype acc_ = dtype::f32, result_ = dtype::f32; // a contraction's
  int batch_rank_ = 0, product_ = -1;
  std::vector<std::shared_ptr<storage>> inputs_, outputs_;
  std::deque<layout> in_layouts_, out_layouts_;
  std::vector<operand_strides> strides_; // outputs first, then inputs (a pass, a
                                         // contraction); inputs
  std::vector<device_leaf> leaves_;
  std::vector<const storage*> targets_;
  std::vector<const layout*> target_layouts_;
  std::vector<std::int64_t> target_offsets_; // a contraction's
  std::vector<std::uint64_t> scalars_;
  std::vector<double> params_;
  std::shared_ptr<storage> out_;
  layout out_layout_;
};

// What kiln::tune reads of a replayed launch: its output, and its dtype, which sets how a
// reduction's results must agree (integers exactly, each float type to its precision).
struct replay_output {
  replayed* rp;
  kiln::dtype dtype() const { return rp->out_type; }
  std::vector<double> to_vector() const { return rp->output(); }
};

// The records of a file: each line's checksum checked; damaged lines counted, not parsed.
struct recorded_lines {
  std::vector<std::string> bodies;
  std::size_t damaged = 0;
};

inline recorded_lines read_record_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw error("kiln-tune", "cannot read the record of launches", path);
  recorded_lines out;
  for (std::string line; std::getline(f, line);) {
    if (const auto body = detail::checked_body(line))
      out.bodies.emplace_back(*body);
    else
      ++out.damaged;
  }
  return out;
}

} // namespace kiln::jit::tune
