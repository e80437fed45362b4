// The includes of kiln_one.cpp and kiln_20.cpp and an empty main: the cost of parsing the
// headers (build-time input; see ../build_time.sh).
#include "data.hpp"

#include <kiln/kiln.hpp>

int main() {}
