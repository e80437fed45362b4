// A Metal framework that runs kernels on the CPU: the library kiln opens as the Objective-C
// runtime and the Metal framework together (KILN_METAL_FRAMEWORK) in the `msl-on-cpu:` tests,
// so that kiln's Metal runtime (jit/kiln/jit/metal/framework.hpp) and backend run unchanged —
// every message they send, code generation, the parameter block, grids, both caches — and
// only what the GPU would do is done here:
// - objc_msgSend is a trampoline, as Apple's is: it finds the method of (receiver, selector)
//   and jumps to it with the caller's arguments in place, so each method is a C++ function of
//   the message's exact type (MTLSize by value included). A message to a released object or
//   one no class here answers stops the process, as an unrecognized selector does.
// - Autorelease pools release what was autoreleased in them; an autorelease outside any pool
//   stops the process. Method tables and objects are reachable from globals never destroyed
//   (kiln's runtime may send its last messages from a static destructor).
// - A library is the MSL compiled by the suite's compiler through the shim of Metal's
//   built-ins (msl_shim.h, msl_unit.hpp) into a shared library, with the host's -ffast-math
//   unless the compile options ask for safe math (Metal's default is fast math).
// - Command buffers run when waited for (waitUntilCompleted runs the queue's committed buffers
//   in order, up to that one), not when committed: a host read of a buffer that does not wait
//   for the kernels writing it reads stale data, as it could on a GPU.
// - A binary archive keeps the compiled images of the pipelines added to it and serializes
//   them to a file; a pipeline made with MTLPipelineOptionFailOnBinaryArchiveMiss comes from
//   the archive's image, or is nil with an error.
// x86-64 only (the trampoline).
#include "grid_runner.hpp"
#include "host_library.hpp"
#include "msl_unit.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#if !defined(__x86_64__)
#error "the Metal stand-in's objc_msgSend is written for x86-64"
#endif
#ifndef DEVICE_ON_CPU_CXX
#error "DEVICE_ON_CPU_CXX, _FLAGS, _SHIM_DIR: kiln_device_stand_in in tests/CMakeLists.txt"
#endif

namespace {

using id = void*;
using SEL = const char*; // an interned selector name
using NSUInteger = unsigned long;
struct mtl_size {
  NSUInteger width, height, depth;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "metal-on-cpu: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

SEL intern(const char* name) {
  static std::mutex m;
  static auto* names = new std::unordered_set<std::string>; // never destroyed
  std::lock_guard lock(m);
  return names->insert(name).first->c_str();
}

// ---- objects, classes, method tables

using methods = std::unordered_map<SEL, void*>;

struct object {
  explicit object(const methods* t) : table(t) {}
  virtual ~object() = default;
  const methods* table;
  std::atomic<int> refs{1};
};

// Every object alive, reachable from a global that is never destroyed: a message to anything
// else is a message to a released object.
struct registry {
  std::mutex m;
  std::unordered_set<object*> live;
};
registry& objects() {
  static auto* r = new registry;
  return *r;
}
template <class T, class... A>
T* make(A&&... a) {
  auto* o = new T(std::forward<A>(a)...);
  std::lock_guard lock(objects().m);
  objects().live.insert(o);
  return o;
}
void release(object* o) {
  if (!o || --o->refs > 0) return;
  {
    std::lock_guard lock(objects().m);
    objects().live.erase(o);
  }
  delete o;
}
object* retain(object* o) {
  if (o) ++o->refs;
  return o;
}

// The autorelease pools of this thread, innermost last.
thread_local std::vector<std::vector<object*>> pools;
template <class T>
T* autoreleased(T* o) {
  if (pools.empty()) die("an object was autoreleased with no autorelease pool in place");
  pools.back().push_back(o);
  return o;
}

template <class F>
void add(methods& t, const char* sel, F f) {
  t[intern(sel)] = reinterpret_cast<void*>(f);
}
// What every object answers (NSObject's part).
id obj_retain(id self, SEL) { return retain(static_cast<object*>(self)); }
void obj_release(id self, SEL) { release(static_cast<object*>(self)); }
bool obj_responds(id self, SEL, SEL sel) {
  return static_cast<object*>(self)->table->count(sel) != 0;
}
methods with_nsobject(methods t) {
  add(t, "retain", &obj_retain);
  add(t, "release", &obj_release);
  add(t, "respondsToSelector:", &obj_responds);
  return t;
}

// A class object answers its class methods; `alloc` gives an instance that `init` returns.
struct class_object : object {
  using object::object;
};
template <class T>
id alloc_of(id, SEL) {
  return make<T>();
}
id init_self(id self, SEL) { return self; }

// ---- Foundation: strings, URLs, arrays, errors, the process

struct ns_string : object {
  explicit ns_string(std::string s);
  std::string text;
};
const char* str_utf8(id self, SEL) { return static_cast<ns_string*>(self)->text.c_str(); }
const methods& string_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "UTF8String", &str_utf8);
    return with_nsobject(m);
  }());
  return t;
}
ns_string::ns_string(std::string s) : object(&string_methods()), text(std::move(s)) {}
id string_with_utf8(id, SEL, const char* s) { return autoreleased(make<ns_string>(s)); }

