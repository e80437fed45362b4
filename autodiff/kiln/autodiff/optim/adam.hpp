#pragma once
// Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), as PyTorch defines them:
//   g' = g + wd p (Adam's L2 decay)   or   p -= lr wd p (AdamW's decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// Each step is one fused kiln::eval per parameter with three outputs (m, v, p); the
// moments live on the parameter's device.
#include "kiln/creation.hpp"
#include "kiln/eval/assign.hpp"
#include "kiln/ops/math.hpp"

#include <cmath>
#include <utility>
#include <vector>

namespace kiln::optim {

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled = false; // true: AdamW
};

template <element T>
class adam {
public:
  adam(std::vector<tensor<T>> params, adam_options o) : params_(std::move(params)), o_(o) {
    for (const auto& p : params_) {
      m_.push_back(kiln::zeros<T>(p.shape(), p.device()));
      v_.push_back(kiln::zeros<T>(p.shape(), p.device()));
    }
  }
  template <class... G>
  void step(const G&... grads) {
    if (sizeof...(G) != params_.size())
      throw error("adam", "one gradient per parameter",
                  std::to_string(sizeof...(G)) + " gradients for " +
                      std::to_string(params_.size()));
    ++t_;
    std::size_t i = 0;
    (update(i, grads), ...);
  }
  void set_lr(double lr) { o_.lr = lr; }
  long steps() const { return t_; }
  // The moments, one per parameter, on its device (to save or inspect the state).
  const std::vector<tensor<T>>& first_moments() const { return m_; }
  const std::vector<tensor<T>>& second_moments() const { return v_; }

private:
  template <class G>
  void update(std::size_t& i, const G& g) {
    tensor<T>&p = params_[i], &m = m_[i], &v = v_[i];
    const T b1 = T(o_.beta1), b2 = T(o_.beta2), eps = T(o_.eps), lr = T(o_.lr);
    const T bc1 = T(1 - std::pow(o_.beta1, double(t_))),
            bc2 = T(1 - std::pow(o_.beta2, double(t_)));
    const T l2 = o_.decoupled ? T(0) : T(o_.weight_decay);
    const T keep = o_.decoupled ? T(1 - o_.lr * o_.weight_decay) : T(1);
    const auto gd = g + l2 * p;
    const auto mn = b1 * m + (T(1) - b1) * gd;
    const auto vn = b2 * v + (T(1) - b2) * gd * gd;
    kiln::eval(m = mn, v = vn, p = keep * p - lr * (mn / bc1) / (kiln::sqrt(vn / bc2) + eps));
    ++i;
  }
  std::vector<tensor<T>> params_, m_, v_;
  adam_options o_;
  long t_ = 0;
};

} // namespace kiln::optim
