#pragma once
// The random statement sequences of the plan tests (test_plan.cpp on the host,
// test_plan_vulkan.cpp on vulkan:0): a drawn sequence of statements over drawn shapes, views
// and argument sharing, run from a captured plan and as written, compared bit for bit.
#include "support.hpp"

#include <cstring>
#include <sstream>

namespace plan_test {

using kiln::tensor;

template <class T>
bool same_bits(const tensor<T>& x, const tensor<T>& y) {
  const auto a = x.to_vector(), b = y.to_vector();
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
tensor<T> drawn(const kiln::shape& s) {
  return kiln::from(test::uniform<T>(std::size_t(kiln::numel(s)), -2, 2), s);
}

// A statement of the random sequences: one of a fixed menu over the arguments x, y, z, w
// (one shape) and the parameter p; each reads and writes some of them (in place, through
// views, through temporaries the planner makes, several outputs at once, reductions).
template <class T>
void statement(int kind, tensor<T>& x, tensor<T>& y, tensor<T>& z, tensor<T>& w, kiln::param<T> p) {
  const kiln::shape s = x.shape();
  switch (kind) {
  case 0:
    z = x * y + w * p;
    break;
  case 1: // in place
    x = x * p + kiln::sin(y);
    break;
  case 2: // a reduction broadcast back
    w = kiln::sum(x * y) * T(0.01) + z;
    break;
  case 3: // two outputs, the second reading the first's old values
    kiln::eval(z = x + y, w = x * z);
    break;
  case 4: { // a temporary the function makes
    tensor<T> t = kiln::exp(-x * x) * p;
    y = t + y * T(0.5);
    break;
  }
  case 5: // a view of an argument written from a view of another
    if (s.size() >= 1 && s[0] >= 2) {
      const std::int64_t h = s[0] / 2;
      x.narrow(0, 0, h) = y.narrow(0, s[0] - h, h) * T(2) + x.narrow(0, 0, h);
    } else {
      x = x - y;
    }
    break;
  case 6:                                    // a reduction along an axis, kept and broadcast
    if (s.size() >= 1 && kiln::numel(s) > 0) // (max over an empty axis is an error)
      z = x - kiln::mean(x, 0, true) + kiln::max(y, -1, true) * p;
    else
      z = x + p;
    break;
  case 7: // an output read through another layout: the planner's temporary
    if (s.size() == 2 && s[0] == s[1])
      x = x.transpose() + y;
    else
      x = kiln::tanh(x) + y;
    break;
  case 8: { // a reduction's result, kept, in a pass
    tensor<T> m = s.size() ? tensor<T>(kiln::sum(x * x, -1, true)) : tensor<T>(kiln::sum(x * x));
    w = kiln::sqrt(m + T(1)) * y;
    break;
  }
  default: // a chain of views: the reverse of a row, a broadcast column
    if (s.size() == 2 && s[1] >= 1)
      y = y.slice(1, s[1] - 1, -1 - s[1], -1) * T(0.5) + x.narrow(1, 0, 1);
    else
      y = y * T(0.5) + x;
    break;
  }
}
constexpr int n_kinds = 10;

template <class T>
void run_sequence(const std::vector<int>& seq, tensor<T>& x, tensor<T>& y, tensor<T>& z,
                  tensor<T>& w, kiln::param<T> p) {
  for (const int k : seq)
    statement(k, x, y, z, w, p);
}

// One case: a drawn sequence and shape; the plan is called several times with new values
// (and alternately with the arguments' roles traded) against the same sequence as written.
template <class T>
void random_case(int c, const kiln::device& dev = {}) {
  const int rank = test::draw(0, 3);
  kiln::shape s;
  for (int d = 0; d < rank; ++d)
    s.push_back(test::draw(0, 9) == 0 ? test::draw(0, 1) : test::draw(1, 12));
  if (c % 7 == 3) s = {std::int64_t(test::draw(300, 400)), 512}; // passes split over threads
  if (c % 5 == 1 && rank == 2) s[1] = s[0];                      // square: transposes alias
  std::vector<int> seq(std::size_t(test::draw(1, 8)));
  for (int& k : seq)
    k = test::draw(0, n_kinds - 1);
  // Argument sharing: y may be x itself (both at capture and at every replay).
  const bool shared = test::draw(0, 4) == 0;
  std::ostringstream what;
  what << "case " << c << " shape " << s.str() << (shared ? " y = x" : "") << " sequence";
  for (int k : seq)
    what << ' ' << k;
  INFO(what.str());
  auto plan = kiln::capture([&](tensor<T>& x, tensor<T>& y, tensor<T>& z, tensor<T>& w,
                                kiln::param<T> p) { run_sequence(seq, x, y, z, w, p); },
                            {.name = "random sequence"});
  tensor<T> a[4], b[4];
  for (int call = 0; call < 4; ++call) {
    for (int i = 0; i < 4; ++i) {
      a[i] = drawn<T>(s).to(dev);
      b[i] = a[i].clone();
    }
    const T p = T(test::draw(1, 9)) / T(8);
    tensor<T>&ay = shared ? a[0] : a[1], &by = shared ? b[0] : b[1];
    if (call % 2 == 0) {
      plan(a[0], ay, a[2], a[3], p);
      run_sequence<T>(seq, b[0], by, b[2], b[3], kiln::param<T>(p));
    } else { // the same plan, the tensors in other roles (z and w traded)
      plan(a[0], ay, a[3], a[2], p);
      run_sequence<T>(seq, b[0], by, b[3], b[2], kiln::param<T>(p));
    }
    for (int i = 0; i < 4; ++i) {
      INFO("call " << call << " argument " << i);
      REQUIRE(same_bits(a[i], b[i]));
    }
  }
  CHECK(plan.recordings() == 1);
}

} // namespace plan_test