std::string text_of(id s) {
  if (!s) die("a nil string where one is needed");
  return static_cast<ns_string*>(s)->text;
}

struct ns_url : object {
  explicit ns_url(std::string p) : object(&with_nsobject_empty()), path(std::move(p)) {}
  static const methods& with_nsobject_empty() {
    static const methods& t = *new methods(with_nsobject({}));
    return t;
  }
  std::string path;
};
id url_with_path(id, SEL, id path) { return autoreleased(make<ns_url>(text_of(path))); }

struct ns_array : object {
  ns_array() : object(&ns_url::with_nsobject_empty()) {}
  ~ns_array() override {
    for (object* o : items)
      release(o);
  }
  std::vector<object*> items;
};
id array_with_object(id, SEL, id o) {
  auto* a = make<ns_array>();
  a->items.push_back(retain(static_cast<object*>(o)));
  return autoreleased(a);
}

struct ns_error : object {
  explicit ns_error(std::string w);
  std::string what;
};
id error_description(id self, SEL) {
  return autoreleased(make<ns_string>(static_cast<ns_error*>(self)->what));
}
const methods& error_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "localizedDescription", &error_description);
    return with_nsobject(m);
  }());
  return t;
}
ns_error::ns_error(std::string w) : object(&error_methods()), what(std::move(w)) {}
// Sets *out (when asked for) to an autoreleased error; returns nil.
id fail(id* out, const std::string& why) {
  if (out) *out = autoreleased(make<ns_error>(why));
  return nullptr;
}

id process_os(id, SEL) { return autoreleased(make<ns_string>("metal-on-cpu 1.0")); }
id process_info(id, SEL) {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "operatingSystemVersionString", &process_os);
    return with_nsobject(m);
  }());
  static object* the = make<class_object>(&t); // a singleton, never released
  return the;
}

// ---- Metal: options and descriptors

struct compile_options : object {
  compile_options();
  // Metal's defaults: fast math (MTLMathModeFast), and with setMathMode: fast math functions
  // too unless set precise (MTLMathFloatingPointFunctionsPrecise, 1).
  bool fast_math = true;
  bool precise_functions = false;
  NSUInteger language = 0;
};
void opt_math_mode(id self, SEL, NSUInteger mode) {
  static_cast<compile_options*>(self)->fast_math = mode == 2; // MTLMathModeFast
}
void opt_functions(id self, SEL, NSUInteger f) {
  static_cast<compile_options*>(self)->precise_functions = f == 1;
}
void opt_fast_math(id self, SEL, bool on) {
  auto* o = static_cast<compile_options*>(self);
  o->fast_math = on;
  o->precise_functions = !on; // fastMathEnabled = NO: safe math, precise functions
}
void opt_language(id self, SEL, NSUInteger v) { static_cast<compile_options*>(self)->language = v; }
const methods& options_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "init", &init_self);
    add(m, "setMathMode:", &opt_math_mode);
    add(m, "setMathFloatingPointFunctions:", &opt_functions);
    add(m, "setFastMathEnabled:", &opt_fast_math);
    add(m, "setLanguageVersion:", &opt_language);
    return with_nsobject(m);
  }());
  return t;
}
compile_options::compile_options() : object(&options_methods()) {}

