#pragma once
// png_plot: just enough to draw kiln-tune's report figures without a dependency.
//   encode(w, h, rgb)   an RGB 8-bit PNG; the image data is deflate "stored" (uncompressed)
//                       blocks in a zlib stream: no zlib needed, at the price of size
//                       (3 bytes per pixel, and a row's filter byte)
//   canvas              a raster: pixels, lines, rectangles, text in a built-in 5x7 font
//                       (digits, upper-case letters, ASCII punctuation; lower case is drawn
//                       upper case)
//   figure, draw        panels stacked vertically, one series of points each, with error
//                       bars, highlighted points, ticks and numeric labels on both axes
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace png_plot {

// ---- PNG -----------------------------------------------------------------------------------

namespace detail {

// CRC-32 (ISO 3309, as PNG chunks use it): reflected polynomial 0xedb88320.
inline constexpr std::array<std::uint32_t, 256> crc_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = n;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}();

inline void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(v >> shift));
}

} // namespace detail

inline std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i)
    c = detail::crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

// Adler-32 (RFC 1950), the zlib stream's checksum of the uncompressed data.
inline std::uint32_t adler32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t a = 1, b = 0;
  while (n > 0) {
    // 5552 bytes is the most that keeps b below 2^32 before the modulo (zlib's NMAX).
    const std::size_t run = std::min<std::size_t>(n, 5552);
    for (std::size_t i = 0; i < run; ++i) {
      a += p[i];
      b += a;
    }
    a %= 65521;
    b %= 65521;
    p += run;
    n -= run;
  }
  return (b << 16) | a;
}

// The PNG file of a width x height image, rgb holding 3 bytes per pixel, rows top first.
// Throws std::invalid_argument for an empty or oversized image or a wrong buffer size.
inline std::vector<std::uint8_t> encode(int width, int height,
                                        const std::vector<std::uint8_t>& rgb) {
  // 16384 a side keeps every length below the 2^31 a chunk may hold.
  if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
    throw std::invalid_argument("png_plot::encode: the image must be 1 to 16384 pixels a side");
  const std::size_t row = std::size_t(width) * 3;
  if (rgb.size() != row * std::size_t(height))
    throw std::invalid_argument("png_plot::encode: rgb must hold width * height * 3 bytes");

  // The filtered image: each row after a filter-type byte 0 (none).
  std::vector<std::uint8_t> raw;
  raw.reserve((row + 1) * std::size_t(height));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), rgb.begin() + std::ptrdiff_t(y * row),
               rgb.begin() + std::ptrdiff_t((y + 1) * row));
  }

  // zlib: CMF 0x78 (deflate, 32 KiB window), FLG 0x01 (no dictionary; 0x7801 % 31 == 0).
  std::vector<std::uint8_t> z{0x78, 0x01};
  z.reserve(raw.size() + raw.size() / 65535 * 5 + 16);
  for (std::size_t at = 0; at < raw.size();) {
    const std::size_t len = std::min<std::size_t>(raw.size() - at, 65535);
    const bool last = at + len == raw.size();
    // BFINAL in bit 0, BTYPE 00 (stored); the rest of the byte is padding to the boundary.
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<std::uint8_t>(len & 0xff));
    z.push_back(static_cast<std::uint8_t>(len >> 8));
    z.push_back(static_cast<std::uint8_t>(~len & 0xff));
    z.push_back(static_cast<std::uint8_t>((~len >> 8) & 0xff));
    z.insert(z.end(), raw.begin() + std::ptrdiff_t(at), raw.begin() + std::ptrdiff_t(at + len));
    at += len;
  }
  detail::put_be32(z, adler32(raw.data(), raw.size()));

  std::vector<std::uint8_t> out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&](const char* type, const std::vector<std::uint8_t>& data) {
    detail::put_be32(out, static_cast<std::uint32_t>(data.size()));
    const std::size_t start = out.size(); // the CRC covers the type and the data
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    detail::put_be32(out, crc32(out.data() + start, out.size() - start));
  };
  std::vector<std::uint8_t> ihdr;
  detail::put_be32(ihdr, static_cast<std::uint32_t>(width));
  detail::put_be32(ihdr, static_cast<std::uint32_t>(height));
  // Bit depth 8, colour type 2 (RGB), compression 0, filter method 0, no interlace.
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  chunk("IHDR", ihdr);
  chunk("IDAT", z);
  chunk("IEND", {});
  return out;
}

