#pragma once
// kiln without GPU devices: the DSL, the planner, the host executor and autodiff
// (CMake target kiln::core, header-only). <kiln/kiln.hpp> adds the GPU devices.
#include "kiln/creation.hpp"
#include "kiln/device.hpp"
#include "kiln/dtype.hpp"
#include "kiln/error.hpp"
#include "kiln/eval/assign.hpp"
#include "kiln/expr.hpp"
#include "kiln/half.hpp"
#include "kiln/instances.hpp"
#include "kiln/ops/activation.hpp"
#include "kiln/ops/arithmetic.hpp"
#include "kiln/ops/compare.hpp"
#include "kiln/ops/logical.hpp"
#include "kiln/ops/math.hpp"
#include "kiln/ops/select.hpp"
#include "kiln/print.hpp"
#include "kiln/random.hpp"
#include "kiln/reduce.hpp"
#include "kiln/tensor.hpp"
// Symbolic autodiff: grad, vjp (autodiff/ is an include root of kiln::kiln).
#include "kiln/autodiff/grad.hpp"
#include "kiln/autodiff/optim.hpp"