// A library: the MSL's host image (shared with every library of the same source and math),
// opened once.
struct image {
  std::vector<char> bytes;
  void* handle = nullptr;
};
struct function : object {
  function(std::shared_ptr<image> i, std::string s, std::string n);
  std::shared_ptr<image> img;
  std::string source, name;
};

struct pipeline_descriptor : object {
  pipeline_descriptor();
  ~pipeline_descriptor() override {
    release(fn);
    release(archives);
  }
  function* fn = nullptr;
  ns_array* archives = nullptr;
};
void desc_function(id self, SEL, id fn) {
  auto* d = static_cast<pipeline_descriptor*>(self);
  retain(static_cast<object*>(fn));
  release(d->fn);
  d->fn = static_cast<function*>(fn);
}
void desc_archives(id self, SEL, id a) {
  auto* d = static_cast<pipeline_descriptor*>(self);
  retain(static_cast<object*>(a));
  release(d->archives);
  d->archives = static_cast<ns_array*>(a);
}
const methods& pipeline_descriptor_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "init", &init_self);
    add(m, "setComputeFunction:", &desc_function);
    add(m, "setBinaryArchives:", &desc_archives);
    return with_nsobject(m);
  }());
  return t;
}
pipeline_descriptor::pipeline_descriptor() : object(&pipeline_descriptor_methods()) {}

struct archive_descriptor : object {
  archive_descriptor();
  std::string url; // empty: a new, empty archive
};
void adesc_url(id self, SEL, id url) {
  static_cast<archive_descriptor*>(self)->url = url ? static_cast<ns_url*>(url)->path : "";
}
const methods& archive_descriptor_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "init", &init_self);
    add(m, "setUrl:", &adesc_url);
    return with_nsobject(m);
  }());
  return t;
}
archive_descriptor::archive_descriptor() : object(&archive_descriptor_methods()) {}

// ---- Metal: buffers, libraries, pipelines, archives

struct buffer : object {
  buffer(void* m, std::size_t n);
  ~buffer() override { kiln_cpu::device_free(memory); }
  void* memory;
  std::size_t length;
};
void* buf_contents(id self, SEL) { return static_cast<buffer*>(self)->memory; }
NSUInteger buf_length(id self, SEL) { return static_cast<buffer*>(self)->length; }
const methods& buffer_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "contents", &buf_contents);
    add(m, "length", &buf_length);
    return with_nsobject(m);
  }());
  return t;
}
buffer::buffer(void* m, std::size_t n) : object(&buffer_methods()), memory(m), length(n) {}

const methods& function_methods() {
  static const methods& t = *new methods(with_nsobject({}));
  return t;
}
function::function(std::shared_ptr<image> i, std::string s, std::string n)
    : object(&function_methods()), img(std::move(i)), source(std::move(s)), name(std::move(n)) {}

struct library : object {
  library(std::shared_ptr<image> i, std::string s);
  std::shared_ptr<image> img;
  std::string source;
};
id lib_function(id self, SEL, id name) {
  auto* l = static_cast<library*>(self);
  const std::string n = text_of(name);
  for (const auto& k : kiln_msl_unit::kernels_of(l->source))
    if (k.name == n) return make<function>(l->img, l->source, n);
  return nullptr;
}
const methods& library_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "newFunctionWithName:", &lib_function);
    return with_nsobject(m);
  }());
  return t;
}
library::library(std::shared_ptr<image> i, std::string s)
    : object(&library_methods()), img(std::move(i)), source(std::move(s)) {}