// Writes bytes to path; false with the reason in `why` where it could not.
inline bool write_file(const std::string& path, const std::vector<std::uint8_t>& bytes,
                       std::string& why) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    why = std::strerror(errno);
    return false;
  }
  const bool wrote = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_errno = errno;
  // A full disk may only show at close, when the buffer is flushed.
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    why = std::strerror(wrote ? errno : write_errno);
    return false;
  }
  return true;
}

// ---- canvas --------------------------------------------------------------------------------

struct rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const rgb&, const rgb&) = default;
};

inline constexpr rgb white{255, 255, 255};
inline constexpr rgb black{0, 0, 0};

namespace detail {

// The 5x7 font, ASCII 32 (space) to 95 ('_'): 7 rows per glyph, top first, bit 4 the
// leftmost column.
inline constexpr std::uint8_t font[64][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // ' '
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}, // !
    {0x0a, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00}, // "
    {0x0a, 0x0a, 0x1f, 0x0a, 0x1f, 0x0a, 0x0a}, // #
    {0x04, 0x0f, 0x14, 0x0e, 0x05, 0x1e, 0x04}, // $
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, // %
    {0x0c, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0d}, // &
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, // '
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, // (
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, // )
    {0x00, 0x04, 0x15, 0x0e, 0x15, 0x04, 0x00}, // *
    {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00}, // +
    {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08}, // ,
    {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00}, // -
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c}, // .
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}, // /
    {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e}, // 0
    {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e}, // 1
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f}, // 2
    {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e}, // 3
    {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02}, // 4
    {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e}, // 5
    {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e}, // 6
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, // 7
    {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e}, // 8
    {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c}, // 9
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00}, // :
    {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x04, 0x08}, // ;
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}, // <
    {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00}, // =
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}, // >
    {0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}, // ?
    {0x0e, 0x11, 0x17, 0x15, 0x17, 0x10, 0x0f}, // @
    {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}, // A
    {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e}, // B
    {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e}, // C
    {0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c}, // D
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f}, // E
    {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10}, // F
    {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f}, // G
    {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}, // H
    {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}, // I
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c}, // J
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, // K
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f}, // L
    {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11}, // M
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, // N
    {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}, // O
    {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10}, // P
    {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d}, // Q
    {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11}, // R
    {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e}, // S
    {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, // T
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}, // U
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04}, // V
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a}, // W
    {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11}, // X
    {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04}, // Y
    {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f}, // Z
    {0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e}, // [
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00}, // backslash
    {0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e}, // ]
    {0x04, 0x0a, 0x11, 0x00, 0x00, 0x00, 0x00}, // ^
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f}, // _
};

inline const std::uint8_t* glyph(char ch) {
  int c = static_cast<unsigned char>(ch);
  if (c >= 'a' && c <= 'z') c -= 'a' - 'A';
  if (c < 32 || c > 95) c = '?';
  return font[c - 32];
}

} // namespace detail

inline constexpr int glyph_width = 5, glyph_height = 7, glyph_advance = 6;

class canvas {
public:
  canvas(int width, int height, rgb background = white)
      : w_(std::max(width, 1)), h_(std::max(height, 1)) {
    px_.resize(std::size_t(w_) * std::size_t(h_) * 3);
    fill(0, 0, w_ - 1, h_ - 1, background);
  }

  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<std::uint8_t>& pixels() const { return px_; }

  // Drawing outside the canvas is clipped, never an error: labels may run off the edge.
  void set(int x, int y, rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    std::uint8_t* p = &px_[(std::size_t(y) * std::size_t(w_) + std::size_t(x)) * 3];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  rgb get(int x, int y) const {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return {};
    const std::uint8_t* p = &px_[(std::size_t(y) * std::size_t(w_) + std::size_t(x)) * 3];
    return {p[0], p[1], p[2]};
  }

  // Bresenham's line, both ends included.
  void line(int x0, int y0, int x1, int y1, rgb c) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      set(x0, y0, c);
      if (x0 == x1 && y0 == y1) return;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }

  // The outline of the rectangle with these corners (included).
  void rect(int x0, int y0, int x1, int y1, rgb c) {
    line(x0, y0, x1, y0, c);
    line(x1, y0, x1, y1, c);
    line(x1, y1, x0, y1, c);
    line(x0, y1, x0, y0, c);
  }

  void fill(int x0, int y0, int x1, int y1, rgb c) {
    if (x0 > x1) std::swap(x0, x1);
    if (y0 > y1) std::swap(y0, y1);
    for (int y = std::max(y0, 0); y <= std::min(y1, h_ - 1); ++y)
      for (int x = std::max(x0, 0); x <= std::min(x1, w_ - 1); ++x)
        set(x, y, c);
  }

  static int text_width(std::string_view s, int scale = 1) {
    return s.empty() ? 0 : (int(s.size()) * glyph_advance - 1) * scale;
  }

  // s with its top-left corner at (x, y), each font pixel a scale x scale square; returns
  // the x just past the text.
  int text(int x, int y, std::string_view s, rgb c, int scale = 1) {
    for (char ch : s) {
      const std::uint8_t* g = detail::glyph(ch);
      for (int row = 0; row < glyph_height; ++row)
        for (int col = 0; col < glyph_width; ++col)
          if (g[row] & (0x10 >> col))
            fill(x + col * scale, y + row * scale, x + (col + 1) * scale - 1,
                 y + (row + 1) * scale - 1, c);
      x += glyph_advance * scale;
    }
    return x;
  }

  std::vector<std::uint8_t> png() const { return encode(w_, h_, px_); }

private:
  int w_, h_;
  std::vector<std::uint8_t> px_;
};

// ---- figures -------------------------------------------------------------------------------

// How a point is drawn: grey; the baseline red; the chosen green; a point that is both,
// green ringed in red; an invalid one (no value) an orange x on the bottom axis.
enum class point_kind { other, baseline, chosen, baseline_chosen, invalid };

struct point {
  double value = 0;  // where the marker is (ignored for invalid points)
  double spread = 0; // the error bar's length, centred on the value
  point_kind kind = point_kind::other;
};

struct panel {
  std::string title;
  std::vector<point> points; // left to right, evenly spaced; the x labels count from 1
};

struct figure {
  std::string title;
  std::vector<std::pair<point_kind, std::string>> legend;
  std::string note; // one line under the legend
  std::string x_label, y_label;
  std::vector<panel> panels; // stacked top to bottom
};

inline constexpr int figure_width = 640, header_height = 56, panel_height = 180;

inline int figure_height(std::size_t panels) { return header_height + int(panels) * panel_height; }

namespace detail {

inline constexpr rgb grid{232, 232, 232}, label_grey{90, 90, 90}, rule{200, 200, 200};

inline rgb marker_colour(point_kind k) {
  switch (k) {
  case point_kind::baseline:
    return {210, 30, 30};
  case point_kind::chosen:
  case point_kind::baseline_chosen:
    return {20, 150, 40};
  case point_kind::invalid:
    return {230, 130, 0};
  default:
    return {110, 110, 110};
  }
}

// The error bar a shade lighter than its marker, so that markers stand out of dense bars.
inline rgb bar_colour(point_kind k) {
  const rgb m = marker_colour(k);
  auto lighten = [](std::uint8_t v) { return static_cast<std::uint8_t>(v + (255 - v) * 2 / 5); };
  return {lighten(m.r), lighten(m.g), lighten(m.b)};
}

inline void marker(canvas& c, int x, int y, int r, point_kind k) {
  if (k == point_kind::invalid) {
    c.line(x - r, y - r, x + r, y + r, marker_colour(k));
    c.line(x - r, y + r, x + r, y - r, marker_colour(k));
    return;
  }
  c.fill(x - r, y - r, x + r, y + r, marker_colour(k));
  if (k == point_kind::baseline_chosen)
    c.rect(x - r - 1, y - r - 1, x + r + 1, y + r + 1, marker_colour(point_kind::baseline));
}

// A tick label: a short decimal, never an exponent for the times a report holds.
inline std::string number(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::max(decimals, 0), v);
  return buf;
}

struct axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<std::pair<double, std::string>> ticks;
};

