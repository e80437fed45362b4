#pragma once
// Learning-rate schedules: functions of the step number t (0-based).
#include <algorithm>
#include <cmath>

namespace kiln::optim {

// lr * gamma^(t / every), as PyTorch's StepLR.
inline double step_lr(double lr, long t, long every, double gamma) {
  return lr * std::pow(gamma, double(t / every));
}
// Cosine annealing from lr to lr_min over `total` steps (then lr_min).
inline double cosine_lr(double lr, long t, long total, double lr_min = 0) {
  const double c = double(std::min(t, total)) / double(total);
  return lr_min + 0.5 * (lr - lr_min) * (1 + std::cos(M_PI * c));
}
// Linear warmup from lr / warmup to lr over the first `warmup` steps, then `after(t)`.
template <class F>
double warmup_lr(double lr, long t, long warmup, F after) {
  return t < warmup ? lr * double(t + 1) / double(warmup) : after(t);
}
inline double warmup_lr(double lr, long t, long warmup) {
  return warmup_lr(lr, t, warmup, [lr](long) { return lr; });
}

} // namespace kiln::optim
