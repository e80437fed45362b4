#pragma once
// SGD with momentum, Nesterov momentum and (L2) weight decay, as PyTorch defines them:
//   g' = g + wd p;  v = mu v + g';  p -= lr (nesterov ? g' + mu v : v)
// Each step is one fused kiln::eval per parameter: the velocity and the parameter are two
// outputs of one pass (every value of a position is computed before any is stored, so
// the parameter's update reads the old velocity). The velocity lives on the parameter's
// device.
#include "kiln/autodiff/optim/step_values.hpp"
#include "kiln/creation.hpp"
#include "kiln/eval/assign.hpp"

#include <utility>
#include <vector>

namespace kiln::optim {

struct sgd_options {
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

template <element T>
class sgd {
public:
  sgd(std::vector<tensor<T>> params, sgd_options o)
      : params_(std::move(params)), state_(std::make_shared<state>(state{o, {}})) {
    for (const auto& p : params_)
      velocity_.push_back(kiln::zeros<T>(p.shape(), p.device()));
  }
  // One gradient expression per parameter, in the order the parameters were given.
  template <class... G>
  void step(const G&... grads) {
    if (sizeof...(G) != params_.size())
      throw error("sgd", "one gradient per parameter",
                  std::to_string(sizeof...(G)) + " gradients for " +
                      std::to_string(params_.size()));
    // The learning rate as a step value: a captured step reads the one set_lr last gave.
    detail::advance_step(state_, [](state& s) {
      ++s.values.steps;
      s.values.set(0, s.options.lr);
    });
    detail::adopt_all(params_);
    detail::adopt_all(velocity_);
    std::size_t i = 0;
    (update(params_[i], velocity_[i], grads, i), ...);
  }
  // (A copy has its own options; its velocities are the same tensors.)
  sgd(const sgd& a)
      : params_(a.params_), velocity_(a.velocity_), state_(std::make_shared<state>(*a.state_)) {}
  sgd& operator=(const sgd& a) {
    if (this != &a) *this = sgd(a);
    return *this;
  }
  sgd(sgd&&) noexcept = default;
  sgd& operator=(sgd&&) noexcept = default;
  void set_lr(double lr) { state_->options.lr = lr; }
  const std::vector<tensor<T>>& velocity() const { return velocity_; }

private:
  template <class G>
  void update(tensor<T>& p, tensor<T>& v, const G& g, std::size_t& i) {
    const sgd_options& o = state_->options;
    const auto lr = state_->values[0];
    const T mu = T(o.momentum), wd = T(o.weight_decay);
    const auto gd = g + wd * p;
    const auto vn = mu * v + gd;
    if (o.nesterov)
      kiln::eval(v = vn, p = p - lr * (gd + mu * vn));
    else
      kiln::eval(v = vn, p = p - lr * vn);
    ++i;
  }
  struct state {
    sgd_options options;
    detail::step_values<T, 1> values;
  };
  std::vector<tensor<T>> params_, velocity_;
  std::shared_ptr<state> state_; // shared with a captured plan's replays of step()
};

} // namespace kiln::optim
