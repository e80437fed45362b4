#pragma once
// The tuning database: one text file, one record per line, append-only.
//   kiln-tune-db 1
//   <checksum> m <device> <family> <kernel> <size> <config> <median> <iqr> <runs> <status> <time>
//   <checksum> c <device> <family> <kernel> <size> <config> ...  (the config chosen for the key)
// Fields are tab-separated; the checksum is 16 hex digits of the hash of the rest of the line.
// A record is appended with one write() on a file opened O_APPEND, under an exclusive
// flock, so two processes tuning into one file interleave whole lines; a writer killed
// mid-line leaves a line whose checksum fails, which readers skip and the next writer ends
// with a newline before its own. A file that does not begin with the header is foreign:
// reading it finds nothing, writing to it is a kiln::error (it is not ours to append to); a
// file shorter than the header is foreign too unless it is the header's beginning.
// `m` records are every measured configuration (a killed tuning run resumes from them, and
// reports plot them); `c` records are what evaluation reads: the latest for a key wins.
#include "kiln/error.hpp"
#include "kiln/jit/cache/disk_cache_entry.hpp"
#include "kiln/jit/cache/hash.hpp"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace kiln::jit::tune {

inline constexpr std::string_view db_header = "kiln-tune-db 1";

struct record {
  char kind = 'm';    // 'm': a measured configuration; 'c': the one chosen for its key
  std::string device; // the device's identity (vendor, name, driver, UUID)
  std::string family; // elementwise, reduction, host
  std::string kernel; // the kernel's hash, or "*" for every kernel of the family
  std::string size;   // the size bucket (space.hpp format_bucket)
  std::string config; // space::format
  double median_ns = 0;
  double iqr_ns = 0;
  std::int64_t runs = 0;
  std::string status = "ok"; // ok; wrong (its output differed from the default's); failed
  std::int64_t time = 0;     // seconds since the epoch

  // Whether r is about the same key (device, family, kernel, size).
  bool same_key(const record& r) const {
    return device == r.device && family == r.family && kernel == r.kernel && size == r.size;
  }
};

namespace detail {

// A field as the file holds it: no tab, newline or carriage return (device names are free
// text), never empty.
inline std::string field(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return out.empty() ? "-" : out;
}

// Numbers as the file holds them, whatever locale the program set (printf, strtod and
// iostreams would follow a ',' decimal point): std::to_chars, the shortest text that reads
// back to the same double.
inline std::string number(double x) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}
// With `digits` significant digits (progress lines), as %.*g would write it in "C".
inline std::string number(double x, int digits) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general, digits);
  return std::string(buf, res.ptr);
}
inline std::string number(std::int64_t x) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

inline std::string checksum(std::string_view body) { return hash_of(body).hex().substr(0, 16); }

// A checksummed line (the database's records, record.hpp's launches): 16 hex digits of the
// body's hash, a tab, the body.
inline std::string checked_line(std::string_view body) {
  return checksum(body) + "\t" + std::string(body);
}
// The body of a checked line; nullopt for a line that is damaged in any way.
inline std::optional<std::string_view> checked_body(std::string_view line) {
  if (line.size() < 18 || line[16] != '\t') return std::nullopt;
  const std::string_view body = line.substr(17);
  if (checksum(body) != line.substr(0, 16)) return std::nullopt;
  return body;
}

// Appends `line` (newline included) to the file at `path` with one write() on a file opened
// O_APPEND, under an exclusive flock, so processes appending at once interleave whole lines;
// a line left unfinished by a killed writer is ended first. With a `header`, a new or empty
// file gets it as its first line, and a file that does not begin with it is not written to.
// `fail(reason, details)` reports (and must throw).
template <class Fail>
void append_line(const std::string& path, std::string_view header, const std::string& line,
                 Fail&& fail) {
  cache_entry::unique_fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail("cannot open it for writing", std::strerror(errno));
  while (::flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) fail("cannot lock it", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot stat it", std::strerror(errno));
  std::string out;
  if (st.st_size == 0) {
    if (!header.empty()) out = std::string(header) + "\n";
  } else {
    cache_entry::unique_fd rd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (rd.get() < 0) fail("cannot read it", std::strerror(errno));
    if (!header.empty()) { // what is there must be ours
      std::string head(header.size() + 1, '\0');
      if (!cache_entry::pread_all(rd.get(), reinterpret_cast<std::byte*>(head.data()),
                                  std::min<std::size_t>(head.size(), std::size_t(st.st_size)), 0) ||
          head != std::string(header) + "\n")
        fail("is not a kiln tuning database (its first line is not \"" + std::string(header) +
                 "\")",
             "nothing was written to it");
    }
    char last = '\n';
    if (!cache_entry::pread_all(rd.get(), reinterpret_cast<std::byte*>(&last), 1,
                                std::uint64_t(st.st_size - 1)))
      fail("cannot read it", std::strerror(errno));
    if (last != '\n') out = "\n";
  }
  out += line;
  if (!cache_entry::write_all(fd.get(), reinterpret_cast<const std::byte*>(out.data()), out.size()))
    fail("cannot append a record", std::strerror(errno));
  if (!fd.reset()) fail("cannot close it after writing", std::strerror(errno));
}

inline std::vector<std::string_view> split_tabs(std::string_view s) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto t = s.find('\t');
    out.push_back(s.substr(0, t));
    if (t == std::string_view::npos) return out;
    s = s.substr(t + 1);
  }
}

