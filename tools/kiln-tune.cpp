// kiln-tune: the tuning database from the command line (README, "Tuning kernels").
//   kiln-tune list [--device D]            the families and their parameter spaces on D
//   kiln-tune run [--device D] [--budget SECONDS] [--db PATH] [--force] [FAMILY...]
//                                          tune each family's representative kernel at
//                                          three sizes, as the family's choice for every
//                                          kernel ("*"); a progress line, then a table
//   kiln-tune run --from RECORD [--device D] [--budget SECONDS] [--db PATH] [--force]
//                                          tune the launches a program recorded
//                                          (KILN_TUNE_RECORD), each as its own kernel
//   kiln-tune show [--db PATH]             what the database holds
//   kiln-tune report --out DIR [--db PATH]
//                                          DIR/README.md: per family a summary (default,
//                                          chosen, speed-up per key) and every measured
//                                          configuration of each key; DIR/<family>.png
//                                          plots them (png_plot.hpp: no image library)
// The device defaults to KILN_DEVICE where that is a device, else vulkan:0; the database
// to KILN_TUNE_DB (or tuning.kdb in the kernel cache's folder).
#include "png_plot.hpp"

#include <kiln/jit/tune.hpp>
#include <kiln/jit/tune/replay.hpp>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

namespace {

struct args {
  std::string command;
  std::string device;
  std::string db;
  std::string from; // a record of launches (KILN_TUNE_RECORD)
  std::string out;
  double budget = 120;
  bool force = false;
  std::vector<std::string> families;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kiln-tune: %s\n"
               "usage: kiln-tune list [--device D]\n"
               "       kiln-tune run [--device D] [--budget SECONDS] [--db PATH] [--force] "
               "[FAMILY...]\n"
               "       kiln-tune run --from RECORD [--device D] [--budget SECONDS] [--db PATH] "
               "[--force]\n"
               "       kiln-tune show [--db PATH]\n"
               "       kiln-tune report --out DIR [--db PATH]\n",
               why.c_str());
  std::exit(2);
}

args parse(int argc, char** argv) {
  if (argc < 2) usage("no command");
  args a;
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage(s + " needs a value");
      return std::string(argv[++i]);
    };
    if (s == "--device")
      a.device = value();
    else if (s == "--db")
      a.db = value();
    else if (s == "--from")
      a.from = value();
    else if (s == "--out")
      a.out = value();
    else if (s == "--budget") {
      const std::string v = value();
      char* end = nullptr;
      a.budget = std::strtod(v.c_str(), &end);
      if (end != v.c_str() + v.size() || !(a.budget > 0)) usage("--budget takes seconds > 0");
    } else if (s == "--force")
      a.force = true;
    else if (!s.empty() && s[0] == '-')
      usage("unknown option " + s);
    else
      a.families.push_back(s);
  }
  return a;
}

// --db, else KILN_TUNE_DB's (or the default) database; none is a usage error.
std::string database_of(const args& a) {
  const std::string db = a.db.empty() ? kiln::jit::tune::database_path() : a.db;
  if (db.empty()) usage("no database: give --db or set KILN_TUNE_DB");
  return db;
}

kiln::device pick_device(const std::string& name) {
  if (!name.empty()) return kiln::device(name);
  const kiln::device d = kiln::default_device();
  return d.kind() == kiln::device_kind::host ? kiln::device("vulkan:0") : d;
}

kiln::jit::jit_backend& backend_of(const kiln::device& d) {
  auto* be = dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(d).get());
  if (!be) throw kiln::error("kiln-tune", "the device has no tunable kernels", d.str());
  return *be;
}

void print_space(const kiln::jit::tune::space& sp) {
  std::printf("%s (%zu legal configurations)\n", sp.family().c_str(), sp.legal().size());
  int width = 0; // the longest name's: the columns line up
  for (const auto& p : sp.params())
    width = std::max(width, static_cast<int>(p.name.size()));
  for (const auto& p : sp.params()) {
    std::string vs;
    for (auto v : p.values)
      vs += (vs.empty() ? "" : " ") + std::to_string(v);
    std::printf("  %-*s default %-6lld values {%s}\n    %s\n", width, p.name.c_str(),
                static_cast<long long>(p.fallback), vs.c_str(), p.meaning.c_str());
  }
}

