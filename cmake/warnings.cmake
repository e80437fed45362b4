# Warnings for kiln's own targets (tests, examples, benchmarks), not for users.
function(kiln_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 warns inside its own avx512fintrin.h when xsimd's intrinsics are inlined
    # (a false positive, GCC bug 105593, fixed in GCC 13); clang builds keep both warnings.
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
    # GCC 12 at -O3 reports impossible overlaps inside std::string's own memcpy
    # (-Wrestrict false positive, GCC bug 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
endfunction()
