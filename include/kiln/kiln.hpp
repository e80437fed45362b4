#pragma once
// Everything kiln offers, on the host and on GPU devices: include this one header.
#include "kiln/core.hpp"
// GPU devices: the JIT and its backends (jit/ is an include root of kiln::kiln; its
// implementation is compiled once per program, see kiln/jit/jit.hpp).
#include "kiln/jit/jit.hpp"
