#pragma once
// The fusion JIT: evaluation of expressions on GPU devices, and the backends built in.
#include "kiln/jit/cuda_backend.hpp"
#include "kiln/jit/evaluate.hpp"
#include "kiln/jit/reduce.hpp"
#include "kiln/jit/vulkan_backend.hpp"