// The whole of s as a number (std::from_chars: no locale, no leading '+' or spaces).
template <class T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty() || s.size() > 40) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

} // namespace detail

// The record's line, newline excluded.
inline std::string encode(const record& r) {
  using detail::field;
  std::string body = std::string(1, r.kind) + "\t" + field(r.device) + "\t" + field(r.family) +
                     "\t" + field(r.kernel) + "\t" + field(r.size) + "\t" + field(r.config) + "\t" +
                     detail::number(r.median_ns) + "\t" + detail::number(r.iqr_ns) + "\t" +
                     detail::number(r.runs) + "\t" + field(r.status) + "\t" +
                     detail::number(r.time);
  return detail::checked_line(body);
}

// A line back into a record; nullopt for a line that is damaged in any way.
inline std::optional<record> decode(std::string_view line) {
  const auto body = detail::checked_body(line);
  if (!body) return std::nullopt;
  const auto f = detail::split_tabs(*body);
  if (f.size() != 11 || f[0].size() != 1 || (f[0][0] != 'm' && f[0][0] != 'c')) return std::nullopt;
  record r;
  r.kind = f[0][0];
  r.device = f[1];
  r.family = f[2];
  r.kernel = f[3];
  r.size = f[4];
  r.config = f[5];
  r.status = f[9];
  if (!detail::parse_number(f[6], r.median_ns) || !detail::parse_number(f[7], r.iqr_ns) ||
      !detail::parse_number(f[8], r.runs) || !detail::parse_number(f[10], r.time))
    return std::nullopt;
  return r;
}

// One database file. Reads are incremental (the file only grows): records() parses what
// was appended since the last call, by this process or another.
class database {
public:
  explicit database(std::string path) : path_(std::move(path)) {}
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  const std::string& path() const { return path_; }

  struct load_stats {
    std::size_t records = 0;
    std::size_t rejected = 0; // damaged lines skipped
    bool foreign = false;     // the file is not a tuning database
    bool missing = true;      // no file yet
  };

  // Every valid record, oldest first, re-read where the file grew; a damaged line is
  // skipped, a foreign or unreadable file holds none. Never throws for the file's content.
  std::vector<record> records() {
    std::lock_guard lock(mutex_);
    refresh();
    return records_;
  }
  load_stats stats() {
    std::lock_guard lock(mutex_);
    refresh();
    return stats_;
  }
  // Bumped whenever records() finds new records: memoized choices compare it.
  std::uint64_t generation() {
    std::lock_guard lock(mutex_);
    refresh();
    return generation_;
  }

  // Appends r (one line, one write, under an exclusive lock; the header first into a new
  // or empty file). A foreign file or a failed write is a kiln::error naming the file.
  void append(const record& r) {
    detail::append_line(
        path_, db_header, encode(r) + "\n",
        [this](const std::string& reason, const std::string& details) { fail(reason, details); });
  }

private:
  [[noreturn]] void fail(const std::string& reason, const std::string& details) const {
    throw error("KILN_TUNE_DB", "the tuning database " + path_ + " " + reason, details);
  }

  // Parses what the file gained since the last call (all of it if it shrank or changed).
  void refresh() {
    cache_entry::unique_fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
      if (!stats_.missing) reset_state();
      return;
    }
    const auto size = std::uint64_t(st.st_size);
    if (size < read_ || st.st_ino != inode_) reset_state();
    inode_ = st.st_ino;
    stats_.missing = false;
    if (size == read_ || stats_.foreign) return;
    std::string text(size - read_, '\0');
    if (!cache_entry::pread_all(fd.get(), reinterpret_cast<std::byte*>(text.data()), text.size(),
                                read_))
      return; // read again next time
    std::size_t at = 0;
    if (read_ == 0) {
      // Shorter than the header: a header still being written only where it is the
      // header's beginning; anything else ("abcd") is someone else's file.
      const std::string header = std::string(db_header) + "\n";
      const std::size_t n = std::min(text.size(), header.size());
      if (text.compare(0, n, header, 0, n) != 0) {
        stats_.foreign = true;
        return;
      }
      if (text.size() < header.size()) return;
      at = header.size();
    }
    const std::size_t before = records_.size();
    for (;;) {
      const auto nl = text.find('\n', at);
      if (nl == std::string::npos) break; // a line not finished yet: next time
      if (auto r = decode(std::string_view(text).substr(at, nl - at)))
        records_.push_back(std::move(*r));
      else if (nl > at)
        ++stats_.rejected;
      at = nl + 1;
    }
    read_ += at;
    stats_.records = records_.size();
    if (records_.size() != before) ++generation_;
  }

  void reset_state() {
    records_.clear();
    stats_ = {};
    read_ = 0;
    inode_ = 0;
    ++generation_;
  }

  std::string path_;
  std::mutex mutex_;
  std::vector<record> records_;
  load_stats stats_;
  std::uint64_t read_ = 0;
  ino_t inode_ = 0;
  std::uint64_t generation_ = 1;
};

} // namespace kiln::jit::tune
