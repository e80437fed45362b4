// An empty file that carries a precompiled header (tests/pch.hpp for the test files,
// kiln/kiln.hpp for compile_fail/): the targets that use it reuse it (tests/CMakeLists.txt).
