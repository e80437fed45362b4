#pragma once
// Optimizers as fused update expressions (kiln::optim).
#include "kiln/autodiff/optim/adam.hpp"
#include "kiln/autodiff/optim/clip.hpp"
#include "kiln/autodiff/optim/schedule.hpp"
#include "kiln/autodiff/optim/sgd.hpp"
