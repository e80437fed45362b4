// Compiles tests/pch.hpp once; the test files reuse it (tests/CMakeLists.txt).
