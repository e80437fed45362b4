#pragma once
// kiln::jit::hasher: the 128-bit hash behind kernel-cache keys and file checksums.
//
// The mix is MurmurHash3_x64_128 (Austin Appleby, public domain): two 64-bit lanes, each
// 16-byte block multiplied, rotated and cross-added into both, then a multiply-xorshift
// finalizer per lane. It is fast, has full avalanche, and has a published check value
// (SMHasher's 0x6384BA69), so tests can pin it against an independent reference. It is not
// cryptographic: cache keys only need to avoid accidental collisions.
//
// Each add() is one field: strings and byte spans are preceded by their length, so
// add("ab").add("c") and add("a").add("bc") differ. Integers are fixed-width little-endian.
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace kiln::jit {

// A 128-bit digest; hi holds the leading hex digits, so hex() reads as one 128-bit number.
struct hash128 {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;

  friend bool operator==(const hash128&, const hash128&) = default;

  // 32 lower-case hex digits, most significant first.
  std::string hex() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[15 - i] = digits[(hi >> (4 * i)) & 0xf];
      s[31 - i] = digits[(lo >> (4 * i)) & 0xf];
    }
    return s;
  }

  // The inverse of hex(); nullopt unless s is exactly 32 hex digits (either case).
  static std::optional<hash128> from_hex(std::string_view s) {
    if (s.size() != 32) return std::nullopt;
    hash128 h;
    for (std::size_t i = 0; i < 32; ++i) {
      const char c = s[i];
      std::uint64_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<std::uint64_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<std::uint64_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<std::uint64_t>(c - 'A' + 10);
      else
        return std::nullopt;
      std::uint64_t& lane = i < 16 ? h.hi : h.lo;
      lane = (lane << 4) | d;
    }
    return h;
  }
};

class hasher {
public:
  hasher() = default;

  hasher& add(std::span<const std::byte> bytes) {
    add(static_cast<std::uint64_t>(bytes.size()));
    absorb(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    return *this;
  }

  hasher& add(std::string_view s) { return add(std::as_bytes(std::span(s.data(), s.size()))); }

  // The value's sizeof(T) bytes, little-endian on every host.
  template <std::integral T>
  hasher& add(T value) {
    if constexpr (std::is_same_v<T, bool>) {
      return add(static_cast<unsigned char>(value ? 1 : 0));
    } else {
      return add_unsigned(static_cast<std::make_unsigned_t<T>>(value));
    }
  }

  // The digest of everything added so far; the hasher can keep going afterwards.
  hash128 digest() const {
    std::uint64_t h1 = h1_, h2 = h2_;
    std::uint64_t k1 = 0, k2 = 0;
    // The tail: the up to 15 bytes that did not fill a block (reference byte order).
    for (std::size_t i = buffered_; i-- > 8;)
      k2 = (k2 << 8) | buffer_[i];
    for (std::size_t i = buffered_ < 8 ? buffered_ : 8; i-- > 0;)
      k1 = (k1 << 8) | buffer_[i];
    if (buffered_ > 8) {
      k2 *= c2;
      k2 = std::rotl(k2, 33);
      k2 *= c1;
      h2 ^= k2;
    }
    if (buffered_ > 0) {
      k1 *= c1;
      k1 = std::rotl(k1, 31);
      k1 *= c2;
      h1 ^= k1;
    }
    h1 ^= length_;
    h2 ^= length_;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    // Reference output bytes are h1 then h2, each little-endian: h1 is the low half.
    return {h1, h2};
  }

private:
  static constexpr std::uint64_t c1 = 0x87c37b91114253d5ull;
  static constexpr std::uint64_t c2 = 0x4cf5ad432745937full;

  static std::uint64_t load_le64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | p[i];
    return v;
  }

  template <class U>
  hasher& add_unsigned(U v) {
    unsigned char le[sizeof(U)];
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      le[i] = static_cast<unsigned char>(v & 0xffu);
      if constexpr (sizeof(U) > 1) v = static_cast<U>(v >> 8);
    }
    absorb(le, sizeof(U));
    return *this;
  }

  static std::uint64_t fmix64(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
  }

  void block(const unsigned char* p) {
    std::uint64_t k1 = load_le64(p), k2 = load_le64(p + 8);
    k1 *= c1;
    k1 = std::rotl(k1, 31);
    k1 *= c2;
    h1_ ^= k1;
    h1_ = std::rotl(h1_, 27);
    h1_ += h2_;
    h1_ = h1_ * 5 + 0x52dce729;
    k2 *= c2;
    k2 = std::rotl(k2, 33);
    k2 *= c1;
    h2_ ^= k2;
    h2_ = std::rotl(h2_, 31);
    h2_ += h1_;
    h2_ = h2_ * 5 + 0x38495ab5;
  }

  void absorb(const unsigned char* p, std::size_t n) {
    if (n == 0) return; // p may be null then, which memcpy does not allow
    length_ += n;
    if (buffered_ > 0) {
      const std::size_t take = n < 16 - buffered_ ? n : 16 - buffered_;
      std::memcpy(buffer_.data() + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 16) return;
      block(buffer_.data());
      buffered_ = 0;
    }
    for (; n >= 16; p += 16, n -= 16)
      block(p);
    if (n > 0) std::memcpy(buffer_.data(), p, n);
    buffered_ = n;
  }

  std::uint64_t h1_ = 0, h2_ = 0; // seed 0
  std::uint64_t length_ = 0;      // bytes absorbed, length prefixes included
  std::array<unsigned char, 16> buffer_{};
  std::size_t buffered_ = 0;
};

// One-shot helpers: the digest of a single field.
inline hash128 hash_of(std::span<const std::byte> bytes) { return hasher().add(bytes).digest(); }
inline hash128 hash_of(std::string_view s) { return hasher().add(s).digest(); }

} // namespace kiln::jit

template <>
struct std::hash<kiln::jit::hash128> {
  // The digest is already uniform: either lane is a good bucket index.
  std::size_t operator()(const kiln::jit::hash128& h) const noexcept {
    return static_cast<std::size_t>(h.lo);
  }
};
