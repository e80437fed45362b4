// Benchmark-driven tuning (jit/tune/): the database file (round trip, damaged, truncated,
// foreign and short files, two processes appending at once, numbers the same under any
// locale), the choice at evaluation (exact size, nearest size, the family's choice,
// defaults; KILN_TUNE=off; a choice illegal on the device skipped), the search (a config
// whose output differs rejected, illegal configs never run, a killed run resumed, a forced
// one measuring all again), reductions compared in their own dtype (a replayed one too),
// the record path and the selector's database changed under reading threads, and every
// reduction configuration computing the right values on vulkan:0 (against double sums).
#include "vulkan_support.hpp"

#include "kiln/jit/tune/replay.hpp"
#include "tune_support.hpp"

#include <atomic>
#include <clocale>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <locale>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace tune = kiln::jit::tune;

namespace {

std::string temp_db(const std::string& name) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/kiln-tune-test-" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/" + name;
  std::filesystem::remove(p);
  return p;
}

tune::record measured(const std::string& config, double ns, const std::string& size = "20") {
  tune::record r;
  r.device = "test device\twith a tab";
  r.family = "elementwise";
  r.kernel = "0123456789abcdef0123456789abcdef";
  r.size = size;
  r.config = config;
  r.median_ns = ns;
  r.iqr_ns = ns / 50;
  r.runs = 17;
  r.time = 1790000000;
  return r;
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_all(const std::string& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

using tune_test::forced;
using tune_test::jit_of;

// A space of two parameters with a constraint, for the search tests.
tune::space toy_space() {
  return tune::space(
      "toy", {{"a", "", {1, 2, 3, 4}, 1}, {"b", "", {1, 2, 4, 8}, 1}},
      [](const tune::config& c) -> std::string { return c[0] * c[1] > 16 ? "a * b > 16" : ""; });
}

// A search target over space sp (toy_space's), its run and output still to set.
tune::target toy_target(const tune::space& sp) {
  tune::target t;
  t.device = "toy device";
  t.sp = &sp;
  t.kernel = "toy";
  t.size = "4";
  return t;
}

// iostreams' numbers with a ',' decimal point (a program's std::locale::global).
struct comma_numpunct : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// The C library's numbers with a ',' decimal point (setlocale, as a German program does):
// an installed de_DE locale, else one built by localedef into a temporary folder. False
// where neither exists; the caller restores "C".
bool set_comma_c_locale() {
  auto comma = [] { return std::strcmp(std::localeconv()->decimal_point, ",") == 0; };
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "de_DE", "fr_FR.UTF-8"})
    if (std::setlocale(LC_ALL, name) && comma()) return true;
  const std::string dir = std::filesystem::path(temp_db("locales")).string();
  std::filesystem::create_directories(dir);
  const std::string cmd = "localedef -i de_DE -f UTF-8 '" + dir + "/de_DE.UTF-8' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return false;
  ::setenv("LOCPATH", dir.c_str(), 1);
  return std::setlocale(LC_ALL, "de_DE.UTF-8") && comma();
}

// Puts both locales back, whatever a check did.
struct locale_restore {
  std::locale cpp = std::locale::global(std::locale::classic());
  ~locale_restore() {
    std::setlocale(LC_ALL, "C");
    ::unsetenv("LOCPATH");
    std::locale::global(cpp);
  }
};

} // namespace

TEST_CASE("tuning database: records round trip through the file, and a second reader sees "
          "what a first wrote",
          "[tune]") {
  const std::string p = temp_db("roundtrip.kdb");
  tune::database a(p), b(p);
  CHECK(a.records().empty());
  CHECK(a.stats().missing);
  a.append(measured("workgroup=64,groups=256", 1234.5));
  tune::record c = measured("workgroup=128,groups=256", 999.25);
  c.kind = 'c';
  a.append(c);
  const auto rs = b.records();
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].kind == 'm');
  CHECK(rs[0].device == "test device with a tab"); // tabs never reach the file
  CHECK(rs[0].config == "workgroup=64,groups=256");
  CHECK(rs[0].median_ns == 1234.5);
  CHECK(rs[0].runs == 17);
  CHECK(rs[1].kind == 'c');
  CHECK(rs[1].median_ns == 999.25);
  CHECK(read_all(p).rfind(std::string(tune::db_header) + "\n", 0) == 0);
  // Incremental: b reads only what was appended since.
  a.append(measured("workgroup=256,groups=256", 800));
  CHECK(b.records().size() == 3);
  CHECK(b.stats().rejected == 0);
}

