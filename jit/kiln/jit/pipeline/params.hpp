#pragma once
// A kernel's parameter block: element count, merged extents, each buffer's element offset
// and strides, and the scalar values. Shapes, strides and scalars are parameters, never
// source text, so new sizes and values reuse the compiled kernel. Members are laid out
// 8-byte ones first, then 4-byte ones, so std430 (push constants and storage buffers
// alike) packs them with no padding and the host writes them with plain memcpy.
#include "kiln/jit/codegen/c_family.hpp"
#include "kiln/jit/pipeline/ir.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace kiln::jit {

struct param_layout {
  bool wide = false; // 64-bit index fields
  bool strided = false;
  int rank = 1; // extents/strides per buffer (strided kernels)
  int buffers = 0;
  int extras = 0; // more index fields after n (x0, x1, ...), for kernel templates
  std::vector<dtype> scalars;
  std::vector<std::uint32_t> scalar_offset; // byte offset of each scalar
  std::uint32_t index_bytes = 0; // bytes of the index fields (first or after 8-byte scalars)
  std::uint32_t index_offset = 0;
  std::uint32_t bytes = 0;
  bool in_buffer = false;  // too big for push constants: a storage buffer at binding `buffers`
  std::uint32_t limit = 0; // the backend's inline parameter bytes (max_push_bytes)

  static std::uint32_t scalar_size(dtype d) { return d == dtype::i64 || d == dtype::f64 ? 8 : 4; }
  int index_fields() const {
    return 1 + extras + (strided ? rank : 0) + buffers * (1 + (strided ? rank : 0));
  }

  param_layout(const kernel_ir& ir, std::uint32_t max_push_bytes, int extra_fields = 0)
      : wide(ir.wide_index), strided(ir.strided), rank(ir.rank),
        buffers(static_cast<int>(ir.inputs.size() + ir.outputs.size())), extras(extra_fields),
        scalars(ir.scalars), limit(max_push_bytes) {
    const std::uint32_t isz = wide ? 8 : 4;
    std::uint32_t off = 0;
    scalar_offset.resize(scalars.size());
    for (int pass = 0; pass < 2; ++pass) { // 8-byte members, then 4-byte ones
      const std::uint32_t want = pass == 0 ? 8 : 4;
      if (isz == want) {
        index_offset = off;
        index_bytes = isz * static_cast<std::uint32_t>(index_fields());
        off += index_bytes;
      }
      for (std::size_t k = 0; k < scalars.size(); ++k)
        if (scalar_size(scalars[k]) == want) {
          scalar_offset[k] = off;
          off += want;
        }
    }
    bytes = off;
    in_buffer = bytes > max_push_bytes;
  }

  // The members in byte order, as "<type> <name>;" (index fields n, x<k>, e<d>, then per
  // buffer o<b> and s<b>_<d>; scalars p<k>), in the type names GLSL and CUDA share.
  std::vector<std::string> members() const {
    struct member {
      std::uint32_t offset;
      std::string text;
    };
    std::vector<member> ms;
    const char* I = wide ? "int64_t" : "int";
    const std::uint32_t isz = wide ? 8 : 4;
    std::uint32_t o = index_offset;
    auto index = [&](const std::string& n) {
      ms.push_back({o, std::string(I) + " " + n + ";"});
      o += isz;
    };
    index("n");
    for (int x = 0; x < extras; ++x)
      index("x" + std::to_string(x));
    if (strided)
      for (int d = 0; d < rank; ++d)
        index("e" + std::to_string(d));
    for (int b = 0; b < buffers; ++b) {
      index("o" + std::to_string(b));
      if (strided)
        for (int d = 0; d < rank; ++d)
          index("s" + std::to_string(b) + "_" + std::to_string(d));
    }
    for (std::size_t k = 0; k < scalars.size(); ++k)
      ms.push_back({scalar_offset[k], std::string(cfamily::names_of(scalars[k]).param) + " p" +
                                          std::to_string(k) + ";"});
    std::sort(ms.begin(), ms.end(),
              [](const member& a, const member& b) { return a.offset < b.offset; });
    std::vector<std::string> out;
    for (auto& m : ms)
      out.push_back(std::move(m.text));
    return out;
  }

  // The GLSL block.
  std::string declaration(int binding) const {
    std::string s = in_buffer ? "layout(std430, binding = " + std::to_string(binding) +
                                    ") readonly buffer kiln_params {\n"
                              : "layout(push_constant) uniform kiln_params {\n";
    const auto ms = members();
    for (const auto& m : ms)
      s += "  " + m + "\n";
    if (ms.empty()) s += "  int unused;\n";
    return s + "} P;\n";
  }

  // Fills `out` (bytes long): n, extents, per buffer offset and strides (buffers in
  // binding order), scalars.
  template <class Strides>
  void pack(std::byte* out, std::int64_t n, const std::int64_t* extents,
            const std::int64_t* offsets, const Strides& strides,
            std::span<const std::uint64_t> scalar_bits,
            std::span<const std::int64_t> extra_values = {}) const {
    std::byte* p = out + index_offset;
    auto put = [&](std::int64_t v) {
      if (wide) {
        std::memcpy(p, &v, 8);
        p += 8;
      } else {
        const auto w = static_cast<std::int32_t>(v);
        std::memcpy(p, &w, 4);
        p += 4;
      }
    };
    put(n);
    for (int x = 0; x < extras; ++x)
      put(extra_values[x]);
    if (strided)
      for (int d = 0; d < rank; ++d)
        put(extents[d]);
    for (int b = 0; b < buffers; ++b) {
      put(offsets[b]);
      if (strided)
        for (int d = 0; d < rank; ++d)
          put(strides[b][d]);
    }
    for (std::size_t k = 0; k < scalars.size(); ++k)
      std::memcpy(out + scalar_offset[k], &scalar_bits[k], scalar_size(scalars[k]));
  }
};

} // namespace kiln::jit