int list(const args& a) {
  const kiln::device d = pick_device(a.device);
  auto& be = backend_of(d);
  std::printf("device %s: %s\n\n", d.str().c_str(), be.tuning_identity().c_str());
  print_space(be.elementwise_space());
  std::printf("\n");
  print_space(be.reduction_space());
  std::printf("\n");
  print_space(be.matmul_space(true, be.has_gemm_provider() ? 0 : -1));
  std::printf("\nhost: %s\n\n", kiln::jit::tune::host_identity().c_str());
  print_space(kiln::jit::tune::host_tuning_space());
  std::printf("\n");
  print_space(kiln::jit::tune::host_gemm_tuning_space());
  return 0;
}

// The progress line: rewritten in place on a terminal, one line each otherwise.
void progress(const std::string& what, const std::string& line) {
  static const bool tty = ::isatty(2);
  std::fprintf(stderr, tty ? "\r\033[K%s %s" : "%s %s\n", what.c_str(), line.c_str());
  std::fflush(stderr);
}

// The launches a program recorded (KILN_TUNE_RECORD), each tuned as that kernel at that size.
int run_from(const args& a) {
  const std::string db = database_of(a);
  const auto rec = kiln::jit::tune::read_record_file(a.from);
  std::printf("record %s: %zu launches, %zu damaged lines skipped\n", a.from.c_str(),
              rec.bodies.size(), rec.damaged);
  std::size_t fresh = 0, done = 0, skipped = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("| family | kernel | size (log2) | default | default us | chosen | chosen us | "
              "speed-up | measured | seconds |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t j = 0; j < rec.bodies.size(); ++j) {
    std::unique_ptr<kiln::jit::tune::replayed> rp;
    try {
      rp = std::make_unique<kiln::jit::tune::replayed>(rec.bodies[j], a.device);
    } catch (const kiln::error& e) {
      std::fprintf(stderr, "skipped launch %zu: %s\n", j + 1, e.what());
      ++skipped;
      continue;
    }
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kiln::tune_options o;
    o.db = db;
    o.force = a.force;
    o.budget_seconds = std::max(1.0, (a.budget - spent) / double(rec.bodies.size() - j));
    const std::string what = rp->kind + " " + rp->kernel.substr(0, 12) + " 2^" + rp->bucket + " [" +
                             std::to_string(j + 1) + "/" + std::to_string(rec.bodies.size()) + "]";
    o.progress = [&](const std::string& line) { progress(what, line); };
    auto f = [&rp] {
      rp->run();
      return kiln::jit::tune::replay_output{rp.get()};
    };
    const kiln::tune_report rep = kiln::tune(f, o);
    if (::isatty(2)) std::fprintf(stderr, "\n");
    ++done;
    if (rep.result.already_tuned) {
      std::printf("| %s | %.12s | %s | | | %s | %.1f | (already tuned) | 0 | |\n",
                  rep.family.c_str(), rep.kernel.c_str(), rep.size.c_str(), rep.chosen.c_str(),
                  rep.result.chosen_ns / 1e3);
      continue;
    }
    ++fresh;
    std::printf("| %s | %.12s | %s | %s | %.1f | %s | %.1f | %.2fx | %zu | %.1f |\n",
                rep.family.c_str(), rep.kernel.c_str(), rep.size.c_str(), rep.fallback.c_str(),
                rep.result.default_ns / 1e3, rep.chosen.c_str(), rep.result.chosen_ns / 1e3,
                rep.result.default_ns / rep.result.chosen_ns, rep.result.measured,
                rep.result.seconds);
  }
  if (fresh == 0 && done > 0)
    std::printf("nothing new to tune: all %zu recorded kernels and sizes already have a choice "
                "in the database, nothing was measured (--force tunes them again)\n",
                done);
  if (skipped) std::printf("%zu recorded launches could not be replayed (see above)\n", skipped);
  return done == 0 && skipped > 0 ? 1 : 0;
}