TEST_CASE("tuning database: a damaged line is skipped, a truncated last line too, and the "
          "next record starts on a line of its own",
          "[tune]") {
  const std::string p = temp_db("damaged.kdb");
  {
    tune::database db(p);
    for (int i = 0; i < 4; ++i)
      db.append(measured("workgroup=" + std::to_string(32 << i) + ",groups=256", 100 + i));
  }
  std::string text = read_all(p);
  // Flip one digit of the second record's median, and cut the last record in half.
  const auto second = text.find('\n', text.find('\n') + 1) + 1;
  const auto digit = text.find("\t101\t", second);
  REQUIRE(digit != std::string::npos);
  text[digit + 3] = '7';
  const auto last = text.rfind('\n', text.size() - 2) + 1;
  text.resize(last + (text.size() - last) / 2);
  write_all(p, text);
  tune::database db(p);
  const auto rs = db.records();
  REQUIRE(rs.size() == 2); // records 0 and 2
  CHECK(rs[0].median_ns == 100);
  CHECK(rs[1].median_ns == 102);
  CHECK(db.stats().rejected == 1); // the flipped one (the cut one is not finished)
  db.append(measured("workgroup=1024,groups=256", 55));
  tune::database again(p);
  const auto after = again.records();
  REQUIRE(after.size() == 3);
  CHECK(after.back().median_ns == 55);
  CHECK(again.stats().rejected == 2); // the flipped line and the cut one
}

TEST_CASE("tuning database: a foreign file is read as empty and never written to", "[tune]") {
  const std::string p = temp_db("foreign.kdb");
  const std::string text = "my notes\nnot a database\n";
  write_all(p, text);
  tune::database db(p);
  CHECK(db.records().empty());
  CHECK(db.stats().foreign);
  CHECK_THROWS_WITH(db.append(measured("workgroup=64,groups=256", 1)),
                    Catch::Contains("KILN_TUNE_DB") &&
                        Catch::Contains("not a kiln tuning database") && Catch::Contains(p));
  CHECK(read_all(p) == text);
  // An empty or missing file is not foreign: the first append writes the header.
  const std::string q = temp_db("empty.kdb");
  write_all(q, "");
  tune::database e(q);
  CHECK(e.records().empty());
  e.append(measured("workgroup=64,groups=256", 1));
  CHECK(tune::database(q).records().size() == 1);
}

TEST_CASE("tuning database: two processes appending at once lose and damage nothing", "[tune]") {
  const std::string p = temp_db("two.kdb");
  constexpr int per = 300;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) { // no Catch in the child
    tune::database db(p);
    for (int i = 0; i < per; ++i)
      db.append(measured("workgroup=" + std::to_string(i) + ",groups=1", 1000 + i));
    ::_exit(0);
  }
  {
    tune::database db(p);
    for (int i = 0; i < per; ++i)
      db.append(measured("workgroup=" + std::to_string(i) + ",groups=2", 2000 + i));
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  tune::database db(p);
  const auto rs = db.records();
  CHECK(rs.size() == 2 * per);
  CHECK(db.stats().rejected == 0);
  std::set<std::string> seen;
  for (const auto& r : rs)
    seen.insert(r.config);
  CHECK(seen.size() == 2 * per);
}