struct pipeline : object {
  explicit pipeline(kiln_cpu_entry e);
  kiln_cpu_entry entry;
};
NSUInteger pipe_max_threads(id, SEL) { return 1024; }
NSUInteger pipe_width(id, SEL) { return KILN_CPU_WARP; }
const methods& pipeline_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "maxTotalThreadsPerThreadgroup", &pipe_max_threads);
    add(m, "threadExecutionWidth", &pipe_width);
    return with_nsobject(m);
  }());
  return t;
}
pipeline::pipeline(kiln_cpu_entry e) : object(&pipeline_methods()), entry(e) {}

// What an archive keys a pipeline's code by: its function's source and name.
std::string archive_key(const function& f) { return f.name + "\n" + f.source; }

struct binary_archive : object {
  binary_archive();
  std::map<std::string, std::vector<char>> images;
};
bool archive_add(id self, SEL, id desc, id* err) {
  auto* d = static_cast<pipeline_descriptor*>(desc);
  if (!d || !d->fn) return fail(err, "the descriptor has no compute function"), false;
  static_cast<binary_archive*>(self)->images[archive_key(*d->fn)] = d->fn->img->bytes;
  return true;
}
// The file: "MTLARCH1", then per pipeline its key and its image, each as 8 bytes of length
// and the bytes.
void put(std::ofstream& out, const std::string& s) {
  const std::uint64_t n = s.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(s.data(), static_cast<std::streamsize>(n));
}
bool get(std::ifstream& in, std::string& s) {
  std::uint64_t n = 0;
  if (!in.read(reinterpret_cast<char*>(&n), 8) || n > (1ull << 32)) return false;
  s.resize(n);
  return static_cast<bool>(in.read(s.data(), static_cast<std::streamsize>(n)));
}
bool archive_serialize(id self, SEL, id url, id* err) {
  const std::string path = url ? static_cast<ns_url*>(url)->path : "";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write("MTLARCH1", 8);
  for (const auto& [key, img] : static_cast<binary_archive*>(self)->images) {
    put(out, key);
    put(out, std::string(img.begin(), img.end()));
  }
  out.close();
  if (!out) return fail(err, "cannot write the archive to " + path), false;
  return true;
}
const methods& archive_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "addComputePipelineFunctionsWithDescriptor:error:", &archive_add);
    add(m, "serializeToURL:error:", &archive_serialize);
    return with_nsobject(m);
  }());
  return t;
}
binary_archive::binary_archive() : object(&archive_methods()) {}

// ---- Metal: the queue, command buffers, encoders

struct dispatch {
  kiln_cpu_entry entry;
  std::map<NSUInteger, std::vector<std::uint64_t>> bytes;
  std::map<NSUInteger, object*> bound;
  unsigned grid[3], group[3];
};

struct command_buffer;
struct queue : object {
  queue();
  std::mutex m;
  std::deque<command_buffer*> committed; // retained, run in order when waited for
};

struct command_buffer : object {
  explicit command_buffer(queue* q);
  ~command_buffer() override {
    for (auto& d : work)
      for (auto& [at, b] : d.bound)
        release(b);
    release(q);
  }
  queue* q;
  std::vector<dispatch> work;
  NSUInteger status = 0; // MTLCommandBufferStatusNotEnqueued
  std::string error;
  double start = 0, end = 0;
};

