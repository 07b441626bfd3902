# Warnings are errors in project code (STYLE.md, rule 15). Third-party headers come in as SYSTEM
# includes through their imported targets, so their warnings do not stop our build.
# -Wno-missing-field-initializers: options structs are filled with designated initializers,
# `init_process_group({.backend = "gloo"})`, relying on default member values; GCC would warn.
function(dist_project_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor
      -Wno-missing-field-initializers>)
endfunction()
