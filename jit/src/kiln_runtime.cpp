// The kiln_runtime library: the JIT compiled once (see kiln/jit/src.hpp).
#include "kiln/jit/src.hpp"
