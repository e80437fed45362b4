#pragma once
// SGD with momentum, Nesterov momentum and (L2) weight decay, as PyTorch defines them:
//   g' = g + wd p;  v = mu v + g';  p -= lr (nesterov ? g' + mu v : v)
// Each step is one fused kiln::eval per parameter: the velocity and the parameter are two
// outputs of one pass (every value of a position is computed before any is stored, so
// the parameter's update reads the old velocity). The velocity lives on the parameter's
// device.
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
  sgd(std::vector<tensor<T>> params, sgd_options o) : params_(std::move(params)), o_(o) {
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
    std::size_t i = 0;
    (update(params_[i], velocity_[i], grads, i), ...);
  }
  void set_lr(double lr) { o_.lr = lr; }
  const std::vector<tensor<T>>& velocity() const { return velocity_; }

private:
  template <class G>
  void update(tensor<T>& p, tensor<T>& v, const G& g, std::size_t& i) {
    const T lr = T(o_.lr), mu = T(o_.momentum), wd = T(o_.weight_decay);
    const auto gd = g + wd * p;
    const auto vn = mu * v + gd;
    if (o_.nesterov)
      kiln::eval(v = vn, p = p - lr * (gd + mu * vn));
    else
      kiln::eval(v = vn, p = p - lr * vn);
    ++i;
  }
  std::vector<tensor<T>> params_, velocity_;
  sgd_options o_;
};

} // namespace kiln::optim
