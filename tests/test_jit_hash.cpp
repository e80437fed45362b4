// kiln::jit::hasher and the kernel cache key: checked against an independent
// MurmurHash3_x64_128 (itself pinned to SMHasher's published check value), and for the
// statistical quality a cache key needs (no collisions, avalanche).
#include <kiln/jit/cache/cache_key.hpp>
#include <kiln/jit/cache/hash.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}

std::size_t draw(std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng());
}

std::vector<std::byte> random_bytes(std::size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v)
    b = static_cast<std::byte>(rng()() & 0xff);
  return v;
}

std::string random_string(std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s)
    c = static_cast<char>(rng()() & 0xff);
  return s;
}

// MurmurHash3_x64_128 as published (one shot, any seed), written from the reference
// description independently of hasher's buffered, incremental version.
std::array<std::uint64_t, 2> murmur3_reference(const std::uint8_t* data, std::size_t len,
                                               std::uint32_t seed) {
  const std::uint64_t c1 = 0x87c37b91114253d5ull, c2 = 0x4cf5ad432745937full;
  std::uint64_t h1 = seed, h2 = seed;
  auto fmix = [](std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
  };
  const std::size_t nblocks = len / 16;
  for (std::size_t i = 0; i < nblocks; ++i) {
    std::uint64_t k1 = 0, k2 = 0;
    for (int b = 0; b < 8; ++b) {
      k1 |= std::uint64_t{data[16 * i + b]} << (8 * b);
      k2 |= std::uint64_t{data[16 * i + 8 + b]} << (8 * b);
    }
    k1 *= c1, k1 = std::rotl(k1, 31), k1 *= c2, h1 ^= k1;
    h1 = std::rotl(h1, 27), h1 += h2, h1 = h1 * 5 + 0x52dce729;
    k2 *= c2, k2 = std::rotl(k2, 33), k2 *= c1, h2 ^= k2;
    h2 = std::rotl(h2, 31), h2 += h1, h2 = h2 * 5 + 0x38495ab5;
  }
  const std::uint8_t* tail = data + nblocks * 16;
  std::uint64_t k1 = 0, k2 = 0;
  switch (len & 15) {
  case 15:
    k2 ^= std::uint64_t{tail[14]} << 48;
    [[fallthrough]];
  case 14:
    k2 ^= std::uint64_t{tail[13]} << 40;
    [[fallthrough]];
  case 13:
    k2 ^= std::uint64_t{tail[12]} << 32;
    [[fallthrough]];
  case 12:
    k2 ^= std::uint64_t{tail[11]} << 24;
    [[fallthrough]];
  case 11:
    k2 ^= std::uint64_t{tail[10]} << 16;
    [[fallthrough]];
  case 10:
    k2 ^= std::uint64_t{tail[9]} << 8;
    [[fallthrough]];
  case 9:
    k2 ^= std::uint64_t{tail[8]};
    k2 *= c2, k2 = std::rotl(k2, 33), k2 *= c1, h2 ^= k2;
    [[fallthrough]];
  case 8:
    k1 ^= std::uint64_t{tail[7]} << 56;
    [[fallthrough]];
  case 7:
    k1 ^= std::uint64_t{tail[6]} << 48;
    [[fallthrough]];
  case 6:
    k1 ^= std::uint64_t{tail[5]} << 40;
    [[fallthrough]];
  case 5:
    k1 ^= std::uint64_t{tail[4]} << 32;
    [[fallthrough]];
  case 4:
    k1 ^= std::uint64_t{tail[3]} << 24;
    [[fallthrough]];
  case 3:
    k1 ^= std::uint64_t{tail[2]} << 16;
    [[fallthrough]];
  case 2:
    k1 ^= std::uint64_t{tail[1]} << 8;
    [[fallthrough]];
  case 1:
    k1 ^= std::uint64_t{tail[0]};
    k1 *= c1, k1 = std::rotl(k1, 31), k1 *= c2, h1 ^= k1;
  }
  h1 ^= len, h2 ^= len;
  h1 += h2, h2 += h1;
  h1 = fmix(h1), h2 = fmix(h2);
  h1 += h2, h2 += h1;
  return {h1, h2};
}

void append_le(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

} // namespace

