// The includes of xtensor_one.cpp and xtensor_20.cpp and an empty main: the cost of parsing the
// headers (build-time input; see ../build_time.sh).
#ifndef XTENSOR_USE_XSIMD
#define XTENSOR_USE_XSIMD // xtensor with xsimd, as kiln uses it
#endif
#include "data.hpp"

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>

int main() {}
