#pragma once
// Where kiln's non-template functions (the host pass, the planner, errors...) are
// compiled. By default they are inline, in every file that includes kiln (header-only).
// With KILN_COMPILED_CORE defined in every file of a program (CMake's kiln::kiln defines
// it), the headers only declare them, and they are compiled once, with the device runtime:
// in the kiln_runtime library, or, without CMake, in the one file that includes
// <kiln/jit/src.hpp>. Each header with such functions keeps their definitions in a sibling
// *_impl.hpp, which it includes unless KILN_COMPILED_CORE is defined; kiln/core_impl.hpp
// lists them all.
#ifdef KILN_COMPILED_CORE
#define KILN_CORE_INLINE
#define KILN_CORE_DEFINITIONS 0
#else
#define KILN_CORE_INLINE inline
#define KILN_CORE_DEFINITIONS 1
#endif