int run(const args& a) {
  if (!a.from.empty()) {
    if (!a.families.empty()) usage("--from tunes the recorded launches: give no families");
    return run_from(a);
  }
  std::vector<std::string> families = a.families;
  if (families.empty()) families = {"elementwise", "reduction", "host", "host_matmul"};
  bool on_device = false;
  for (const auto& f : families) {
    if (f != "elementwise" && f != "reduction" && f != "host" && f != "host_matmul")
      usage("unknown family " + f + " (kiln-tune list names them)");
    on_device = on_device || (f != "host" && f != "host_matmul");
  }
  // The host family runs on the host whatever the device.
  const kiln::device d = on_device ? pick_device(a.device) : kiln::device("host");
  const std::string identity =
      on_device ? backend_of(d).tuning_identity() : kiln::jit::tune::host_identity();
  const std::string db = database_of(a);
  // Representative kernels at three sizes each (elements; rows x columns reduced).
  struct job {
    std::string family;
    std::int64_t rows, cols;
  };
  std::vector<job> jobs;
  for (const auto& f : families) {
    if (f == "elementwise" || f == "host")
      for (std::int64_t n : {1 << 14, 1 << 18, 1 << 22})
        jobs.push_back({f, 1, n});
    else if (f == "host_matmul") // square f32 products, n x n by n x n
      for (std::int64_t n : {96, 384, 1536})
        jobs.push_back({f, n, n});
    else
      for (auto [r, c] :
           {std::pair<std::int64_t, std::int64_t>{4096, 16}, {256, 4096}, {1, 1 << 22}})
        jobs.push_back({f, r, c});
  }
  struct row {
    std::string family, size, fallback, chosen;
    kiln::jit::tune::search_result r;
  };
  std::vector<row> rows;
  std::size_t fresh = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kiln::tune_options o;
    o.db = db;
    o.family = true;
    o.force = a.force;
    o.budget_seconds = std::max(1.0, (a.budget - spent) / double(jobs.size() - j));
    const job& jb = jobs[j];
    const std::string what = jb.family + " " + std::to_string(jb.rows) + "x" +
                             std::to_string(jb.cols) + " [" + std::to_string(j + 1) + "/" +
                             std::to_string(jobs.size()) + "]";
    o.progress = [&](const std::string& line) { progress(what, line); };
    const bool host = jb.family == "host" || jb.family == "host_matmul";
    const kiln::device on = host ? kiln::device("host") : d;
    kiln::tensor<float> x = kiln::random::normal<float>({jb.rows, jb.cols}, 1).to(on);
    kiln::tensor<float> y = kiln::random::normal<float>({jb.rows, jb.cols}, 2).to(on);
    kiln::tune_report rep =
        jb.family == "host_matmul"
            ? kiln::tune([&] { return kiln::tensor<float>(kiln::matmul(x, y)); }, o)
        : jb.family != "reduction"
            ? kiln::tune([&] { return kiln::tensor<float>(x * y + kiln::sin(x)); }, o)
            : kiln::tune([&] { return kiln::tensor<float>(kiln::sum(x * y, {1})); }, o);
    if (!rep.result.already_tuned) ++fresh;
    rows.push_back({rep.family, rep.size, rep.fallback, rep.chosen, rep.result});
  }
  if (::isatty(2)) std::fprintf(stderr, "\n");
  std::printf("device %s (%s), database %s\n\n", d.str().c_str(), identity.c_str(), db.c_str());
  if (fresh == 0) {
    std::printf("nothing new to tune: all %zu kernels and sizes already have a choice in the "
                "database, nothing was measured (--force tunes them again)\n",
                rows.size());
    return 0;
  }
  std::printf("| family | size (log2) | default | default us | chosen | chosen us | speed-up | "
              "measured | resumed | rejected | seconds |\n|---|---|---|---|---|---|---|---|---|---"
              "|---|\n");
  for (const auto& r : rows) {
    if (r.r.already_tuned) {
      std::printf("| %s | %s | | | %s | %.1f | (already tuned) | 0 | | | |\n", r.family.c_str(),
                  r.size.c_str(), r.chosen.c_str(), r.r.chosen_ns / 1e3);
      continue;
    }
    std::printf("| %s | %s | %s | %.1f | %s | %.1f | %.2fx | %zu | %zu | %zu | %.1f |\n",
                r.family.c_str(), r.size.c_str(), r.fallback.c_str(), r.r.default_ns / 1e3,
                r.chosen.c_str(), r.r.chosen_ns / 1e3, r.r.default_ns / r.r.chosen_ns, r.r.measured,
                r.r.resumed, r.r.rejected, r.r.seconds);
  }
  return 0;
}

