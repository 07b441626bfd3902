# Warnings are errors in project code (STYLE.md, rule 15). Third-party headers come in as SYSTEM
# includes through their imported targets, so their warnings do not stop our build.
# -Wno-missing-field-initializers: options structs are filled with designated initializers,
# `init_process_group({.backend = "gloo"})`, relying on default member values; GCC would warn.

# The programs a workshop participant edits (the exercises' starters, chapters/*/exercises/): the
# project's warnings, shown but never fatal, so that an unused variable in a half-written attempt
# still builds and can be graded. Their solutions and mutants are project code, and keep -Werror.
function(dist_participant_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wno-missing-field-initializers>
    # GCC 12 at -O3 (the release preset) warns -Wrestrict inside libstdc++'s own std::string
    # operator+, a false positive (GCC bug 105329, fixed in GCC 13).
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)
endfunction()

# Project code: the same warnings, as errors.
function(dist_project_warnings target)
  dist_participant_warnings(${target})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endfunction()