struct encoder : object {
  explicit encoder(command_buffer* c);
  ~encoder() override {
    for (auto& [at, b] : next.bound)
      release(b);
  }
  command_buffer* cb; // not retained: the encoder lives in the command buffer's pool
  dispatch next{};
  bool ended = false;
};
void enc_pipeline(id self, SEL, id p) {
  static_cast<encoder*>(self)->next.entry = static_cast<pipeline*>(p)->entry;
}
void enc_buffer(id self, SEL, id b, NSUInteger offset, NSUInteger at) {
  auto& d = static_cast<encoder*>(self)->next;
  if (offset != 0) die("kiln binds buffers at offset 0");
  retain(static_cast<object*>(b));
  if (auto it = d.bound.find(at); it != d.bound.end()) release(it->second);
  d.bound[at] = static_cast<object*>(b);
  d.bytes.erase(at);
}
void enc_bytes(id self, SEL, const void* p, NSUInteger n, NSUInteger at) {
  auto& d = static_cast<encoder*>(self)->next;
  if (n > 4096) die("setBytes:length:atIndex: takes at most 4 KiB");
  std::vector<std::uint64_t> copy((n + 7) / 8);
  std::memcpy(copy.data(), p, n);
  d.bytes[at] = std::move(copy);
  if (auto it = d.bound.find(at); it != d.bound.end()) {
    release(it->second);
    d.bound.erase(it);
  }
}
void enc_dispatch(id self, SEL, mtl_size groups, mtl_size threads) {
  auto* e = static_cast<encoder*>(self);
  if (!e->next.entry) die("a dispatch with no pipeline state set");
  dispatch d = e->next; // the bindings stay set for the next dispatch, as in Metal
  for (auto& [at, b] : d.bound)
    retain(b);
  d.grid[0] = static_cast<unsigned>(groups.width);
  d.grid[1] = static_cast<unsigned>(groups.height);
  d.grid[2] = static_cast<unsigned>(groups.depth);
  d.group[0] = static_cast<unsigned>(threads.width);
  d.group[1] = static_cast<unsigned>(threads.height);
  d.group[2] = static_cast<unsigned>(threads.depth);
  e->cb->work.push_back(std::move(d));
}
void enc_end(id self, SEL) { static_cast<encoder*>(self)->ended = true; }
const methods& encoder_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "setComputePipelineState:", &enc_pipeline);
    add(m, "setBuffer:offset:atIndex:", &enc_buffer);
    add(m, "setBytes:length:atIndex:", &enc_bytes);
    add(m, "dispatchThreadgroups:threadsPerThreadgroup:", &enc_dispatch);
    add(m, "endEncoding", &enc_end);
    return with_nsobject(m);
  }());
  return t;
}
encoder::encoder(command_buffer* c) : object(&encoder_methods()), cb(c) {}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::mutex launch_mutex; // one grid at a time: a group's threadgroup arrays are statics

// Runs a command buffer's dispatches: its status is then completed (4) or error (5).
void execute(command_buffer& cb) {
  cb.start = seconds_now();
  for (auto& d : cb.work) {
    // The arguments in index order: buffers' memory, or the bytes set at that index.
    NSUInteger n = 0;
    for (auto& [at, b] : d.bound)
      n = std::max(n, at + 1);
    for (auto& [at, b] : d.bytes)
      n = std::max(n, at + 1);
    std::vector<void*> args(n, nullptr);
    for (auto& [at, b] : d.bound)
      args[at] = static_cast<buffer*>(b)->memory;
    for (auto& [at, b] : d.bytes)
      args[at] = b.data();
    std::lock_guard lock(launch_mutex);
    const std::string why = kiln_cpu::run_grid(d.entry, args.data(), d.grid, d.group);
    if (!why.empty()) {
      cb.status = 5;
      cb.error = "the dispatch failed: " + why;
      break;
    }
  }
  cb.end = seconds_now();
  if (cb.status != 5) cb.status = 4;
}