int show(const args& a) {
  const std::string path = database_of(a);
  kiln::jit::tune::database db(path);
  const auto rs = db.records();
  const auto st = db.stats();
  std::printf("database %s: %s%zu records, %zu damaged lines skipped\n", path.c_str(),
              st.missing   ? "(no file) "
              : st.foreign ? "(not a kiln tuning database) "
                           : "",
              rs.size(), st.rejected);
  // Per key: measured configurations, the best of them, and the choice.
  struct key_info {
    std::size_t measured = 0, wrong = 0, failed = 0;
    const kiln::jit::tune::record* best = nullptr;
    const kiln::jit::tune::record* chosen = nullptr;
  };
  std::map<std::string, key_info> keys;
  for (const auto& r : rs) {
    auto& k = keys[r.device + "\n" + r.family + "\t" + r.kernel + "\t" + r.size];
    if (r.kind == 'c') {
      k.chosen = &r;
      continue;
    }
    ++k.measured;
    k.wrong += r.status == "wrong";
    k.failed += r.status == "failed";
    if (r.status == "ok" && (!k.best || r.median_ns < k.best->median_ns)) k.best = &r;
  }
  std::string device;
  for (const auto& [key, k] : keys) {
    const auto nl = key.find('\n');
    if (key.substr(0, nl) != device) {
      device = key.substr(0, nl);
      std::printf("\n%s\n  family       kernel        size  measured (wrong, failed)  chosen\n",
                  device.c_str());
    }
    const auto* r = k.chosen ? k.chosen : k.best;
    if (!r) continue;
    std::printf("  %-12s %-12.12s  2^%-4s %4zu (%zu, %zu)  %s %s %.1f us\n", r->family.c_str(),
                r->kernel.c_str(), r->size.c_str(), k.measured, k.wrong, k.failed,
                k.chosen ? r->config.c_str() : "(not chosen yet; best so far)",
                k.chosen ? "" : r->config.c_str(), r->median_ns / 1e3);
  }
  return 0;
}

// ---- report --------------------------------------------------------------------------------

[[gnu::format(printf, 1, 2)]] std::string strf(const char* fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? std::size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, again);
  va_end(again);
  return s;
}

// Microseconds with the digits a timing has (a few significant ones).
std::string micros(double ns) {
  if (!std::isfinite(ns)) return "-";
  const double us = ns / 1e3;
  if (us < 10) return strf("%.2f", us);
  if (us < 1000) return strf("%.1f", us);
  return strf("%.0f", us);
}

// Free text in a markdown table cell: a '|' would end the cell.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The device identity shortened for tables and plots: the backend and the device's name,
// the ids between them left out (vulkan: "vulkan <ids> uuid <hex> <name>", cuda:
// "cuda sm_<cc> driver <n> NVRTC <x.y> <name>"); README's device table has them whole.
std::string short_device(const std::string& id) {
  std::string name;
  for (std::string_view marker : {" uuid ", " NVRTC "}) {
    const auto at = id.find(marker);
    if (at == std::string::npos) continue;
    const auto end = id.find(' ', at + marker.size());
    if (end != std::string::npos) name = id.substr(0, id.find(' ')) + " " + id.substr(end + 1);
  }
  if (name.empty()) name = id;
  return name.size() > 40 ? name.substr(0, 37) + "..." : name;
}

// "20" -> "2^20"; "12x4" -> "2^12 x 2^4" (a bucket per dimension).
std::string size_label(const std::string& bucket) {
  std::string out = "2^";
  for (char c : bucket)
    out += c == 'x' ? std::string(" x 2^") : std::string(1, c);
  return out;
}

std::string kernel_label(const std::string& kernel) {
  return kernel == "*" ? std::string("* (every kernel)") : kernel.substr(0, 12);
}

// A family's name as a file name.
std::string file_stem(const std::string& family) {
  std::string s = family;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return s;
}

using kiln::jit::tune::record;

// One key (device, family, kernel, size) and what the database holds for it.
struct key_view {
  std::vector<const record*> measured;       // 'm' records in file order: the default first
  const record* choice = nullptr;            // the latest 'c' record that is ok
  std::vector<const record*> ranked;         // ok ones by median, then wrong and failed ones
  std::string default_config, chosen_config; // chosen: the choice, else the best so far
  const record* chosen_row = nullptr;        // the measurement of the chosen config
  double default_ns = NAN, chosen_ns = NAN;
  std::size_t wrong = 0, failed = 0;

