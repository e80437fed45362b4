#pragma once
// The Objective-C runtime as the Metal runtime (framework.hpp) calls it, opened with dlopen
// so that kiln builds, and its tests run, where there is no Objective-C compiler or Apple SDK:
// classes and selectors by name, messages through objc_msgSend cast to each message's exact
// C type (the call is made with the message's own calling convention, which is what
// objc_msgSend expects: it jumps to the method with the arguments in place), and
// autorelease pools around every group of calls that returns autoreleased objects.
// No message here returns a structure (x86-64 would need objc_msgSend_stret).
#include "kiln/error.hpp"

#include <cstdint>
#include <dlfcn.h>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit::metal::objc {

using id = void*;
using SEL = void*;
using NSUInteger = unsigned long;

// MTLSize, passed by value to dispatchThreadgroups:threadsPerThreadgroup:.
struct mtl_size {
  NSUInteger width, height, depth;
};

struct library {
  id (*get_class)(const char*) = nullptr;      // objc_getClass
  SEL (*register_name)(const char*) = nullptr; // sel_registerName
  void* msg_send = nullptr;                    // objc_msgSend
  void* (*pool_push)() = nullptr;              // objc_autoreleasePoolPush
  void (*pool_pop)(void*) = nullptr;           // objc_autoreleasePoolPop
  id (*create_device)() = nullptr;             // MTLCreateSystemDefaultDevice
  id (*copy_all_devices)() = nullptr;          // MTLCopyAllDevices (macOS; may be absent)
  std::string why_not;                         // empty when loaded
  bool ok() const { return why_not.empty(); }

  // [self sel:a...] returning R.
  template <class R = id, class... A>
  R send(id self, const char* sel, A... a) const {
    using method = R (*)(id, SEL, A...);
    return reinterpret_cast<method>(msg_send)(self, register_name(sel), a...);
  }
  id cls(const char* name) const {
    id c = get_class(name);
    if (!c) throw error("metal", "an Objective-C class is missing", name);
    return c;
  }
  bool responds(id self, const char* sel) const {
    return send<bool>(self, "respondsToSelector:", register_name(sel));
  }
  // An autoreleased NSString of `s`.
  id string(const std::string& s) const {
    return send(cls("NSString"), "stringWithUTF8String:", s.c_str());
  }
  std::string text(id nsstring) const {
    if (!nsstring) return {};
    const char* s = send<const char*>(nsstring, "UTF8String");
    return s ? s : "";
  }
  // What an NSError says (its localizedDescription), or `otherwise` for none.
  std::string describe(id nserror, const char* otherwise = "no error description") const {
    if (!nserror) return otherwise;
    return text(send(nserror, "localizedDescription"));
  }
  void release(id obj) const {
    if (obj) send<void>(obj, "release");
  }
  id retain(id obj) const { return obj ? send(obj, "retain") : nullptr; }
};

// An autorelease pool for the calls in its scope.
class pool {
public:
  explicit pool(const library& l) : l_(l), token_(l.pool_push()) {}
  ~pool() { l_.pool_pop(token_); }
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

private:
  const library& l_;
  void* token_;
};

namespace detail {
template <class F>
void bind(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
}
} // namespace detail

// The runtime from Apple's system libraries, or, with `stand_in` (KILN_METAL_FRAMEWORK), all
// of it from that one library (the test suite's runs generated MSL on the CPU).
inline library load(const std::string& stand_in) {
  library l;
  std::vector<std::string> names;
  if (!stand_in.empty())
    names = {stand_in};
  else
    names = {"/usr/lib/libobjc.A.dylib",
             "/System/Library/Frameworks/Foundation.framework/Foundation",
             // Without CoreGraphics loaded, a command-line program may find no Metal device.
             "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics",
             "/System/Library/Frameworks/Metal.framework/Metal"};
  std::vector<void*> libs;
  for (const auto& n : names) {
    void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      l.why_not = "the Metal framework cannot be loaded: " + (e ? std::string(e) : n);
      return l;
    }
    libs.push_back(h);
  }
  void* objc_lib = libs.front();
  void* metal_lib = libs.back(); // Foundation and CoreGraphics only have to be loaded
  std::string missing;
  detail::bind(objc_lib, "objc_getClass", l.get_class, missing);
  detail::bind(objc_lib, "sel_registerName", l.register_name, missing);
  detail::bind(objc_lib, "objc_msgSend", l.msg_send, missing);
  detail::bind(objc_lib, "objc_autoreleasePoolPush", l.pool_push, missing);
  detail::bind(objc_lib, "objc_autoreleasePoolPop", l.pool_pop, missing);
  detail::bind(metal_lib, "MTLCreateSystemDefaultDevice", l.create_device, missing);
  l.copy_all_devices = reinterpret_cast<id (*)()>(::dlsym(metal_lib, "MTLCopyAllDevices"));
  if (!missing.empty()) l.why_not = "the Metal framework lacks " + missing;
  return l;
}

} // namespace kiln::jit::metal::objc
