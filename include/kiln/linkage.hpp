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

// What a statement calls (building or destroying a node, a view, a shape or axes written as
// {..}, evaluating, a reduction, a gradient, reading a result) stays a call in the function
// that writes the statement. Inlined, all that a statement instantiates landed in its caller,
// and both compilers' optimizers are superlinear in a function's size (g++'s points-to
// analysis grows with the function's variables times its calls, clang's MemCpyOpt likewise):
// 40 statement blocks in one function compiled 4.3-4.6x slower than the same blocks split
// over 40 functions with g++ 12 (`bench/build_time.sh --statements`). Inside the call
// everything inlines as before.
//
// The values a statement leaves in its caller (nodes, views, shapes, axes) are laid out
// without holes: g++'s points-to analysis splits a struct into one variable per run of
// contiguous fields, and a reduction node with three holes cost it four there.
#define KILN_STATEMENT [[gnu::noinline]]