TEST_CASE("the reference MurmurHash3_x64_128 reproduces SMHasher's check value", "[hash]") {
  // SMHasher's VerificationTest: key i is the bytes 0..i-1 hashed with seed 256-i; the 256
  // digests are hashed with seed 0; the first 4 bytes, little-endian, are 0x6384BA69.
  std::uint8_t key[256];
  std::vector<std::uint8_t> digests;
  for (int i = 0; i < 256; ++i) {
    key[i] = static_cast<std::uint8_t>(i);
    const auto h = murmur3_reference(key, i, static_cast<std::uint32_t>(256 - i));
    append_le(digests, h[0], 8);
    append_le(digests, h[1], 8);
  }
  const auto final_hash = murmur3_reference(digests.data(), digests.size(), 0);
  CHECK(static_cast<std::uint32_t>(final_hash[0]) == 0x6384BA69u);
}

TEST_CASE("hasher equals MurmurHash3_x64_128 of its length-prefixed field stream", "[hash]") {
  for (int trial = 0; trial < 300; ++trial) {
    kiln::jit::hasher h;
    std::vector<std::uint8_t> stream; // what the fields serialize to, built independently
    const std::size_t fields = draw(0, 12);
    for (std::size_t f = 0; f < fields; ++f) {
      const std::uint64_t x = rng()();
      switch (draw(0, 5)) {
      case 0: { // bytes of a length that straddles block boundaries
        const auto b = random_bytes(draw(0, 70));
        h.add(std::span<const std::byte>(b));
        append_le(stream, b.size(), 8);
        for (auto c : b)
          stream.push_back(std::to_integer<std::uint8_t>(c));
        break;
      }
      case 1: {
        const std::string s = random_string(draw(0, 40));
        h.add(std::string_view(s));
        append_le(stream, s.size(), 8);
        stream.insert(stream.end(), s.begin(), s.end());
        break;
      }
      case 2:
        h.add(static_cast<std::uint8_t>(x)), append_le(stream, x, 1);
        break;
      case 3:
        h.add(static_cast<std::int16_t>(x)), append_le(stream, x, 2);
        break;
      case 4:
        h.add(static_cast<std::int32_t>(x)), append_le(stream, x, 4);
        break;
      case 5:
        h.add(x), append_le(stream, x, 8);
        break;
      }
      // A digest mid-way must neither disturb the state nor differ from a one-shot hash.
      const auto ref = murmur3_reference(stream.data(), stream.size(), 0);
      const kiln::jit::hash128 d = h.digest();
      REQUIRE(d.lo == ref[0]);
      REQUIRE(d.hi == ref[1]);
    }
  }
  CHECK(kiln::jit::hasher().digest() == kiln::jit::hash128{0, 0}); // Murmur3 of "" is 0
  CHECK(kiln::jit::hash_of(std::string_view("abc")) ==
        kiln::jit::hasher().add(std::string_view("abc")).digest());
  // bool is one byte, 0 or 1.
  std::vector<std::uint8_t> one{1};
  const auto ref = murmur3_reference(one.data(), 1, 0);
  CHECK(kiln::jit::hasher().add(true).digest() == kiln::jit::hash128{ref[0], ref[1]});
}

TEST_CASE("each add() is a separate field", "[hash]") {
  using kiln::jit::hasher;
  const std::string s = random_string(draw(2, 30));
  const std::size_t cut = draw(1, s.size() - 1);
  const std::string_view a(s.data(), cut), b(s.data() + cut, s.size() - cut);
  CHECK(hasher().add(a).add(b).digest() != hasher().add(std::string_view(s)).digest());
  CHECK(hasher().add(a).add(b).digest() != hasher().add(b).add(a).digest());
  CHECK(hasher().add(std::string_view()).digest() != hasher().digest());
  CHECK(hasher().add(std::uint32_t{7}).digest() != hasher().add(std::uint64_t{7}).digest());
}

