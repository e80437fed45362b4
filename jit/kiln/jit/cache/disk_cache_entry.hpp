#pragma once
// One disk-cache entry file: its format, and reading and writing it safely.
//
// Layout (all integers little-endian):
//   offset  0  magic "kilnJITc"           8 bytes
//   offset  8  format version             u32
//   offset 12  identity length            u32
//   offset 16  key (lo, hi)               2 x u64
//   offset 32  payload length             u64
//   offset 40  payload checksum           u64 (hasher, low lane)
//   offset 48  identity bytes, then the payload
// A reader trusts nothing: every field is checked against the caller's key and identity
// and against the file's real size, so a corrupt, truncated or foreign file is a miss.
// A writer never exposes a partial file: it writes a unique temp name in the same folder,
// fsyncs, then renames over the final name (atomic on POSIX file systems).
#include "kiln/jit/cache/hash.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace kiln::jit::cache_entry {

inline constexpr char magic[8] = {'k', 'i', 'l', 'n', 'J', 'I', 'T', 'c'};
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::size_t header_size = 48;
inline constexpr std::string_view file_suffix = ".kc";
inline constexpr std::string_view temp_suffix = ".tmp";

inline std::uint64_t payload_checksum(std::span<const std::byte> payload) {
  return hash_of(payload).lo;
}

// The bytes before the payload: the fixed header and the identity.
inline std::vector<std::byte> encode_header(const hash128& key, std::string_view identity,
                                            std::span<const std::byte> payload) {
  std::vector<std::byte> out(header_size + identity.size());
  auto put = [&](std::size_t at, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out[at + static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
  };
  std::memcpy(out.data(), magic, sizeof magic);
  put(8, format_version, 4);
  put(12, identity.size(), 4);
  put(16, key.lo, 8);
  put(24, key.hi, 8);
  put(32, payload.size(), 8);
  put(40, payload_checksum(payload), 8);
  if (!identity.empty()) std::memcpy(out.data() + header_size, identity.data(), identity.size());
  return out;
}

struct header {
  std::uint32_t version = 0;
  std::uint32_t identity_size = 0;
  hash128 key;
  std::uint64_t payload_size = 0;
  std::uint64_t checksum = 0;
};

// nullopt when the magic is wrong; the other fields are checked by the caller.
inline std::optional<header> decode_header(std::span<const std::byte, header_size> in) {
  if (std::memcmp(in.data(), magic, sizeof magic) != 0) return std::nullopt;
  auto get = [&](std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i)
      v = (v << 8) | std::to_integer<std::uint64_t>(in[at + static_cast<std::size_t>(i)]);
    return v;
  };
  header h;
  h.version = static_cast<std::uint32_t>(get(8, 4));
  h.identity_size = static_cast<std::uint32_t>(get(12, 4));
  h.key = {get(16, 8), get(24, 8)};
  h.payload_size = get(32, 8);
  h.checksum = get(40, 8);
  return h;
}

// Closes a file descriptor on every path out.
class unique_fd {
public:
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const { return fd_; }
  // close() reports write-back errors (NFS, quota), so a writer checks it.
  bool reset() {
    if (fd_ < 0) return true;
    const int r = ::close(fd_);
    fd_ = -1;
    return r == 0;
  }

private:
  int fd_;
};