id cb_encoder(id self, SEL) {
  auto* cb = static_cast<command_buffer*>(self);
  if (cb->status != 0) die("an encoder of a command buffer already committed");
  return autoreleased(make<encoder>(cb));
}
void cb_commit(id self, SEL) {
  auto* cb = static_cast<command_buffer*>(self);
  if (cb->status != 0) die("a command buffer committed twice");
  cb->status = 2; // MTLCommandBufferStatusCommitted
  std::lock_guard lock(cb->q->m);
  cb->q->committed.push_back(static_cast<command_buffer*>(retain(cb)));
}
// Runs the queue's committed command buffers in order, through this one.
void cb_wait(id self, SEL) {
  auto* cb = static_cast<command_buffer*>(self);
  if (cb->status < 2) die("waitUntilCompleted on a command buffer that was not committed");
  std::lock_guard lock(cb->q->m);
  while (cb->status < 4 && !cb->q->committed.empty()) {
    command_buffer* next = cb->q->committed.front();
    cb->q->committed.pop_front();
    execute(*next);
    release(next);
  }
}
NSUInteger cb_status(id self, SEL) { return static_cast<command_buffer*>(self)->status; }
id cb_error(id self, SEL) {
  auto* cb = static_cast<command_buffer*>(self);
  return cb->status == 5 ? autoreleased(make<ns_error>(cb->error)) : nullptr;
}
double cb_start(id self, SEL) { return static_cast<command_buffer*>(self)->start; }
double cb_end(id self, SEL) { return static_cast<command_buffer*>(self)->end; }
const methods& command_buffer_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "computeCommandEncoder", &cb_encoder);
    add(m, "commit", &cb_commit);
    add(m, "waitUntilCompleted", &cb_wait);
    add(m, "status", &cb_status);
    add(m, "error", &cb_error);
    add(m, "GPUStartTime", &cb_start);
    add(m, "GPUEndTime", &cb_end);
    return with_nsobject(m);
  }());
  return t;
}
command_buffer::command_buffer(queue* q_) : object(&command_buffer_methods()), q(q_) { retain(q); }

id queue_command_buffer(id self, SEL) {
  return autoreleased(make<command_buffer>(static_cast<queue*>(self)));
}
const methods& queue_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "commandBuffer", &queue_command_buffer);
    return with_nsobject(m);
  }());
  return t;
}
queue::queue() : object(&queue_methods()) {}

// ---- Metal: the device

// The host image of an MSL program (memoized per source and math, as Metal's compiler keeps
// its own cache); nullptr with the compiler's output in `log`.
std::shared_ptr<image> compile_msl(const std::string& source, bool fast_math, std::string& log) {
  static auto* m = new std::mutex; // both never destroyed
  static auto* done = new std::map<std::pair<std::string, bool>, std::shared_ptr<image>>;
  {
    std::lock_guard lock(*m);
    if (auto it = done->find({source, fast_math}); it != done->end()) return it->second;
  }
  std::vector<std::string> flags{"-std=c++17",
                                 "-O1",
                                 "-fPIC",
                                 "-shared",
                                 "-w",
                                 "-ffp-contract=off",
                                 "-I" DEVICE_ON_CPU_SHIM_DIR "/metal",
                                 "-I" DEVICE_ON_CPU_SHIM_DIR};
  if (std::strstr(DEVICE_ON_CPU_CXX, "clang") == nullptr)
    flags.push_back("-fsingle-precision-constant"); // float literals, as in MSL
  if (fast_math) flags.push_back("-ffast-math");
  for (const auto& f : kiln_cpu::words(DEVICE_ON_CPU_FLAGS))
    flags.push_back(f);
  std::string unit;
  try {
    unit = kiln_msl_unit::host_unit({source});
  } catch (const std::exception& e) {
    log = e.what();
    return nullptr;
  }
  auto img = std::make_shared<image>();
  img->bytes = kiln_cpu::compile_shared(DEVICE_ON_CPU_CXX, flags, unit, log, DEVICE_ON_CPU_PCH_DIR);
  if (img->bytes.empty()) return nullptr;
  img->handle = kiln_cpu::open_image(img->bytes.data(), img->bytes.size(), log);
  if (!img->handle) return nullptr;
  std::lock_guard lock(*m);
  return done->emplace(std::pair{source, fast_math}, img).first->second;
}