TEST_CASE("tuning: a choice for this size, else the nearest size, else the family's, else the "
          "defaults, and a choice illegal on the device is skipped",
          "[tune]") {
  const std::string p = temp_db("choose.kdb");
  tune::device_limits lim;
  lim.max_workgroup = 256;
  lim.max_groups = 65535;
  const tune::space sp = tune::elementwise_space(lim, 64, 256);
  auto choice = [&](const std::string& kernel, const std::string& size, const std::string& cfg) {
    tune::record r = measured(cfg, 10, size);
    r.kind = 'c';
    r.device = "dev";
    r.kernel = kernel;
    return r;
  };
  {
    tune::database db(p);
    db.append(choice("k1", "10", "workgroup=128,groups=64"));
    db.append(choice("k1", "20", "workgroup=256,groups=1024"));
    db.append(choice("*", "16", "workgroup=32,groups=16"));
    db.append(choice("k2", "12", "workgroup=512,groups=64"));  // 512 > this device's 256
    db.append(choice("k1", "20", "workgroup=32,groups=4096")); // the latest for its key wins
  }
  auto& sel = tune::selector::instance();
  sel.use(p);
  auto pick = [&](const std::string& kernel, int b) { return sel.choose("dev", sp, kernel, {b}); };
  CHECK(sp.format(pick("k1", 10).cfg) == "workgroup=128,groups=64,per_invocation=1,vector=1");
  CHECK(pick("k1", 10).why.find("this size") != std::string::npos);
  CHECK(sp.format(pick("k1", 13).cfg) ==
        "workgroup=128,groups=64,per_invocation=1,vector=1"); // 3 from 10, 7 from 20
  CHECK(pick("k1", 13).why.find("nearest size") != std::string::npos);
  CHECK(sp.format(pick("k1", 17).cfg) == "workgroup=32,groups=4096,per_invocation=1,vector=1");
  CHECK(sp.format(pick("k3", 3).cfg) ==
        "workgroup=32,groups=16,per_invocation=1,vector=1"); // the family's
  CHECK(pick("k3", 3).why.find("family") != std::string::npos);
  // k2's own choice is illegal here: the family's is taken, and the log says why.
  const auto k2 = pick("k2", 12);
  CHECK(sp.format(k2.cfg) == "workgroup=32,groups=16,per_invocation=1,vector=1");
  CHECK(k2.why.find("workgroup = 512 is not one of its values") != std::string::npos);
  CHECK(!sel.choose("another device", sp, "k1", {10}).tuned);
  CHECK(sel.choose("another device", sp, "k1", {10}).cfg == sp.defaults());
  sel.use("");
}

TEST_CASE("tuning: the search rejects a config whose output differs, never runs an illegal "
          "one, and keeps the default unless another beats it past the noise",
          "[tune]") {
  const std::string p = temp_db("search.kdb");
  const tune::space sp = toy_space();
  std::vector<tune::config> ran;
  tune::config current;
  tune::target t = toy_target(sp);
  t.run = [&](const tune::config& c) {
    ran.push_back(c);
    current = c;
    // a = 3 is fast but wrong; b = 8 is fastest and right; the rest cost more with a * b.
    return c[0] == 3 ? 1.0 : c[1] == 8 ? 10.0 * double(c[0]) : 100.0 * double(c[0] * c[1]);
  };
  t.output = [&] { return std::vector<double>{1.0, 2.0, current[0] == 3 ? 3.5 : 3.0}; };
  tune::database db(p);
  tune::search_options o;
  o.timing.min_runs = 3;
  o.timing.warmup = 0;
  o.final_rounds = 5;
  const auto r = tune::search(t, db, o);
  CHECK(r.legal == 14); // 16 minus (3, 8) and (4, 8), where a * b > 16
  for (const auto& c : ran)
    CHECK(sp.why_illegal(c).empty());
  CHECK(r.rejected == 3); // a = 3 with b = 1, 2, 4
  CHECK(sp.format(r.chosen) == "a=1,b=8");
  CHECK(r.tuned);
  std::size_t wrong = 0, chosen = 0;
  for (const auto& rec : db.records()) {
    wrong += rec.status == "wrong";
    chosen += rec.kind == 'c';
    if (rec.kind == 'c') CHECK(rec.config == "a=1,b=8");
  }
  CHECK(wrong == 3);
  CHECK(chosen == 1);
  // A second search over the same database measures nothing.
  ran.clear();
  const auto again = tune::search(t, db, o);
  CHECK(again.already_tuned);
  CHECK(ran.empty());
  CHECK(sp.format(again.chosen) == "a=1,b=8");
  // When nothing beats the default past the noise, the default stays.
  const std::string q = temp_db("flat.kdb");
  tune::database flat(q);
  t.run = [&](const tune::config& c) {
    current = c;
    return 100.0 + double(c[0] + c[1]) * 0.01; // within 1% of each other
  };
  t.output = [] { return std::vector<double>{1.0}; };
  const auto f = tune::search(t, flat, o);
  CHECK(!f.tuned);
  CHECK(f.chosen == sp.defaults());
}