inline bool write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// False on an error or an early end of file.
inline bool pread_all(int fd, std::byte* p, std::size_t n, std::uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (r == 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
  return true;
}

// Sets a file's access and modification times to now. The explicit nanosecond clock (not
// UTIME_NOW, which the kernel rounds to its tick) keeps LRU order exact between quick
// successive uses; setting explicit times needs ownership, so fall back to "now".
inline void touch(int fd) {
  timespec now[2];
  if (::clock_gettime(CLOCK_REALTIME, &now[0]) == 0) {
    now[1] = now[0];
    if (::futimens(fd, now) == 0) return;
  }
  (void)::futimens(fd, nullptr); // best effort: a stale mtime only skews eviction order
}

enum class read_status { hit, missing, rejected };

struct read_result {
  read_status status = read_status::missing;
  std::vector<std::byte> payload;
};

// Reads and verifies the entry at path; on a hit refreshes its mtime (LRU). A file larger
// than max_file_bytes is rejected unread: no entry that big was ever written.
inline read_result read_file(const std::string& path, const hash128& key, std::string_view identity,
                             std::uint64_t max_file_bytes) {
  read_result result;
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    result.status =
        (errno == ENOENT || errno == ENOTDIR) ? read_status::missing : read_status::rejected;
    return result;
  }
  result.status = read_status::rejected;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return result;
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < header_size || file_size > max_file_bytes) return result;

  std::byte raw[header_size];
  if (!pread_all(fd.get(), raw, header_size, 0)) return result;
  const auto h = decode_header(std::span<const std::byte, header_size>(raw, header_size));
  if (!h || h->version != format_version || h->key != key || h->identity_size != identity.size())
    return result;
  const std::uint64_t body = file_size - header_size;
  if (h->identity_size > body || h->payload_size != body - h->identity_size) return result;

  std::string stored_identity(h->identity_size, '\0');
  if (!pread_all(fd.get(), reinterpret_cast<std::byte*>(stored_identity.data()),
                 stored_identity.size(), header_size) ||
      stored_identity != identity)
    return result;

  std::vector<std::byte> payload(static_cast<std::size_t>(h->payload_size));
  if (!pread_all(fd.get(), payload.data(), payload.size(), header_size + h->identity_size) ||
      payload_checksum(payload) != h->checksum)
    return result;

  touch(fd.get());
  result.status = read_status::hit;
  result.payload = std::move(payload);
  return result;
}

// A temp name no other thread, process or host uses at the same time: pid, a per-process
// counter, and a random per-process nonce (pids repeat across hosts sharing a folder).
inline std::string temp_path_for(const std::string& final_path) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t nonce = [] {
    hasher h;
    h.add(static_cast<std::int64_t>(::getpid()));
    h.add(static_cast<std::int64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    h.add(static_cast<std::int64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
    try {
      std::random_device rd;
      h.add(static_cast<std::uint32_t>(rd())).add(static_cast<std::uint32_t>(rd()));
    } catch (...) { // no entropy source: the clocks and pid still make the name unique
    }
    return h.digest().lo;
  }();
  return final_path + "." + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1, std::memory_order_relaxed)) + "-" +
         hash128{nonce, 0}.hex().substr(16) + std::string(temp_suffix);
}

struct write_result {
  bool ok = false;
  std::uint64_t bytes = 0;          // size of the file written
  std::uint64_t replaced_bytes = 0; // size of the entry it replaced, 0 if none
  std::string error;                // why it failed, for diagnostics
};

// Writes one entry atomically: temp file, fsync, rename. Creates the shard folder (and the
// cache folder, if someone removed it) when missing. Never leaves the temp file behind.
inline write_result write_file(const std::string& final_path, const hash128& key,
                               std::string_view identity, std::span<const std::byte> payload) {
  write_result result;
  const std::string temp = temp_path_for(final_path);
  auto fail = [&](const char* what) {
    result.error = std::string(what) + " " + temp + ": " + std::strerror(errno);
    return result;
  };
  constexpr int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  int raw_fd = ::open(temp.c_str(), flags, 0644);
  if (raw_fd < 0 && errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(final_path).parent_path(), ec);
    raw_fd = ::open(temp.c_str(), flags, 0644);
  }
  if (raw_fd < 0) return fail("cannot create");
  unique_fd fd(raw_fd);

  const std::vector<std::byte> head = encode_header(key, identity, payload);
  bool ok = write_all(fd.get(), head.data(), head.size()) &&
            write_all(fd.get(), payload.data(), payload.size());
  if (ok) touch(fd.get()); // a nanosecond mtime, so LRU order among quick stores is exact
  // fsync before rename: otherwise a crash can leave the final name on an empty file.
  ok = ok && ::fsync(fd.get()) == 0;
  ok = fd.reset() && ok;
  if (!ok) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    return fail("cannot write");
  }
  // The folder itself is not fsynced: a rename lost in a crash is only a miss later.
  struct stat st {};
  if (::stat(final_path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    result.replaced_bytes = static_cast<std::uint64_t>(st.st_size);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    return fail("cannot rename");
  }
  result.ok = true;
  result.bytes = head.size() + payload.size();
  return result;
}

} // namespace kiln::jit::cache_entry