struct device : object {
  device();
};
id dev_name(id, SEL) { return autoreleased(make<ns_string>("metal-on-cpu (host threads)")); }
std::uint64_t dev_registry(id, SEL) { return 0x4b494c4e; }
NSUInteger dev_threadgroup_bytes(id, SEL) { return 32768; }
NSUInteger dev_max_buffer(id, SEL) { return NSUInteger{1} << 36; }
id dev_queue(id, SEL) { return make<queue>(); }
id dev_buffer(id, SEL, NSUInteger n, NSUInteger options) {
  if (options != 0) die("kiln's buffers are in shared storage (options 0)");
  void* m = kiln_cpu::device_alloc(n);
  return m ? make<buffer>(m, n) : nullptr;
}
id dev_buffer_bytes(id self, SEL sel, const void* p, NSUInteger n, NSUInteger options) {
  auto* b = static_cast<buffer*>(dev_buffer(self, sel, n, options));
  if (b) std::memcpy(b->memory, p, n);
  return b;
}
id dev_library(id, SEL, id source, id options, id* err) {
  const auto* o = static_cast<compile_options*>(options);
  const std::string src = text_of(source);
  std::string log;
  auto img = compile_msl(src, o ? o->fast_math || !o->precise_functions : true, log);
  if (!img) return fail(err, "Compilation failed:\n" + log);
  return make<library>(img, src);
}
id dev_archive(id, SEL, id desc, id* err) {
  auto* a = make<binary_archive>();
  const std::string path = desc ? static_cast<archive_descriptor*>(desc)->url : "";
  if (path.empty()) return a;
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  bool ok = in.read(magic, 8) && std::memcmp(magic, "MTLARCH1", 8) == 0;
  for (std::string key, img; ok && in.peek() != EOF;) {
    ok = get(in, key) && get(in, img);
    if (ok) a->images[key].assign(img.begin(), img.end());
  }
  if (!ok) {
    release(a);
    return fail(err, "the binary archive at " + path + " is not one");
  }
  return a;
}
id dev_pipeline(id, SEL, id descriptor, NSUInteger options, void* reflection, id* err) {
  auto* d = static_cast<pipeline_descriptor*>(descriptor);
  if (reflection) die("kiln asks for no reflection");
  if (!d || !d->fn) return fail(err, "the descriptor has no compute function");
  const function& f = *d->fn;
  if (options & 4) { // MTLPipelineOptionFailOnBinaryArchiveMiss
    if (d->archives)
      for (object* o : d->archives->items) {
        auto& images = static_cast<binary_archive*>(o)->images;
        auto it = images.find(archive_key(f));
        if (it == images.end()) continue;
        std::string why;
        void* h = kiln_cpu::open_image(it->second.data(), it->second.size(), why);
        if (!h) return fail(err, "the archived pipeline does not load: " + why);
        const kiln_cpu_entry e = kiln_cpu::entry_of(h, f.name);
        if (!e) return fail(err, "the archived pipeline has no " + f.name);
        return make<pipeline>(e);
      }
    return fail(err, "the pipeline is not in the binary archives (MTLPipelineOption"
                     "FailOnBinaryArchiveMiss)");
  }
  const kiln_cpu_entry e = kiln_cpu::entry_of(f.img->handle, f.name);
  if (!e) return fail(err, "no kernel " + f.name);
  return make<pipeline>(e);
}
const methods& device_methods() {
  static const methods& t = *new methods([] {
    methods m;
    add(m, "name", &dev_name);
    add(m, "registryID", &dev_registry);
    add(m, "maxThreadgroupMemoryLength", &dev_threadgroup_bytes);
    add(m, "maxBufferLength", &dev_max_buffer);
    add(m, "newCommandQueue", &dev_queue);
    add(m, "newBufferWithLength:options:", &dev_buffer);
    add(m, "newBufferWithBytes:length:options:", &dev_buffer_bytes);
    add(m, "newLibraryWithSource:options:error:", &dev_library);
    add(m, "newBinaryArchiveWithDescriptor:error:", &dev_archive);
    add(m, "newComputePipelineStateWithDescriptor:options:reflection:error:", &dev_pipeline);
    return with_nsobject(m);
  }());
  return t;
}
device::device() : object(&device_methods()) {}

// ---- the classes by name

