#pragma once
// Where kiln's non-template functions (the host pass, the planner, device lowering, shape
// arithmetic, errors...) are compiled. By default they are inline, in every file that
// includes kiln (header-only). With KILN_COMPILED_CORE defined in every file of a program
// (CMake's kiln::kiln defines it), the headers only declare them, and they are compiled
// once, with the device runtime: in the kiln_runtime library, or, without CMake, in the one
// file that includes <kiln/jit/src.hpp>. Each header with such functions keeps their
// definitions in a sibling *_impl.hpp, which it includes unless KILN_COMPILED_CORE is
// defined; kiln/core_impl.hpp lists them all. With the macro, tensor<T> and a few creation
// templates are also instantiated there for every dtype (kiln/instances.hpp): the program's
// files and the runtime must then be compiled with the same ABI-affecting flags (as with
// any library; _GLIBCXX_DEBUG in one and not the other, say, is not supported).
#ifdef KILN_COMPILED_CORE
#define KILN_CORE_INLINE
#define KILN_CORE_DEFINITIONS 0
#else
#define KILN_CORE_INLINE inline
#define KILN_CORE_DEFINITIONS 1
#endif

// What a statement calls (building a node, evaluating it, a reduction's pass, reading a
// result) stays a call in the function that writes the statement: inlined, all that a
// statement instantiates landed in its caller, and g++'s points-to analysis is superlinear
// in a function's size (its cost grows with the function's variables times its calls), so a
// function of 20 statement blocks compiled 1.6x slower than the same blocks split over 20
// functions (bench/build_time.sh, "statements in one function"). Inside the call everything
// inlines as before.
#define KILN_STATEMENT [[gnu::noinline]]
