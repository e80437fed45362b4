#pragma once
// Helpers of the autodiff tests: central finite differences in f64 (Richardson-extrapolated,
// so the reference itself is good to about 1e-10) and a relative-error comparison.
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace grad_test {

// d/dv of a scalar function at v.
inline double fd1(const std::function<double(double)>& f, double v, double h = 1e-3) {
  auto d = [&](double s) { return (f(v + s) - f(v - s)) / (2 * s); };
  return (4 * d(h / 2) - d(h)) / 3;
}

// The gradient of the scalar expression f with respect to every element of the contiguous
// host tensor x, by perturbing x's storage in place (f reads it lazily).
template <class F>
std::vector<double> fd_grad(const F& f, const kiln::tensor<double>& x, double h = 1e-3) {
  std::vector<double> g(static_cast<std::size_t>(x.size()));
  double* p = x.data();
  for (std::int64_t i = 0; i < x.size(); ++i) {
    const double v = p[i];
    g[static_cast<std::size_t>(i)] = fd1(
        [&](double t) {
          p[i] = t;
          const double r = kiln::tensor<double>(f).item();
          p[i] = v;
          return r;
        },
        v, h);
  }
  return g;
}

inline double rel_error(double got, double want) {
  return std::fabs(got - want) / std::max(1.0, std::fabs(want));
}

// Every element within `tol` (relative, floor 1), with the first bad one reported.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                        const std::string& what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::isfinite(got[i]) ? rel_error(got[i], want[i]) : INFINITY;
    if (e > worst) worst = e, at = i;
  }
  INFO(what << ": element " << at << " got " << got[at] << " want " << want[at]
            << " (relative error " << worst << ")");
  CHECK(worst < tol);
}

// check_close against finite differences, only where f is smooth within the steps: where a
// `where` in f flips (a jump) or a kink lies within ±h of the point, the estimates at steps
// h and h/4 disagree, and that element is left out. At least half must remain.
template <class F>
void check_close_where_smooth(const std::vector<double>& got, const F& f,
                              const kiln::tensor<double>& x, double tol, const std::string& what) {
  const auto coarse = fd_grad(f, x, 1e-3), fine = fd_grad(f, x, 2.5e-4);
  std::vector<double> g, w;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (rel_error(coarse[i], fine[i]) < 1e-5) g.push_back(got[i]), w.push_back(fine[i]);
  INFO(what << ": " << g.size() << " of " << got.size() << " elements where f is smooth");
  CHECK(2 * g.size() >= got.size());
  check_close(g, w, tol, what);
}

inline kiln::tensor<double> from(const std::vector<double>& v, const kiln::shape& s) {
  return kiln::from(v, s);
}

} // namespace grad_test