TEST_CASE("tuning: a run killed half-way resumes from the database and measures only what "
          "is left",
          "[tune]") {
  const std::string p = temp_db("resume.kdb");
  const tune::space sp = toy_space();
  auto make = [&](std::vector<tune::config>* timed) {
    tune::target t = toy_target(sp);
    t.run = [timed](const tune::config& c) {
      if (timed) timed->push_back(c);
      return 100.0 + double(c[0]);
    };
    t.output = [] { return std::vector<double>{1.0}; };
    return t;
  };
  tune::search_options o;
  o.timing.min_runs = 3;
  o.timing.warmup = 0;
  o.final_rounds = 3;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Killed (SIGKILL, no clean-up) after the sixth configuration's progress line.
    int lines = 0;
    o.progress = [&](const std::string&) {
      if (++lines == 6) ::kill(::getpid(), SIGKILL);
    };
    tune::database db(p);
    tune::search(make(nullptr), db, o);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  std::size_t before = 0;
  {
    tune::database db(p);
    for (const auto& r : db.records()) {
      CHECK(r.kind == 'm'); // killed before choosing
      ++before;
    }
  }
  CHECK(before == 7); // the default, then six more
  std::vector<tune::config> timed;
  tune::database db(p);
  const auto r = tune::search(make(&timed), db, o);
  CHECK(r.legal == 14);
  CHECK(r.resumed == 7);
  CHECK(r.measured == r.legal - 7);
}

TEST_CASE("tuning on vulkan:0: an expression's kernel tuned, the choice used by later "
          "evaluations and ignored with KILN_TUNE=off",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::string p = temp_db("vulkan.kdb");
  auto& sel = tune::selector::instance();
  sel.use(p);
  const std::int64_t n = 1 << 16;
  kiln::tensor<float> x = kiln::random::normal<float>({n}, 11).to(*dev);
  kiln::tensor<float> y = kiln::random::normal<float>({n}, 12).to(*dev);
  auto f = [&] { return kiln::tensor<float>(kiln::tanh(x) * y + 0.5f); };
  (void)f();
  CHECK(!tune::last_choice("elementwise").tuned);
  kiln::tune_options o;
  o.db = p;
  o.budget_seconds = 12; // enough to measure several (the choice is not what is checked)
  o.timing.min_runs = 3;
  o.timing.max_seconds = 0.05;
  o.final_rounds = 5;
  const auto rep = kiln::tune(f, o);
  CHECK(rep.family == "elementwise");
  CHECK(rep.size == "16");
  CHECK(rep.result.measured + rep.result.failed + rep.result.rejected > 1);
  CHECK(rep.result.rejected == 0);
  CHECK(rep.result.failed == 0);
  // The choice is the one evaluations take now (tuned, or the default where nothing won).
  const auto xs = x.to_vector(), ys = y.to_vector();
  const auto out = f().to_vector();
  CHECK(tune::last_choice("elementwise").cfg == rep.result.chosen);
  CHECK(tune::last_choice("elementwise").tuned); // the database's choice, the default or not
  for (std::int64_t i = 0; i < n; i += 97)
    CHECK(out[i] == Approx(std::tanh(double(xs[i])) * ys[i] + 0.5).epsilon(1e-5).margin(1e-5));
  // Whatever won, force a choice into the database to see it taken, then ignored.
  {
    tune::database db(p);
    tune::record c;
    c.kind = 'c';
    c.device = rep.device;
    c.family = "elementwise";
    c.kernel = rep.kernel;
    c.size = "16";
    c.config = "workgroup=128,groups=16";
    db.append(c);
  }
  sel.reload();
  (void)f();
  CHECK(tune::last_choice("elementwise").tuned);
  CHECK(rep.device.find("vulkan") == 0);
  ::setenv("KILN_TUNE", "off", 1);
  ::setenv("KILN_TUNE_DB", p.c_str(), 1);
  sel.reopen();
  (void)f();
  CHECK(!tune::last_choice("elementwise").tuned);
  CHECK(sel.choose(rep.device, jit_of(*dev).elementwise_space(), rep.kernel, {16}).why ==
        "KILN_TUNE=off");
  ::unsetenv("KILN_TUNE");
  sel.reopen();
  (void)f();
  CHECK(tune::last_choice("elementwise").tuned);
  CHECK(jit_of(*dev).elementwise_space().format(tune::last_choice("elementwise").cfg) ==
        "workgroup=128,groups=16,per_invocation=1,vector=1");
  ::unsetenv("KILN_TUNE_DB");
  sel.use("");
}