  const record& any() const { return measured.empty() ? *choice : *measured.front(); }

  void finish() {
    ranked = measured;
    std::stable_sort(ranked.begin(), ranked.end(), [](const record* a, const record* b) {
      const bool oa = a->status == "ok", ob = b->status == "ok";
      return oa != ob ? oa : oa && a->median_ns < b->median_ns;
    });
    for (const record* r : measured) {
      wrong += r->status == "wrong";
      failed += r->status == "failed";
    }
    if (!measured.empty()) default_config = measured.front()->config;
    if (!measured.empty() && measured.front()->status == "ok")
      default_ns = measured.front()->median_ns;
    if (choice)
      chosen_config = choice->config;
    else if (!ranked.empty() && ranked.front()->status == "ok")
      chosen_config = ranked.front()->config;
    for (const record* r : ranked) // the fastest measurement of the chosen config
      if (r->status == "ok" && r->config == chosen_config) {
        chosen_row = r;
        break;
      }
    // The summary compares like with like: both from the measurements in the key's table.
    chosen_ns = chosen_row ? chosen_row->median_ns : choice ? choice->median_ns : NAN;
  }
  bool is_default(const record& r) const { return r.config == default_config; }
  bool is_chosen(const record& r) const { return r.status == "ok" && r.config == chosen_config; }
};

inline constexpr std::size_t max_panels = 12;

png_plot::figure family_figure(const std::string& family, const std::vector<key_view>& keys) {
  using png_plot::point_kind;
  png_plot::figure f;
  std::size_t with_points = 0;
  for (const auto& k : keys)
    with_points += !k.measured.empty();
  f.title = "KILN-TUNE: " + family;
  if (with_points > max_panels)
    f.title += strf(" (FIRST %zu OF %zu KEYS)", max_panels, with_points);
  f.legend = {{point_kind::baseline, "DEFAULT"},
              {point_kind::chosen, "CHOSEN (OR BEST SO FAR)"},
              {point_kind::baseline_chosen, "DEFAULT = CHOSEN"},
              {point_kind::other, "OTHER"},
              {point_kind::invalid, "WRONG OR FAILED"}};
  f.note = "ONE PANEL PER KEY. X: CONFIGURATIONS RANKED BY MEDIAN, FASTEST FIRST. BAR: IQR";
  f.x_label = "CONFIGURATION (RANK)";
  f.y_label = "MEDIAN US";
  for (const auto& k : keys) {
    if (k.measured.empty()) continue;
    if (f.panels.size() == max_panels) break;
    const record& r = k.any();
    png_plot::panel p;
    p.title = short_device(r.device) + "  KERNEL " +
              (r.kernel == "*" ? "*" : r.kernel.substr(0, 12)) + "  SIZE " + size_label(r.size);
    for (const record* m : k.ranked) {
      png_plot::point pt;
      pt.value = m->median_ns / 1e3;
      pt.spread = m->iqr_ns / 1e3;
      const bool d = k.is_default(*m), c = k.is_chosen(*m);
      pt.kind = m->status != "ok" ? point_kind::invalid
                : d && c          ? point_kind::baseline_chosen
                : d               ? point_kind::baseline
                : c               ? point_kind::chosen
                                  : point_kind::other;
      p.points.push_back(pt);
    }
    f.panels.push_back(std::move(p));
  }
  return f;
}

