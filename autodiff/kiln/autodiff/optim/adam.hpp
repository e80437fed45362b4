#pragma once
// Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), as PyTorch defines them:
//   g' = g + wd p (Adam's L2 decay)   or   p -= lr wd p (AdamW's decoupled decay)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// Each step is one fused kiln::eval per parameter with three outputs (m, v, p); the
// moments live on the parameter's device. The step count and what depends on it (and on the
// learning rate) are step values (step_values.hpp): a captured step replays them.
#include "kiln/autodiff/optim/step_values.hpp"
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
  adam(std::vector<tensor<T>> params, adam_options o)
      : params_(std::move(params)), state_(std::make_shared<state>(state{o, {}})) {
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
    detail::advance_step(state_, [](state& s) {
      const adam_options& o = s.options;
      ++s.values.steps;
      s.values.set(lr_at, o.lr);
      s.values.set(bc1_at, 1 - std::pow(o.beta1, double(s.values.steps)));
      s.values.set(bc2_at, 1 - std::pow(o.beta2, double(s.values.steps)));
      s.values.set(keep_at, o.decoupled ? 1 - o.lr * o.weight_decay : 1);
    });
    detail::adopt_all(params_);
    detail::adopt_all(m_);
    detail::adopt_all(v_);
    std::size_t i = 0;
    (update(i, grads), ...);
  }
  // (A copy has its own step count and options; its moments are the same tensors.)
  adam(const adam& a)
      : params_(a.params_), m_(a.m_), v_(a.v_), state_(std::make_shared<state>(*a.state_)) {}
  adam& operator=(const adam& a) {
    if (this != &a) *this = adam(a);
    return *this;
  }
  adam(adam&&) noexcept = default;
  adam& operator=(adam&&) noexcept = default;
  void set_lr(double lr) { state_->options.lr = lr; }
  long steps() const { return state_->values.steps; }
  // The moments, one per parameter, on its device (to save or inspect the state).
  const std::vector<tensor<T>>& first_moments() const { return m_; }
  const std::vector<tensor<T>>& second_moments() const { return v_; }

private:
  template <class G>
  void update(std::size_t& i, const G& g) {
    tensor<T>&p = params_[i], &m = m_[i], &v = v_[i];
    const adam_options& o = state_->options;
    const T b1 = T(o.beta1), b2 = T(o.beta2), eps = T(o.eps);
    const auto& s = state_->values;
    const auto lr = s[lr_at], bc1 = s[bc1_at], bc2 = s[bc2_at], keep = s[keep_at];
    const T l2 = o.decoupled ? T(0) : T(o.weight_decay);
    const auto gd = g + l2 * p;
    const auto mn = b1 * m + (T(1) - b1) * gd;
    const auto vn = b2 * v + (T(1) - b2) * gd * gd;
    kiln::eval(m = mn, v = vn, p = keep * p - lr * (mn / bc1) / (kiln::sqrt(vn / bc2) + eps));
    ++i;
  }
  // The step count and, for the current step, the learning rate, the bias corrections
  // 1 - b1^t and 1 - b2^t, and AdamW's 1 - lr wd (1 for Adam).
  static constexpr std::size_t lr_at = 0, bc1_at = 1, bc2_at = 2, keep_at = 3;
  struct state {
    adam_options options;
    detail::step_values<T, 4> values;
  };
  std::vector<tensor<T>> params_, m_, v_;
  std::shared_ptr<state> state_; // shared with a captured plan's replays of step()
};

} // namespace kiln::optim