TEST_CASE("tuning on vulkan:0: every reduction configuration gives the sums of double "
          "references, in each stage",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto& be = jit_of(*dev);
  const tune::space& sp = be.reduction_space();
  std::mt19937 rng(20261126);
  std::vector<tune::config> cfgs = sp.legal();
  std::shuffle(cfgs.begin() + 1, cfgs.end(), rng);
  cfgs.resize(std::min<std::size_t>(cfgs.size(), 24));
  // Short (thread stage), medium (one group per output) and long (partial + merge) rows.
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{300, 20}, {40, 3000}, {2, 400000}}) {
    kiln::tensor<float> x = kiln::random::normal<float>({rows, cols}, 7).to(*dev);
    const auto xs = x.to_vector();
    std::vector<double> ref(std::size_t(rows), 0.0), mag(std::size_t(rows), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const double v = xs[std::size_t(r * cols + c)];
        ref[std::size_t(r)] += v * v - v;
        mag[std::size_t(r)] += std::abs(v * v - v);
      }
    auto f = [&] { return kiln::tensor<float>(kiln::sum(x * x - x, {1})); };
    const tune::launch_site site = tune_test::launches_of(f).front();
    REQUIRE(site.sp->family() == "reduction");
    for (const auto& c : cfgs) {
      INFO(rows << " x " << cols << " under " << sp.format(c));
      const std::vector<float> out = forced(site, c, f).to_vector();
      for (std::int64_t r = 0; r < rows; ++r)
        CHECK(std::abs(out[std::size_t(r)] - ref[std::size_t(r)]) <=
              1e-6 * mag[std::size_t(r)] + 1e-5);
    }
  }
}

TEST_CASE("tuning on the host: every host configuration computes the same values, and a tuned "
          "pass takes its choice",
          "[tune]") {
  const std::string p = temp_db("host.kdb");
  auto& sel = tune::selector::instance();
  sel.use(p);
  const tune::space& sp = tune::host_tuning_space();
  for (const std::int64_t n : {std::int64_t{1000}, std::int64_t{1} << 20}) {
    kiln::tensor<double> x = kiln::random::normal<double>({n}, 3);
    kiln::tensor<double> y = kiln::random::normal<double>({n}, 4);
    const auto xs = x.to_vector(), ys = y.to_vector();
    auto f = [&] { return kiln::tensor<double>(x * y + kiln::sin(x)); };
    const auto seen = tune_test::launches_of(f);
    REQUIRE(seen.size() == 1);
    REQUIRE(seen.front().sp->family() == "host");
    CHECK(seen.front().device == tune::host_identity());
    // The defaults' values against double sin (a few ulp), then every configuration's
    // against those exactly (threads, grain and stores change no arithmetic).
    const auto ref = f().to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = xs[std::size_t(i)] * ys[std::size_t(i)] + std::sin(xs[std::size_t(i)]);
      CHECK(std::abs(ref[std::size_t(i)] - want) <= 1e-14 * (1 + std::abs(want)));
      if (std::abs(ref[std::size_t(i)] - want) > 1e-14 * (1 + std::abs(want))) break;
    }
    for (const tune::config& c : sp.legal()) {
      INFO(n << " elements under " << sp.format(c));
      const std::vector<double> out = forced(seen.front(), c, f).to_vector();
      std::size_t bad = 0;
      for (std::int64_t i = 0; i < n; ++i)
        bad += out[std::size_t(i)] != ref[std::size_t(i)];
      CHECK(bad == 0);
    }
    kiln::tune_options o;
    o.db = p;
    o.budget_seconds = 5;
    o.timing.min_runs = 3;
    o.timing.max_seconds = 0.05;
    o.final_rounds = 5;
    const auto rep = kiln::tune(f, o);
    CHECK(rep.family == "host");
    CHECK(rep.result.rejected == 0);
    CHECK(rep.result.failed == 0);
    (void)f();
    CHECK(tune::last_choice("host").cfg == rep.result.chosen);
    CHECK(tune::last_choice("host").tuned); // the database's choice, the default or not
  }
  sel.use("");
  CHECK(!tune::host_tuned().load());
}

