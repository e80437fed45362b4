// The includes of eigen_one.cpp and eigen_20.cpp and an empty main: the cost of parsing the
// headers (build-time input; see ../build_time.sh).
#include "data.hpp"

#include <Eigen/Core>

int main() {}