template <class T>
methods alloc_class() {
  methods m;
  add(m, "alloc", &alloc_of<T>);
  return m;
}
object* class_named(const std::string& name) {
  static const auto* classes = [] {
    auto* c = new std::map<std::string, object*>; // never destroyed
    auto def = [&](const char* n, methods m) {
      (*c)[n] = make<class_object>(new methods(with_nsobject(std::move(m))));
    };
    methods s, u, a, p;
    add(s, "stringWithUTF8String:", &string_with_utf8);
    add(u, "fileURLWithPath:", &url_with_path);
    add(a, "arrayWithObject:", &array_with_object);
    add(p, "processInfo", &process_info);
    def("NSString", s);
    def("NSURL", u);
    def("NSArray", a);
    def("NSProcessInfo", p);
    def("MTLCompileOptions", alloc_class<compile_options>());
    def("MTLComputePipelineDescriptor", alloc_class<pipeline_descriptor>());
    def("MTLBinaryArchiveDescriptor", alloc_class<archive_descriptor>());
    return c;
  }();
  auto it = classes->find(name);
  return it == classes->end() ? nullptr : it->second;
}

std::uintptr_t nil_method() { return 0; }

} // namespace

extern "C" {

// The method objc_msgSend jumps to.
void* kiln_metal_on_cpu_lookup(id self, SEL sel) {
  if (!self) return reinterpret_cast<void*>(&nil_method);
  auto* o = static_cast<object*>(self);
  {
    std::lock_guard lock(objects().m);
    if (!objects().live.count(o))
      die(std::string("message ") + sel + " to a released (or never made) object");
  }
  auto it = o->table->find(sel);
  if (it == o->table->end()) die(std::string("unrecognized selector ") + sel);
  return it->second;
}

id objc_getClass(const char* name) { return class_named(name); }
SEL sel_registerName(const char* name) { return intern(name); }
void* objc_autoreleasePoolPush() {
  pools.emplace_back();
  return reinterpret_cast<void*>(pools.size());
}
void objc_autoreleasePoolPop(void* token) {
  const auto depth = reinterpret_cast<std::size_t>(token);
  if (depth == 0 || depth != pools.size()) die("autorelease pools popped out of order");
  std::vector<object*> drained = std::move(pools.back());
  pools.pop_back();
  for (object* o : drained)
    release(o);
}
id MTLCreateSystemDefaultDevice() {
  static object* the = make<device>(); // one device; kiln releases its reference at exit
  return retain(the);
}

} // extern "C"

// objc_msgSend: saves the argument registers, asks kiln_metal_on_cpu_lookup for the method,
// restores them and jumps to it, so the method receives the caller's arguments (on the stack
// too, such as MTLSize by value) and returns straight to the caller.
asm(R"(
  .text
  .globl objc_msgSend
  .type objc_msgSend, @function
objc_msgSend:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  subq $192, %rsp
  movq %rdi, 0(%rsp)
  movq %rsi, 8(%rsp)
  movq %rdx, 16(%rsp)
  movq %rcx, 24(%rsp)
  movq %r8, 32(%rsp)
  movq %r9, 40(%rsp)
  movq %rax, 48(%rsp)
  movdqu %xmm0, 64(%rsp)
  movdqu %xmm1, 80(%rsp)
  movdqu %xmm2, 96(%rsp)
  movdqu %xmm3, 112(%rsp)
  movdqu %xmm4, 128(%rsp)
  movdqu %xmm5, 144(%rsp)
  movdqu %xmm6, 160(%rsp)
  movdqu %xmm7, 176(%rsp)
  call kiln_metal_on_cpu_lookup@PLT
  movq %rax, %r11
  movq 0(%rsp), %rdi
  movq 8(%rsp), %rsi
  movq 16(%rsp), %rdx
  movq 24(%rsp), %rcx
  movq 32(%rsp), %r8
  movq 40(%rsp), %r9
  movq 48(%rsp), %rax
  movdqu 64(%rsp), %xmm0
  movdqu 80(%rsp), %xmm1
  movdqu 96(%rsp), %xmm2
  movdqu 112(%rsp), %xmm3
  movdqu 128(%rsp), %xmm4
  movdqu 144(%rsp), %xmm5
  movdqu 160(%rsp), %xmm6
  movdqu 176(%rsp), %xmm7
  movq %rbp, %rsp
  popq %rbp
  .cfi_def_cfa %rsp, 8
  jmp *%r11
  .cfi_endproc
  .size objc_msgSend, .-objc_msgSend
  .section .note.GNU-stack,"",@progbits
  .text
)");