TEST_CASE("tuning database: numbers are written and read the same whatever locale the program "
          "set, and every double reads back exactly",
          "[tune]") {
  std::vector<double> values = test::uniform<double>(40, 0, 1e7);
  values.push_back(0.1);
  values.push_back(1234.5);
  values.push_back(1e-300);
  std::vector<tune::record> rs;
  for (double v : values) {
    tune::record r = measured("workgroup=64,groups=256", v);
    r.iqr_ns = v / 3;
    r.runs = test::draw(1, 1000000);
    rs.push_back(r);
  }
  // Written in "C".
  const std::string p = temp_db("locale-c.kdb");
  std::vector<std::string> lines;
  {
    tune::database db(p);
    for (const auto& r : rs) {
      db.append(r);
      lines.push_back(tune::encode(r));
    }
  }
  const std::string c_bytes = read_all(p);
  auto same_under_this_locale = [&](const std::string& name) {
    INFO("locale: " << name);
    CHECK(tune::detail::number(1234.5) == "1234.5");
    double x = 0;
    CHECK(tune::detail::parse_number("1234.5", x));
    CHECK(x == 1234.5);
    CHECK(!tune::detail::parse_number("1234,5", x));
    for (std::size_t i = 0; i < rs.size(); ++i) {
      CHECK(tune::encode(rs[i]) == lines[i]);
      const auto back = tune::decode(lines[i]);
      REQUIRE(back);
      CHECK(back->median_ns == rs[i].median_ns); // exactly: the shortest text that reads back
      CHECK(back->iqr_ns == rs[i].iqr_ns);
      CHECK(back->runs == rs[i].runs);
    }
    tune::database db(p); // what "C" wrote, read here
    const auto got = db.records();
    CHECK(db.stats().rejected == 0);
    REQUIRE(got.size() == rs.size());
    for (std::size_t i = 0; i < rs.size(); ++i)
      CHECK(got[i].median_ns == rs[i].median_ns);
    const std::string q = temp_db("locale-here.kdb"); // written here: the same bytes
    {
      tune::database w(q);
      for (const auto& r : rs)
        w.append(r);
    }
    CHECK(read_all(q) == c_bytes);
  };
  locale_restore restore;
  same_under_this_locale("C");
  std::locale::global(std::locale(std::locale::classic(), new comma_numpunct));
  same_under_this_locale("iostreams with a ',' decimal point");
  if (set_comma_c_locale())
    same_under_this_locale("de_DE, with a ',' decimal point");
  else
    WARN("no locale with a ',' decimal point here (nor localedef): setlocale not checked");
}

