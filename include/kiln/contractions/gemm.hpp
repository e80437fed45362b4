#pragma once
// The host's product kernel (gemm_kernel.hpp) and what it receives (gemm_types.hpp).
#include "kiln/contractions/gemm_kernel.hpp"
#include "kiln/contractions/gemm_types.hpp"