// The value axis of a panel: log where its values span more than 10x, else linear; the
// bars included; ticks at 1, 2, 5 x 10^k.
inline axis value_axis(const std::vector<point>& pts) {
  axis a;
  double vmin = INFINITY, vmax = -INFINITY, lo = INFINITY, hi = -INFINITY;
  for (const point& p : pts) {
    if (p.kind == point_kind::invalid || !std::isfinite(p.value)) continue;
    const double s = std::isfinite(p.spread) ? std::max(p.spread, 0.0) / 2 : 0;
    vmin = std::min(vmin, p.value);
    vmax = std::max(vmax, p.value);
    hi = std::max(hi, p.value + s);
    // On a log axis a bar reaching 0 or below is cut at the bottom instead.
    lo = std::min(lo, p.value - s > 0 || p.value <= 0 ? p.value - s : p.value);
  }
  if (!(vmin <= vmax)) {
    a.ticks = {{0.0, "0"}, {1.0, "1"}};
    return a;
  }
  a.log = vmin > 0 && vmax / vmin > 10;
  if (a.log) {
    a.lo = lo / 1.25;
    a.hi = hi * 1.25;
    const int d0 = int(std::floor(std::log10(a.lo))), d1 = int(std::ceil(std::log10(a.hi)));
    // 1-2-5 within a few decades; decades only past that, where 1-2-5 would crowd.
    const bool dense = d1 - d0 <= 3;
    for (int d = d0; d <= d1; ++d)
      for (double m : {1.0, 2.0, 5.0}) {
        if (!dense && m != 1.0) continue;
        const double v = m * std::pow(10.0, d);
        if (v >= a.lo && v <= a.hi) a.ticks.push_back({v, number(v, std::max(0, -d))});
      }
    return a;
  }
  if (hi - lo <= 0) {
    const double pad = lo != 0 ? std::abs(lo) * 0.05 : 1;
    lo -= pad;
    hi += pad;
  }
  const double pad = (hi - lo) * 0.08;
  a.lo = vmin >= 0 ? std::max(lo - pad, 0.0) : lo - pad;
  a.hi = hi + pad;
  // The finest 1-2-5 step that gives at most 7 ticks (4 to 7, so that the grid reads).
  double step = 0;
  for (double mag = std::pow(10.0, std::floor(std::log10((a.hi - a.lo) / 10))); step == 0;
       mag *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (step == 0 && std::floor(a.hi / (m * mag)) - std::ceil(a.lo / (m * mag)) + 1 <= 7)
        step = m * mag;
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  for (double v = std::ceil(a.lo / step) * step; v <= a.hi + step * 1e-9; v += step)
    a.ticks.push_back({v, number(std::abs(v) < step * 1e-9 ? 0.0 : v, decimals)});
  return a;
}

inline void draw_panel(canvas& c, int top, const panel& p, const figure& f) {
  const int left = 62, right = figure_width - 14;
  const int ptop = top + 24, pbot = top + panel_height - 32;
  const axis a = value_axis(p.points);

  // Title left, the value axis's name right, the title cut where they would meet.
  const std::string ylab = f.y_label + (a.log ? " (LOG SCALE)" : "");
  const int ylab_x = right - canvas::text_width(ylab);
  std::string title = p.title;
  while (!title.empty() && 8 + canvas::text_width(title) > ylab_x - 12)
    title.pop_back();
  c.text(8, top + 8, title, black);
  c.text(ylab_x, top + 8, ylab, label_grey);

  auto y_of = [&](double v) {
    double t =
        a.log ? (std::log(std::max(v, a.lo)) - std::log(a.lo)) / (std::log(a.hi) - std::log(a.lo))
              : (v - a.lo) / (a.hi - a.lo);
    t = std::clamp(t, 0.0, 1.0);
    return pbot - int(std::lround(t * (pbot - ptop)));
  };

  for (const auto& [v, label] : a.ticks) {
    const int y = y_of(v);
    c.line(left + 1, y, right, y, grid);
    c.line(left - 4, y, left - 1, y, black);
    c.text(left - 7 - canvas::text_width(label), y - glyph_height / 2, label, black);
  }
  c.line(left, ptop, left, pbot, black);
  c.line(left, pbot, right, pbot, black);

  const std::size_t n = p.points.size();
  if (n == 0 || std::all_of(p.points.begin(), p.points.end(),
                            [](const point& q) { return q.kind == point_kind::invalid; })) {
    const std::string msg = "NO TIMED POINTS";
    c.text((left + right - canvas::text_width(msg)) / 2, (ptop + pbot) / 2 - 3, msg, label_grey);
  }
  const double spacing = double(right - left) / double(std::max<std::size_t>(n, 1));
  auto x_of = [&](std::size_t i) { return left + int(std::lround((double(i) + 0.5) * spacing)); };

  // x ticks at 1 and multiples of a 1-2-5 step, a label dropped where it would touch the last.
  const int label_w = canvas::text_width(std::to_string(n));
  std::size_t step = 1;
  for (std::size_t m = 1; spacing * double(step) < label_w + 6; m *= 10)
    for (std::size_t k : {1, 2, 5})
      if (spacing * double(step) < label_w + 6) step = k * m;
  int last_right = -1000;
  for (std::size_t i = 0; i < n; ++i) {
    if (i != 0 && (i + 1) % step != 0) continue;
    const std::string label = std::to_string(i + 1);
    const int x = x_of(i), w = canvas::text_width(label), lx = x - w / 2;
    c.line(x, pbot + 1, x, pbot + 3, black);
    if (lx <= last_right + 4) continue;
    c.text(lx, pbot + 6, label, black);
    last_right = lx + w;
  }
  c.text((left + right - canvas::text_width(f.x_label)) / 2, pbot + 18, f.x_label, label_grey);

  // The baseline's level, dotted across the panel: the points below it beat it.
  for (const point& q : p.points)
    if ((q.kind == point_kind::baseline || q.kind == point_kind::baseline_chosen) &&
        std::isfinite(q.value))
      for (int x = left + 2, y = y_of(q.value); x < right; x += 4)
        c.line(x, y, x + 1, y, bar_colour(point_kind::baseline));

  // Bars and markers, the highlighted ones last so that nothing covers them.
  const int r = std::clamp(int(spacing / 2) - 1, 1, 3);
  for (point_kind pass : {point_kind::other, point_kind::invalid, point_kind::baseline,
                          point_kind::chosen, point_kind::baseline_chosen})
    for (std::size_t i = 0; i < n; ++i) {
      const point& q = p.points[i];
      if (q.kind != pass) continue;
      const int x = x_of(i);
      if (q.kind == point_kind::invalid || !std::isfinite(q.value)) {
        marker(c, x, pbot - 4, std::min(r, 2), point_kind::invalid);
        continue;
      }
      const double s = std::isfinite(q.spread) ? std::max(q.spread, 0.0) / 2 : 0;
      const int y = y_of(q.value), y_hi = y_of(q.value + s), y_lo = y_of(q.value - s);
      if (y_lo - y_hi >= 2) {
        c.line(x, y_hi, x, y_lo, bar_colour(q.kind));
        c.line(x - r, y_hi, x + r, y_hi, bar_colour(q.kind));
        c.line(x - r, y_lo, x + r, y_lo, bar_colour(q.kind));
      }
      marker(c, x, y, r, q.kind);
      // A letter above the bar names the highlighted points where markers crowd.
      const char* tag = q.kind == point_kind::baseline          ? "D"
                        : q.kind == point_kind::chosen          ? "C"
                        : q.kind == point_kind::baseline_chosen ? "D=C"
                                                                : "";
      if (*tag) {
        const int ty = std::max(ptop, y_hi - r - 10);
        c.text(x - canvas::text_width(tag) / 2, ty, tag, marker_colour(q.kind));
      }
    }
  c.line(0, top + panel_height - 1, figure_width - 1, top + panel_height - 1, rule);
}

} // namespace detail

// The figure: a header (title, legend, note), then its panels stacked, each
// figure_width x panel_height.
inline canvas draw(const figure& f) {
  canvas c(figure_width, figure_height(f.panels.size()));
  c.text(8, 6, f.title, black, 2);
  int x = 8;
  for (const auto& [kind, label] : f.legend) {
    detail::marker(c, x + 3, 31, 3, kind);
    x = c.text(x + 11, 28, label, black) + 16;
  }
  c.text(8, 42, f.note, detail::label_grey);
  c.line(0, header_height - 1, figure_width - 1, header_height - 1, detail::rule);
  for (std::size_t i = 0; i < f.panels.size(); ++i)
    detail::draw_panel(c, header_height + int(i) * panel_height, f.panels[i], f);
  return c;
}

} // namespace png_plot