TEST_CASE("tuning database: a file shorter than the header is foreign unless it is the "
          "header's beginning",
          "[tune]") {
  const std::string p = temp_db("short.kdb");
  const std::string header = std::string(tune::db_header) + "\n";
  // Bytes that are not the header's beginning, "abcd" among them.
  std::vector<std::string> foreign{"abcd"};
  for (int k = 0; k < 5; ++k) {
    std::string s = header.substr(0, std::size_t(test::draw(0, int(header.size()) - 2)));
    s += char(test::draw('A', 'Z')); // no capital letter in the header
    foreign.push_back(s);
  }
  for (const auto& text : foreign) {
    INFO("the file holds \"" << text << "\"");
    write_all(p, text);
    tune::database db(p);
    CHECK(db.records().empty());
    CHECK(db.stats().foreign);
    CHECK_THROWS_WITH(db.append(measured("workgroup=64,groups=256", 1)),
                      Catch::Contains("not a kiln tuning database"));
    CHECK(read_all(p) == text); // never written to
  }
  // A header being written (a writer mid-way) is not foreign: it holds nothing yet.
  const std::string part = header.substr(0, std::size_t(test::draw(1, int(header.size()) - 1)));
  INFO("the file holds \"" << part << "\"");
  write_all(p, part);
  tune::database db(p);
  CHECK(db.records().empty());
  CHECK(!db.stats().foreign);
  CHECK(!db.stats().missing);
}

TEST_CASE("tuning: a forced search measures every configuration again, reading back none of "
          "an earlier run's measurements",
          "[tune]") {
  const std::string p = temp_db("force.kdb");
  const tune::space sp = toy_space();
  std::map<tune::config, double> cost; // drawn per configuration
  for (const auto& c : sp.legal())
    cost[c] = 100.0 + test::draw(0, 50);
  std::set<tune::config> timed;
  tune::target t = toy_target(sp);
  t.run = [&](const tune::config& c) {
    timed.insert(c);
    return cost.at(c);
  };
  t.output = [] { return std::vector<double>{1.0}; };
  tune::search_options o;
  o.timing.min_runs = 3;
  o.timing.warmup = 0;
  o.final_rounds = 3;
  tune::database db(p);
  const auto first = tune::search(t, db, o);
  CHECK(first.measured == first.legal);
  timed.clear();
  o.force = true;
  const auto again = tune::search(t, db, o);
  CHECK(!again.already_tuned);
  CHECK(again.resumed == 0);
  CHECK(again.measured == again.legal);
  CHECK(timed.size() == again.legal);
  std::size_t m = 0, c = 0;
  for (const auto& r : db.records())
    (r.kind == 'm' ? m : c) += 1;
  CHECK(m == 2 * first.legal);
  CHECK(c == 2);
}

TEST_CASE("tuning: a reduction's results agree in their own dtype: integers exactly, each "
          "float type to its precision",
          "[tune]") {
  using kiln::dtype;
  using tune::detail::agree_reduced;
  const double big = double(test::draw(1 << 20, 1 << 30));
  for (dtype d : {dtype::b8, dtype::u8, dtype::i32, dtype::u32, dtype::i64}) {
    INFO(kiln::name(d));
    CHECK(agree_reduced(d, {big, 1}, {big, 1}));
    CHECK(!agree_reduced(d, {big, 1}, {big + 1, 1}));
  }
  auto near = [&](dtype d, double rel) { return agree_reduced(d, {big}, {big * (1 + rel)}); };
  CHECK(near(dtype::f64, 1e-13));
  CHECK(!near(dtype::f64, 1e-9));
  CHECK(near(dtype::f32, 1e-5));
  CHECK(!near(dtype::f32, 1e-3));
  CHECK(near(dtype::f16, 2e-3)); // two of its ulp
  CHECK(!near(dtype::f16, 2e-2));
  CHECK(near(dtype::bf16, 1.5e-2));
  CHECK(!near(dtype::bf16, 1e-1));
  const double nan = std::nan("");
  CHECK(agree_reduced(dtype::f32, {nan, 1}, {nan, 1}));
  CHECK(!agree_reduced(dtype::f32, {nan}, {1}));
  CHECK(!agree_reduced(dtype::i32, {1, 2}, {1}));
  CHECK(kiln::detail::result_dtype(kiln::tensor<std::int64_t>()) == dtype::i64);
  CHECK(kiln::detail::result_dtype(kiln::tensor<double>()) == dtype::f64);
}