TEST_CASE("hash128 hex() and from_hex()", "[hash]") {
  using kiln::jit::hash128;
  CHECK(hash128{1, 0}.hex() == "00000000000000000000000000000001");
  CHECK(hash128{0, 0xab00000000000000ull}.hex() == "ab000000000000000000000000000000");
  for (int i = 0; i < 1000; ++i) {
    const hash128 h{rng()(), rng()()};
    const std::string hex = h.hex();
    REQUIRE(hex.size() == 32);
    REQUIRE(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
    REQUIRE(hash128::from_hex(hex) == h);
    std::string upper = hex;
    for (auto& c : upper)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    REQUIRE(hash128::from_hex(upper) == h);
  }
  CHECK_FALSE(hash128::from_hex(""));
  CHECK_FALSE(hash128::from_hex("0000000000000000000000000000001"));   // 31 digits
  CHECK_FALSE(hash128::from_hex("000000000000000000000000000000001")); // 33 digits
  CHECK_FALSE(hash128::from_hex("0000000000000000000000000000000g"));
  CHECK_FALSE(hash128::from_hex("000000000000000 0000000000000000"));
}

TEST_CASE("no collisions over 200k distinct strings, in 128 bits or either 64-bit lane", "[hash]") {
  std::unordered_set<std::string> inputs;
  // Random strings, and near-identical ones (one counter apart) as generated names look.
  while (inputs.size() < 100000)
    inputs.insert(random_string(draw(0, 48)));
  for (int i = 0; i < 100000; ++i)
    inputs.insert("kernel_" + std::to_string(i) + "_f32");
  std::unordered_set<kiln::jit::hash128> digests;
  std::unordered_set<std::uint64_t> lows, highs;
  for (const std::string& s : inputs) {
    const auto d = kiln::jit::hash_of(std::string_view(s));
    digests.insert(d);
    lows.insert(d.lo);
    highs.insert(d.hi);
  }
  CHECK(inputs.size() == 200000);
  CHECK(digests.size() == inputs.size());
  CHECK(lows.size() == inputs.size());
  CHECK(highs.size() == inputs.size());
}

TEST_CASE("a one-bit input change flips each output bit with probability one half", "[hash]") {
  const int trials = 6000;
  std::array<int, 128> flips{};
  std::uint64_t total = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<std::byte> in = random_bytes(draw(1, 80));
    const auto before = kiln::jit::hash_of(in);
    const std::size_t bit = draw(0, in.size() * 8 - 1);
    in[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    const auto after = kiln::jit::hash_of(in);
    const std::uint64_t dlo = before.lo ^ after.lo, dhi = before.hi ^ after.hi;
    total += static_cast<std::uint64_t>(std::popcount(dlo) + std::popcount(dhi));
    for (int b = 0; b < 64; ++b) {
      flips[b] += static_cast<int>((dlo >> b) & 1);
      flips[64 + b] += static_cast<int>((dhi >> b) & 1);
    }
  }
  // Mean flipped bits: 64, standard error 5.66/sqrt(6000) = 0.07. Per bit: 0.5, standard
  // error 0.0065, so [0.45, 0.55] is over 7 standard errors wide.
  const double mean = static_cast<double>(total) / trials;
  CHECK(mean > 63.0);
  CHECK(mean < 65.0);
  for (int b = 0; b < 128; ++b) {
    INFO("output bit " << b);
    CHECK(flips[b] > trials * 0.45);
    CHECK(flips[b] < trials * 0.55);
  }
}

TEST_CASE("the kernel cache key depends on every input", "[hash]") {
  using kiln::jit::kernel_cache_key;
  const std::string source = "void main() {" + random_string(draw(0, 200)) + "}";
  const std::string options = "-O --target-env=vulkan1.1", compiler = "glslc v2022.4";
  kiln::jit::kernel_key_inputs base;
  base.source = source;
  base.options = options;
  base.compiler_version = compiler;
  base.vendor_id = 0x10005;
  base.device_id = static_cast<std::uint32_t>(rng()());
  base.driver_version = static_cast<std::uint32_t>(rng()());
  for (auto& b : base.pipeline_cache_uuid)
    b = static_cast<std::uint8_t>(rng()());
  base.kiln_version = "0.1.0";
  const kiln::jit::hash128 key = kernel_cache_key(base);
  CHECK(kernel_cache_key(base) == key);

  std::unordered_set<kiln::jit::hash128> keys{key};
  auto variant = [&](auto change) {
    kiln::jit::kernel_key_inputs in = base;
    change(in);
    keys.insert(kernel_cache_key(in));
  };
  const std::string source2 = source + " ", options2 = options + " -g";
  variant([&](auto& in) { in.source = source2; });
  variant([&](auto& in) { in.options = options2; });
  variant([&](auto& in) { in.compiler_version = "glslc v2023.1"; });
  variant([&](auto& in) { in.vendor_id ^= 1; });
  variant([&](auto& in) { in.device_id ^= 1u << draw(0, 31); });
  variant([&](auto& in) { in.driver_version += 1; });
  variant([&](auto& in) { in.pipeline_cache_uuid[draw(0, 15)] ^= 0x80; });
  variant([&](auto& in) { in.kiln_version = "0.1.1"; });
  // Moving a character from the options to the source is another key too.
  const std::string shifted_source = source + options.substr(0, 1),
                    shifted_options = options.substr(1);
  variant([&](auto& in) { in.source = shifted_source, in.options = shifted_options; });
  CHECK(keys.size() == 10);
}
