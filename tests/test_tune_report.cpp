// `kiln-tune report`: tools/png_plot.hpp's PNG encoder read back by an independent minimal
// reader (CRC-32 bit by bit, Adler-32 without deferred modulo, stored deflate blocks), and
// the command end to end through the kiln-tune binary this build made, on databases written
// here: what README.md says, which plots exist and their size, and the errors.
#include "../tools/png_plot.hpp"

#include <kiln/jit/tune.hpp>
#include <kiln/jit/tune/database.hpp>
#include <kiln/jit/tune/record.hpp>
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using bytes = std::vector<std::uint8_t>;

// ---- an independent PNG reader -------------------------------------------------------------

// CRC-32 one bit at a time: the encoder's table-driven one, computed another way.
std::uint32_t crc32_bitwise(const std::uint8_t* p, std::size_t n) {
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Adler-32 reduced after every byte (the encoder defers the modulo).
std::uint32_t adler32_plain(const std::uint8_t* p, std::size_t n) {
  std::uint32_t a = 1, b = 0;
  for (std::size_t i = 0; i < n; ++i) {
    a = (a + p[i]) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

std::uint32_t be32(const bytes& d, std::size_t at) {
  return std::uint32_t(d[at]) << 24 | std::uint32_t(d[at + 1]) << 16 |
         std::uint32_t(d[at + 2]) << 8 | std::uint32_t(d[at + 3]);
}

struct decoded {
  int width = 0, height = 0;
  bytes rgb;
  bytes filtered; // the zlib stream's content: the rows with their filter bytes
  std::vector<std::string> chunks;
  std::size_t blocks = 0; // stored deflate blocks
};

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("not a valid PNG as the encoder writes them: " + what);
}

// Reads what png_plot::encode writes (RGB 8-bit, no interlace, stored deflate blocks only,
// filter type 0), checking every checksum and length on the way; throws where it differs.
decoded read_png(const bytes& f) {
  static const bytes signature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  check(f.size() >= 8 && bytes(f.begin(), f.begin() + 8) == signature, "the signature");
  decoded out;
  bytes z;
  for (std::size_t at = 8;;) {
    check(at + 12 <= f.size(), "a chunk runs past the end of the file");
    const std::uint32_t len = be32(f, at);
    check(len <= f.size() - at - 12, "a chunk's length runs past the end of the file");
    const std::string type(f.begin() + std::ptrdiff_t(at + 4), f.begin() + std::ptrdiff_t(at + 8));
    check(crc32_bitwise(f.data() + at + 4, len + 4) == be32(f, at + 8 + len), "the CRC of " + type);
    const bytes data(f.begin() + std::ptrdiff_t(at + 8), f.begin() + std::ptrdiff_t(at + 8 + len));
    out.chunks.push_back(type);
    if (type == "IHDR") {
      check(out.chunks.size() == 1 && len == 13, "IHDR first, 13 bytes");
      out.width = int(be32(data, 0));
      out.height = int(be32(data, 4));
      check(data[8] == 8 && data[9] == 2, "8-bit RGB");
      check(data[10] == 0 && data[11] == 0 && data[12] == 0, "methods 0, no interlace");
    } else if (type == "IDAT") {
      z.insert(z.end(), data.begin(), data.end());
    } else if (type == "IEND") {
      check(len == 0 && at + 12 == f.size(), "IEND empty and last");
      break;
    }
    at += 12 + len;
  }
  check(out.width > 0 && out.height > 0, "a size");

  check(z.size() >= 6, "a zlib stream");
  check((z[0] & 0x0f) == 8 && (z[0] * 256 + z[1]) % 31 == 0 && !(z[1] & 0x20), "zlib header");
  std::size_t at = 2;
  for (bool last = false; !last;) {
    check(at + 5 <= z.size(), "a block header");
    last = z[at] & 1;
    check(((z[at] >> 1) & 3) == 0, "stored blocks only");
    const std::size_t len = z[at + 1] | z[at + 2] << 8, nlen = z[at + 3] | z[at + 4] << 8;
    check((len ^ nlen) == 0xffff, "LEN and NLEN complement each other");
    check(at + 5 + len <= z.size(), "a block's data");
    out.filtered.insert(out.filtered.end(), z.begin() + std::ptrdiff_t(at + 5),
                        z.begin() + std::ptrdiff_t(at + 5 + len));
    at += 5 + len;
    ++out.blocks;
  }
  check(at + 4 == z.size(), "the Adler-32 ends the stream");
  check(adler32_plain(out.filtered.data(), out.filtered.size()) == be32(z, at), "the Adler-32");

  const std::size_t row = std::size_t(out.width) * 3;
  check(out.filtered.size() == (row + 1) * std::size_t(out.height), "the rows' size");
  for (int y = 0; y < out.height; ++y) {
    const auto start = out.filtered.begin() + std::ptrdiff_t(std::size_t(y) * (row + 1));
    check(*start == 0, "filter type 0");
    out.rgb.insert(out.rgb.end(), start + 1, start + 1 + std::ptrdiff_t(row));
  }
  return out;
}

bytes random_pixels(int w, int h) {
  static std::mt19937 rng(Catch::rngSeed());
  bytes px(std::size_t(w) * std::size_t(h) * 3);
  for (auto& b : px)
    b = static_cast<std::uint8_t>(rng() & 0xff);
  return px;
}

bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  REQUIRE(out.good());
}

struct scratch {
  fs::path dir;
  scratch() {
    std::string t = (fs::temp_directory_path() / "kiln-tune-report-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    dir = t;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

bool has_python_zlib() { return std::system("python3 -c 'import zlib' >/dev/null 2>&1") == 0; }

} // namespace

TEST_CASE("png_plot: CRC-32 and Adler-32 match their published check values") {
  const std::string s = "123456789";
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  CHECK(crc32_bitwise(p, s.size()) == 0xcbf43926u);
  CHECK(png_plot::crc32(p, s.size()) == 0xcbf43926u);
  const std::string w = "Wikipedia";
  const auto* q = reinterpret_cast<const std::uint8_t*>(w.data());
  CHECK(adler32_plain(q, w.size()) == 0x11e60398u);
  CHECK(png_plot::adler32(q, w.size()) == 0x11e60398u);
  // Long inputs: the encoder's deferred modulo against the plain one.
  const bytes big = random_pixels(300, 300);
  CHECK(png_plot::adler32(big.data(), big.size()) == adler32_plain(big.data(), big.size()));
  CHECK(png_plot::crc32(big.data(), big.size()) == crc32_bitwise(big.data(), big.size()));
  const bytes ones(100000, 0xff); // the worst case for the sums' growth
  CHECK(png_plot::adler32(ones.data(), ones.size()) == adler32_plain(ones.data(), ones.size()));
}

TEST_CASE("png_plot: encoded images decode to the same pixels") {
  // Sizes around the stored blocks' 65535 bytes: 28 x 771 fills one block exactly (771 rows
  // of 1 + 84 bytes), 5461 x 4 needs a second block of one byte.
  struct size {
    int w, h;
  };
  for (size s : {size{1, 1}, size{7, 3}, size{200, 150}, size{28, 771}, size{5461, 4}}) {
    INFO(s.w << " x " << s.h);
    const bytes px = random_pixels(s.w, s.h);
    const bytes png = png_plot::encode(s.w, s.h, px);
    const decoded d = read_png(png);
    CHECK(d.width == s.w);
    CHECK(d.height == s.h);
    CHECK(d.chunks == std::vector<std::string>{"IHDR", "IDAT", "IEND"});
    const std::size_t raw = std::size_t(s.h) * (1 + 3 * std::size_t(s.w));
    CHECK(d.blocks == (raw + 65534) / 65535);
    CHECK(d.rgb == px);
    // The reader is no pushover: one bit flipped anywhere past the signature fails it.
    bytes bad = png;
    bad[8 + (png.size() - 8) * 3 / 4] ^= 0x10;
    CHECK_THROWS(read_png(bad));
  }
  CHECK_THROWS_AS(png_plot::encode(0, 1, {}), std::invalid_argument);
  CHECK_THROWS_AS(png_plot::encode(2, 2, bytes(11)), std::invalid_argument);
  CHECK_THROWS_AS(png_plot::encode(20000, 1, bytes(60000)), std::invalid_argument);
}

TEST_CASE("png_plot: zlib in python3 reads the encoder's PNG where python3 is there") {
  if (!has_python_zlib()) {
    WARN("python3 with zlib not found: only the reader in this file checked the encoder");
    return;
  }
  scratch s;
  const bytes px = random_pixels(123, 601); // two stored blocks
  const bytes png = png_plot::encode(123, 601, px);
  write_bytes(s.dir / "image.png", png);
  write_bytes(s.dir / "rows.bin", read_png(png).filtered);
  std::ofstream(s.dir / "check.py") << R"(import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i, idat = 8, b''
while i < len(d):
    n, = struct.unpack('>I', d[i:i + 4])
    t, body = d[i + 4:i + 8], d[i + 8:i + 8 + n]
    assert zlib.crc32(t + body) & 0xffffffff == struct.unpack('>I', d[i + 8 + n:i + 12 + n])[0], t
    if t == b'IDAT':
        idat += body
    i += 12 + n
assert zlib.decompress(idat) == open(sys.argv[2], 'rb').read()
)";
  const std::string cmd = "python3 '" + (s.dir / "check.py").string() + "' '" +
                          (s.dir / "image.png").string() + "' '" + (s.dir / "rows.bin").string() +
                          "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("png_plot: the canvas draws lines and rectangles and text and clips the rest") {
  using png_plot::rgb;
  png_plot::canvas c(40, 20);
  const rgb red{255, 0, 0}, blue{0, 0, 255};
  CHECK(c.get(0, 0) == png_plot::white);
  c.set(-1, 5, red); // outside: ignored
  c.set(40, 5, red);
  c.set(3, 20, red);
  c.line(0, 0, 9, 9, red);
  for (int i = 0; i < 10; ++i)
    CHECK(c.get(i, i) == red);
  CHECK(c.get(1, 0) == png_plot::white);
  c.rect(10, 2, 15, 6, blue);
  CHECK(c.get(10, 2) == blue);
  CHECK(c.get(15, 6) == blue);
  CHECK(c.get(12, 4) == png_plot::white);
  c.fill(30, 10, 50, 30, blue); // partly outside: clipped
  CHECK(c.get(39, 19) == blue);
  CHECK(c.get(29, 10) == png_plot::white);
  // '1' in the 5x7 font: the top row is the middle pixel, the bottom row three.
  CHECK(png_plot::canvas::text_width("12") == 11);
  const int end = c.text(20, 1, "1", png_plot::black);
  CHECK(end == 26);
  CHECK(c.get(22, 1) == png_plot::black);
  CHECK(c.get(21, 1) == png_plot::white);
  CHECK(c.get(21, 7) == png_plot::black);
  CHECK(c.get(23, 7) == png_plot::black);
  CHECK(c.get(20, 7) == png_plot::white);
  // Lower case is drawn as upper case.
  png_plot::canvas a(12, 7), b(12, 7);
  a.text(0, 0, "us", png_plot::black);
  b.text(0, 0, "US", png_plot::black);
  CHECK(a.pixels() == b.pixels());
  CHECK(read_png(c.png()).rgb == c.pixels());
}

TEST_CASE("png_plot: a figure has one panel per series and its highlights in colour") {
  using png_plot::point_kind;
  png_plot::figure f;
  f.title = "test";
  f.x_label = "x";
  f.y_label = "y";
  f.legend = {{point_kind::baseline, "default"}};
  png_plot::panel p;
  p.title = "one";
  p.points = {
      {5, 1, point_kind::baseline}, {3, 0.5, point_kind::chosen}, {0, 0, point_kind::invalid}};
  f.panels = {p, p};
  f.panels[1].points = {{1, 0, point_kind::other}, {100, 10, point_kind::baseline_chosen}};
  const png_plot::canvas c = png_plot::draw(f);
  CHECK(c.width() == png_plot::figure_width);
  CHECK(c.height() == png_plot::figure_height(2));
  auto count = [&](png_plot::rgb colour, int y0, int y1) {
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = 0; x < c.width(); ++x)
        n += c.get(x, y) == colour;
    return n;
  };
  const png_plot::rgb red{210, 30, 30}, green{20, 150, 40}, orange{230, 130, 0};
  const int top1 = png_plot::header_height, top2 = top1 + png_plot::panel_height;
  CHECK(count(red, top1, top2) > 0);
  CHECK(count(green, top1, top2) > 0);
  CHECK(count(orange, top1, top2) > 0);
  CHECK(count(green, top2, c.height()) > 0); // the default kept: green, ringed in red
  CHECK(count(red, top2, c.height()) > 0);
  CHECK(count(orange, top2, c.height()) == 0);
}

// ---- the report command --------------------------------------------------------------------

namespace {

// The kiln-tune of this build: this test is <build>/tests/test_tune_report, the tool
// <build>/tools/kiln-tune.
fs::path tool() {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const fs::path t = self.parent_path().parent_path() / "tools" / "kiln-tune";
  INFO("the kiln-tune binary of this build: " << t.string());
  REQUIRE(fs::exists(t));
  return t;
}

struct outcome {
  int status = -1;
  std::string output; // stdout and stderr
};

outcome kiln_tune(const std::string& arguments) {
  const std::string cmd = "'" + tool().string() + "' " + arguments + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  outcome o;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    o.output.append(buf, n);
  const int st = ::pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

kiln::jit::tune::record rec(char kind, const std::string& family, const std::string& kernel,
                            const std::string& size, const std::string& config, double median_ns,
                            const std::string& status = "ok") {
  kiln::jit::tune::record r;
  r.kind = kind;
  r.device = "vulkan 10005:0000 driver 1 uuid 00112233445566778899aabbccddeeff testpipe (LLVM "
             "15.0.6, 256 bits)";
  r.family = family;
  r.kernel = kernel;
  r.size = size;
  r.config = config;
  r.median_ns = status == "ok" ? median_ns : 0;
  r.iqr_ns = status == "ok" ? median_ns / 20 : 0;
  r.runs = status == "ok" ? 30 : 0;
  r.status = status;
  r.time = 1790000000;
  return r;
}

// The width and height an IHDR says, after checking the signature and IHDR's place.
std::pair<int, int> png_size(const fs::path& p) {
  const bytes f = read_file(p);
  INFO(p.string());
  REQUIRE(f.size() > 33);
  REQUIRE(bytes(f.begin(), f.begin() + 8) == bytes{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'});
  REQUIRE(std::string(f.begin() + 12, f.begin() + 16) == "IHDR");
  return {int(be32(f, 16)), int(be32(f, 20))};
}

std::string read_text(const fs::path& p) {
  const bytes b = read_file(p);
  return std::string(b.begin(), b.end());
}

} // namespace

TEST_CASE("kiln-tune report: README and one plot per family from a database") {
  scratch s;
  const fs::path db = s.dir / "tuning.kdb";
  {
    kiln::jit::tune::database d(db.string());
    const std::string k = "1ecd92241b13fc2e6476aad74a748b72";
    // elementwise: the default first; one faster, one wrong, the fastest chosen.
    d.append(rec('m', "elementwise", k, "20", "workgroup=64,groups=256", 1e6));
    d.append(rec('m', "elementwise", k, "20", "workgroup=32,groups=16", 8e5));
    d.append(rec('m', "elementwise", k, "20", "workgroup=128,groups=16", 0, "wrong"));
    d.append(rec('m', "elementwise", k, "20", "workgroup=256,groups=64", 5e5));
    d.append(rec('c', "elementwise", k, "20", "workgroup=256,groups=64", 4.9e5));
    // reduction, every kernel: the default kept.
    d.append(rec('m', "reduction", "*", "12x4", "workgroup=128,per_thread=4", 2e5));
    d.append(rec('m', "reduction", "*", "12x4", "workgroup=64,per_thread=8", 3e5));
    d.append(rec('m', "reduction", "*", "12x4", "workgroup=1024,per_thread=1", 0, "failed"));
    d.append(rec('c', "reduction", "*", "12x4", "workgroup=128,per_thread=4", 2.1e5));
  }
  const fs::path out = s.dir / "report" / "nested"; // made, parents included
  const outcome o = kiln_tune("report --out " + quoted(out) + " --db " + quoted(db));
  INFO(o.output);
  REQUIRE(o.status == 0);
  REQUIRE(fs::exists(out / "README.md"));
  const std::string md = read_text(out / "README.md");
  INFO(md);
  CHECK(md.find("## elementwise") != std::string::npos);
  CHECK(md.find("## reduction") != std::string::npos);
  // The summary: device short name, kernel id cut to 12, size, default, chosen, speed-up.
  CHECK(md.find("| vulkan testpipe (LLVM 15.0.6, 256 bits) | `1ecd92241b13` | 2^20 | 1000 | "
                "`workgroup=256,groups=64` | 500.0 | 2.00x | 4 (1, 0) |") != std::string::npos);
  CHECK(md.find("| `* (every kernel)` | 2^12 x 2^4 | 200.0 | `workgroup=128,per_thread=4` | "
                "200.0 | 1.00x | 3 (0, 1) |") != std::string::npos);
  // The key tables: sorted by median, the chosen and the default marked, the wrong last.
  CHECK(md.find("| 1 | **`workgroup=256,groups=64`** | 500.0 | 25.0 | 30 | ok | **chosen** |") !=
        std::string::npos);
  CHECK(md.find("| 3 | `workgroup=64,groups=256` | 1000 | 50.0 | 30 | ok | default |") !=
        std::string::npos);
  CHECK(md.find("| 4 | `workgroup=128,groups=16` | - | - | 0 | wrong |  |") != std::string::npos);
  CHECK(md.find("| 1 | **`workgroup=128,per_thread=4`** | 200.0 | 10.0 | 30 | ok | default, "
                "**chosen** |") != std::string::npos);
  CHECK(md.find("re-timed at 490.0 us") != std::string::npos);
  CHECK(md.find("ranked by median time") != std::string::npos);
  // The plots, embedded and written: one panel each.
  CHECK(md.find("](elementwise.png)") != std::string::npos);
  CHECK(md.find("](reduction.png)") != std::string::npos);
  for (const char* family : {"elementwise", "reduction"}) {
    const fs::path png = out / (std::string(family) + ".png");
    REQUIRE(fs::exists(png));
    CHECK(png_size(png) == std::pair{png_plot::figure_width, png_plot::figure_height(1)});
    const decoded d = read_png(read_file(png));
    CHECK(d.rgb.size() == std::size_t(d.width) * std::size_t(d.height) * 3);
  }
  CHECK(o.output.find("2 plots") != std::string::npos);
}

TEST_CASE("kiln-tune report: a family of more keys than a plot holds says so") {
  scratch s;
  const fs::path db = s.dir / "tuning.kdb";
  {
    kiln::jit::tune::database d(db.string());
    for (int size = 10; size < 24; ++size) // 14 keys; times spanning 50x: a log axis
      for (int wg = 32; wg <= 1024; wg *= 2)
        d.append(rec('m', "elementwise", "*", std::to_string(size),
                     "workgroup=" + std::to_string(wg) + ",groups=256",
                     1e3 * (1 << (size - 10)) * (wg == 64 ? 0.02 : 32.0 / wg)));
  }
  const fs::path out = s.dir / "out";
  const outcome o = kiln_tune("report --out " + quoted(out) + " --db " + quoted(db));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const std::string md = read_text(out / "README.md");
  CHECK(md.find("The plot shows the first 12 of the 14 keys") != std::string::npos);
  CHECK(md.find("(best so far)") != std::string::npos); // no choice recorded
  CHECK(png_size(out / "elementwise.png") ==
        std::pair{png_plot::figure_width, png_plot::figure_height(12)});
}

TEST_CASE("kiln-tune report: nothing to report or nowhere to write is an error") {
  scratch s;
  const fs::path out = s.dir / "out";
  SECTION("an empty database writes nothing") {
    const fs::path db = s.dir / "empty.kdb";
    std::ofstream(db) << kiln::jit::tune::db_header << "\n";
    const outcome o = kiln_tune("report --out " + quoted(out) + " --db " + quoted(db));
    CHECK(o.status == 1);
    CHECK(o.output.find("holds no records") != std::string::npos);
    CHECK(o.output.find("nothing written") != std::string::npos);
    CHECK(!fs::exists(out));
  }
  SECTION("a missing database writes nothing") {
    const outcome o =
        kiln_tune("report --out " + quoted(out) + " --db " + quoted(s.dir / "none.kdb"));
    CHECK(o.status == 1);
    CHECK(o.output.find("no tuning database at") != std::string::npos);
    CHECK(!fs::exists(out));
  }
  SECTION("a file that is not a database writes nothing") {
    const fs::path db = s.dir / "notes.txt";
    std::ofstream(db) << "my notes\n";
    const outcome o = kiln_tune("report --out " + quoted(out) + " --db " + quoted(db));
    CHECK(o.status == 1);
    CHECK(o.output.find("is not a kiln tuning database") != std::string::npos);
    CHECK(!fs::exists(out));
  }
  SECTION("an output folder that cannot be made") {
    const fs::path db = s.dir / "tuning.kdb";
    kiln::jit::tune::database(db.string()).append(rec('m', "host", "ab", "20", "threads=4", 1e5));
    std::ofstream(s.dir / "file") << "in the way\n";
    const outcome o =
        kiln_tune("report --out " + quoted(s.dir / "file" / "sub") + " --db " + quoted(db));
    CHECK(o.status == 1);
    CHECK(o.output.find("cannot create the folder") != std::string::npos);
  }
  SECTION("no --out is a usage error") {
    const outcome o = kiln_tune("report --db " + quoted(s.dir / "tuning.kdb"));
    CHECK(o.status == 2);
    CHECK(o.output.find("report needs --out DIR") != std::string::npos);
    CHECK(o.output.find("usage:") != std::string::npos);
  }
}

// ---- the run command -----------------------------------------------------------------------

TEST_CASE("kiln-tune run: the host family tuned at three sizes, then a second run over the same "
          "database measures nothing and says so") {
  const fs::path dir = fs::temp_directory_path() / ("kiln-tune-run-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path db = dir / "host.kdb";
  fs::remove(db);
  const outcome first = kiln_tune("run host --budget 6 --db " + quoted(db));
  INFO(first.output);
  REQUIRE(first.status == 0);
  for (const char* size : {"| host | 14 |", "| host | 18 |", "| host | 22 |"})
    CHECK(first.output.find(size) != std::string::npos);
  CHECK(first.output.find("threads=") != std::string::npos);
  const outcome second = kiln_tune("run host --budget 6 --db " + quoted(db));
  INFO(second.output);
  CHECK(second.status == 0);
  CHECK(second.output.find("nothing new to tune") != std::string::npos);
  CHECK(second.output.find("nothing was measured") != std::string::npos);
  CHECK(kiln_tune("run nosuchfamily --db " + quoted(db)).status == 2);
  fs::remove_all(dir);
}

TEST_CASE("kiln-tune run --from: the launches a program recorded are tuned under the program's "
          "kernel ids") {
  bool vulkan = false;
  for (const auto& d : kiln::devices())
    vulkan = vulkan || (d.device == kiln::device("vulkan:0") && d.available);
  if (!vulkan) {
    WARN("skipped: vulkan:0 is not available");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("kiln-tune-from-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path rec = dir / "launches.rec", db = dir / "replayed.kdb";
  fs::remove(rec);
  fs::remove(db);
  const kiln::device gpu("vulkan:0");
  kiln::tensor<float> x = kiln::random::normal<float>({32, 2048}, 5).to(gpu);
  kiln::tensor<double> h = kiln::random::normal<double>({1000}, 6);
  auto pass = [&] { return kiln::tensor<float>(kiln::cos(x) * x); };
  auto rows = [&] { return kiln::tensor<float>(kiln::max(x * 2.0f, {1})); };
  // A product with a prologue and an epilogue: one contraction kernel.
  kiln::tensor<float> w = kiln::random::normal<float>({2048, 24}, 7).to(gpu);
  kiln::tensor<float> b = kiln::random::normal<float>({24}, 8).to(gpu);
  auto product = [&] { return kiln::tensor<float>(kiln::relu(kiln::matmul(x * 0.5f, w) + b)); };
  kiln::jit::tune::launch_hook probe;
  {
    kiln::detail::hook_scope s(probe);
    (void)pass();
    (void)rows();
    (void)product();
  }
  // The pass, the reduction (and any small pass after it): each recorded once, then the host
  // pass, which is recorded but not replayable.
  REQUIRE(probe.seen.size() >= 2);
  const auto& ew = probe.seen[0];
  const auto red = std::find_if(probe.seen.begin(), probe.seen.end(),
                                [](const auto& s) { return s.sp->family() == "reduction"; });
  const auto mm = std::find_if(probe.seen.begin(), probe.seen.end(),
                               [](const auto& s) { return s.sp->family() == "matmul"; });
  REQUIRE(ew.sp->family() == "elementwise");
  REQUIRE(red != probe.seen.end());
  REQUIRE(mm != probe.seen.end());
  kiln::jit::tune::record_to(rec.string());
  (void)pass();
  (void)rows();
  (void)product();
  (void)kiln::tensor<double>(h + 1.0);
  kiln::jit::tune::record_to("");
  const outcome first =
      kiln_tune("run --from " + quoted(rec) + " --db " + quoted(db) + " --budget 8");
  INFO(first.output);
  REQUIRE(first.status == 0);
  const std::size_t n = probe.seen.size() + 1;
  CHECK(first.output.find(std::to_string(n) + " launches, 0 damaged") != std::string::npos);
  CHECK(first.output.find("skipped launch " + std::to_string(n)) != std::string::npos);
  CHECK(first.output.find("| elementwise | " + ew.kernel.substr(0, 12)) != std::string::npos);
  CHECK(first.output.find("| reduction | " + red->kernel.substr(0, 12)) != std::string::npos);
  CHECK(first.output.find("| matmul | " + mm->kernel.substr(0, 12)) != std::string::npos);
  // The choices are under the program's ids: its next launches take them.
  std::size_t chosen = 0;
  for (const auto& r : kiln::jit::tune::database(db.string()).records())
    if (r.kind == 'c')
      chosen += r.kernel == ew.kernel || r.kernel == red->kernel || r.kernel == mm->kernel;
  CHECK(chosen == 3);
  const outcome second =
      kiln_tune("run --from " + quoted(rec) + " --db " + quoted(db) + " --budget 8");
  INFO(second.output);
  CHECK(second.output.find("nothing new to tune") != std::string::npos);
  CHECK(kiln_tune("run elementwise --from " + quoted(rec)).status == 2);
  fs::remove_all(dir);
}