TEST_CASE("tuning on vulkan:0: a replayed integer reduction is compared in its own dtype, "
          "exactly",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t rows = test::draw(2, 6), cols = test::draw(100000, 300000);
  const auto xs = test::integers<std::int32_t>(std::size_t(rows * cols), -1000, 1000);
  const kiln::tensor<std::int32_t> x = kiln::from(xs, kiln::shape{rows, cols}).to(*dev);
  const std::string rec = temp_db("int-launches.rec");
  tune::record_to(rec);
  CHECK(tune::recording());
  const kiln::tensor<std::int64_t> sums = kiln::sum(x, {1});
  (void)sums.to_vector();
  tune::record_to("");
  CHECK(!tune::recording());
  CHECK(tune::record_path().empty());
  std::unique_ptr<tune::replayed> rp;
  for (const auto& body : tune::read_record_file(rec).bodies) {
    try { // a copy or cast around the reduction may be recorded too
      auto r = std::make_unique<tune::replayed>(body, "");
      if (r->kind == "reduction") rp = std::move(r);
    } catch (const kiln::error&) {
    }
  }
  REQUIRE(rp);
  CHECK(rp->out_type == kiln::dtype::i64);
  rp->run();
  const std::vector<double> out = rp->output(); // inputs replayed as 1
  REQUIRE(out.size() == std::size_t(rows));
  for (double v : out)
    CHECK(v == double(cols));
  const tune::replay_output ro{rp.get()};
  REQUIRE(kiln::detail::result_dtype(ro) == kiln::dtype::i64);
  // One off in a sum of 10^5 is a wrong configuration, not rounding (f32's 1e-4 would pass it).
  std::vector<double> off = out;
  off[std::size_t(test::draw(0, int(rows) - 1))] += 1;
  CHECK(tune::detail::agree_reduced(kiln::detail::result_dtype(ro), out, out));
  CHECK(!tune::detail::agree_reduced(kiln::detail::result_dtype(ro), out, off));
}

TEST_CASE("tuning: the record of launches' path is changed while other threads read it, each "
          "reading one whole path",
          "[tune]") {
  // Two paths of one length: an unguarded string would be overwritten in place under a reader.
  const std::string a = temp_db("record-a-" + std::string(60, 'a'));
  const std::string b = temp_db("record-b-" + std::string(60, 'b'));
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> torn{0}, reads{0};
  std::vector<std::thread> readers;
  for (int k = 0; k < 3; ++k)
    readers.emplace_back([&] {
      while (!stop.load()) {
        const std::string s = tune::record_path();
        if (!(s.empty() || s == a || s == b)) ++torn;
        ++reads;
      }
    });
  // Until the readers have read while it flips, however late they start.
  const int flips = test::draw(20000, 40000);
  for (int i = 0; i < flips || reads.load() < 10000; ++i)
    tune::record_to(i % 2 ? a : b);
  stop = true;
  for (auto& th : readers)
    th.join();
  tune::record_to("");
  CHECK(torn == 0);
  CHECK(reads > 0);
  CHECK(!tune::recording());
  CHECK(tune::record_path().empty());
}

TEST_CASE("tuning: the selector's database stays alive for a caller while another thread "
          "points the selector at another file",
          "[tune]") {
  const std::string p1 = temp_db("sel-one.kdb"), p2 = temp_db("sel-two.kdb");
  const std::size_t n1 = std::size_t(test::draw(1, 10)), n2 = n1 + std::size_t(test::draw(1, 10));
  {
    tune::database d1(p1), d2(p2);
    for (std::size_t i = 0; i < n2; ++i) {
      if (i < n1) d1.append(measured("workgroup=64,groups=" + std::to_string(i), 10));
      d2.append(measured("workgroup=32,groups=" + std::to_string(i), 20));
    }
  }
  auto& sel = tune::selector::instance();
  sel.use(p1);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int k = 0; k < 2; ++k)
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto db = sel.db();
        if (!db) {
          ++bad;
          continue;
        }
        const std::string path = db->path();
        const std::size_t n = db->records().size();
        if (!((path == p1 && n == n1) || (path == p2 && n == n2))) ++bad;
        ++reads;
      }
    });
  const int flips = test::draw(1000, 2000);
  for (int i = 0; i < flips || reads.load() < 1000; ++i)
    sel.use(i % 2 ? p2 : p1);
  stop = true;
  for (auto& th : readers)
    th.join();
  sel.use("");
  CHECK(bad == 0);
  CHECK(reads > 0);
}