int report(const args& a) {
  namespace fs = std::filesystem;
  if (a.out.empty()) usage("report needs --out DIR");
  if (!a.families.empty()) usage("report takes no families: it reports all of them");
  const std::string path = database_of(a);
  kiln::jit::tune::database db(path);
  const std::vector<record> rs = db.records();
  const auto st = db.stats();
  // Nothing to report writes nothing: an empty report would look like a successful run.
  if (st.missing) {
    std::fprintf(stderr,
                 "kiln-tune: no tuning database at %s (or it cannot be read): nothing to "
                 "report, nothing written\n",
                 path.c_str());
    return 1;
  }
  // The database takes a file shorter than its header for a header still being written
  // (so it holds no records): here its first bytes tell such a file from an empty database.
  bool foreign = st.foreign;
  if (!foreign && rs.empty()) {
    const std::string header = std::string(kiln::jit::tune::db_header) + "\n";
    std::ifstream in(path, std::ios::binary);
    std::string head(header.size(), '\0');
    in.read(head.data(), std::streamsize(head.size()));
    head.resize(std::size_t(std::max<std::streamsize>(in.gcount(), 0)));
    foreign = header.compare(0, head.size(), head) != 0;
  }
  if (foreign) {
    std::fprintf(stderr,
                 "kiln-tune: %s is not a kiln tuning database (its first line is not \"%s\"): "
                 "nothing written\n",
                 path.c_str(), std::string(kiln::jit::tune::db_header).c_str());
    return 1;
  }
  if (rs.empty()) {
    std::fprintf(stderr,
                 "kiln-tune: the tuning database %s holds no records (%zu damaged lines "
                 "skipped): nothing to report, nothing written\n",
                 path.c_str(), st.rejected);
    return 1;
  }

  // Families and their keys in the order first seen (the order they were tuned in).
  std::vector<std::string> families;
  std::map<std::string, std::vector<key_view>> by_family;
  std::map<std::string, std::pair<std::string, std::size_t>> key_at;
  std::vector<std::string> devices;
  std::size_t measured = 0, choices = 0;
  for (const record& r : rs) {
    if (std::find(devices.begin(), devices.end(), r.device) == devices.end())
      devices.push_back(r.device);
    const std::string id = r.device + "\t" + r.family + "\t" + r.kernel + "\t" + r.size;
    auto it = key_at.find(id);
    if (it == key_at.end()) {
      if (!by_family.count(r.family)) families.push_back(r.family);
      auto& ks = by_family[r.family];
      ks.emplace_back();
      it = key_at.emplace(id, std::pair{r.family, ks.size() - 1}).first;
    }
    key_view& k = by_family[it->second.first][it->second.second];
    if (r.kind == 'c') {
      ++choices;
      if (r.status == "ok") k.choice = &r; // the latest wins, as evaluation reads it
    } else {
      ++measured;
      k.measured.push_back(&r);
    }
  }
  for (auto& [f, ks] : by_family)
    for (auto& k : ks)
      k.finish();
  // Short device names, made unique where two identities shorten alike.
  std::map<std::string, std::string> short_name;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    std::string s = short_device(devices[i]);
    for (std::size_t j = 0; j < i; ++j)
      if (short_name[devices[j]] == s) s += strf(" [%zu]", i + 1);
    short_name[devices[i]] = s;
  }

  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec || !fs::is_directory(a.out)) {
    std::fprintf(stderr, "kiln-tune: cannot create the folder %s: %s\n", a.out.c_str(),
                 ec ? ec.message().c_str() : "a file of that name is in the way");
    return 1;
  }
  auto write = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    const std::string file = (fs::path(a.out) / name).string();
    std::string why;
    if (png_plot::write_file(file, bytes, why)) return true;
    std::fprintf(stderr, "kiln-tune: cannot write %s: %s\n", file.c_str(), why.c_str());
    return false;
  };

  std::string md = "# Tuning report\n\n";
  md += strf("From the tuning database `%s`: %zu records, %zu measured configurations and %zu "
             "choices, %zu damaged lines skipped. Written by `kiln-tune report`.\n\n",
             path.c_str(), rs.size(), measured, choices, st.rejected);
  md += "Times are microseconds: the median of a configuration's runs, and the interquartile "
        "range (IQR) of those runs. A key is a device, a kernel family, a kernel (its id, or "
        "`*`: the family's choice for every kernel) and a size bucket (log2 of the elements, "
        "one per dimension). The default configuration is the first one measured for its key "
        "(the search always measures it first); the chosen one is the key's latest choice "
        "record, or, where a run stopped before choosing, the best measured so far.\n\n";
  md += "| device | identity |\n|---|---|\n";
  for (const auto& d : devices)
    md += "| " + cell(short_name[d]) + " | " + cell(d) + " |\n";
  std::size_t plots = 0;
  for (const auto& family : families) {
    const auto& keys = by_family[family];
    md += "\n## " + family + "\n\n";
    md += "| device | kernel | size | default us | chosen | chosen us | speed-up | measured "
          "(wrong, failed) |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& k : keys) {
      const record& r = k.any();
      const bool speedup = std::isfinite(k.default_ns) && k.chosen_ns > 0;
      md += "| " + cell(short_name[r.device]) + " | `" + kernel_label(r.kernel) + "` | " +
            size_label(r.size) + " | " + micros(k.default_ns) + " | " +
            (k.chosen_config.empty() ? std::string("-") : "`" + k.chosen_config + "`") +
            (k.choice ? "" : " (best so far)") + " | " + micros(k.chosen_ns) + " | " +
            (speedup ? strf("%.2fx", k.default_ns / k.chosen_ns) : std::string("-")) + " | " +
            strf("%zu (%zu, %zu)", k.measured.size(), k.wrong, k.failed) + " |\n";
    }
    md += "\nDefault us and chosen us are those configurations' measurements in the key's "
          "table below, the speed-up their ratio. The search chose after timing its best few "
          "again, interleaved with the default, and keeps the default unless one beats it by "
          "more than the noise (each key's re-timed line).\n\n";

    const png_plot::figure fig = family_figure(family, keys);
    if (fig.panels.empty()) {
      md += "No configuration of this family was measured: no plot.\n";
    } else {
      const std::string png = file_stem(family) + ".png";
      if (!write(png, png_plot::draw(fig).png())) return 1;
      ++plots;
      md += "![" + family + ": the median time of every configuration measured, per key](" + png +
            ")\n\n";
      md += "One panel per key. x: the key's configurations ranked by median time, fastest "
            "first (the order of its table below), the wrong or failed ones last as an orange "
            "x on the axis; y: the median time in us, on a log scale where the panel's times "
            "span more than 10x; the bar: the IQR, centred on the median. Red (D): the "
            "default; green (C): the chosen, or the best so far where no choice is recorded; "
            "green ringed in red (D=C): the default was kept; grey: the others.";
      std::size_t with_points = 0;
      for (const auto& k : keys)
        with_points += !k.measured.empty();
      if (with_points > fig.panels.size())
        md += strf(" The plot shows the first %zu of the %zu keys (the first tuned); the tables "
                   "below cover all of them.",
                   fig.panels.size(), with_points);
      md += "\n";
    }

    for (const auto& k : keys) {
      const record& r = k.any();
      md += "\n### " + cell(short_name[r.device]) + ", kernel `" + kernel_label(r.kernel) +
            "`, size " + size_label(r.size) + "\n\n";
      if (k.measured.empty()) {
        md += "No configuration measured: the database holds only the choice.\n";
      } else {
        md += "| rank | config | median us | IQR us | runs | status | |\n"
              "|---|---|---|---|---|---|---|\n";
        for (std::size_t i = 0; i < k.ranked.size(); ++i) {
          const record& m = *k.ranked[i];
          const bool ok = m.status == "ok", d = k.is_default(m), c = k.is_chosen(m);
          const std::string config = "`" + m.config + "`";
          const std::string mark = std::string(d ? "default" : "") + (d && c ? ", " : "") +
                                   (c ? (k.choice ? "**chosen**" : "**best so far**") : "");
          md += strf("| %zu | %s | %s | %s | %lld | %s | %s |\n", i + 1,
                     (c ? "**" + config + "**" : config).c_str(),
                     ok ? micros(m.median_ns).c_str() : "-", ok ? micros(m.iqr_ns).c_str() : "-",
                     static_cast<long long>(m.runs), cell(m.status).c_str(), mark.c_str());
        }
      }
      if (k.choice)
        md += strf("\nChosen `%s`: re-timed at %s us (IQR %s us, %lld runs), interleaved with "
                   "the default.\n",
                   k.choice->config.c_str(), micros(k.choice->median_ns).c_str(),
                   micros(k.choice->iqr_ns).c_str(), static_cast<long long>(k.choice->runs));
      else
        md += "\nNo choice recorded for this key (a run stopped before choosing, or is still "
              "running): the best so far is marked.\n";
    }
  }
  if (!write("README.md", std::vector<std::uint8_t>(md.begin(), md.end()))) return 1;
  std::printf("wrote %s: README.md and %zu plot%s, from %zu records of %s\n", a.out.c_str(), plots,
              plots == 1 ? "" : "s", rs.size(), path.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    const args a = parse(argc, argv);
    if (a.command == "list") return list(a);
    if (a.command == "run") return run(a);
    if (a.command == "show") return show(a);
    if (a.command == "report") return report(a);
    usage("unknown command " + a.command);
  } catch (const kiln::error& e) {
    std::fprintf(stderr, "kiln-tune: %s\n", e.what());
    return 1;
  }
}
