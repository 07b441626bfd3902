# How a GoogleTest binary of the project is built and registered. Included by the top-level
# CMakeLists.txt before chapters/ and tests/, so that both can use it.
include(GoogleTest)

# dist_add_gtest(NAME LABEL SOURCES...) builds one GoogleTest binary and registers its tests, each
# with LABEL and a 300 s timeout. It links dist_test_support (tests/support: ranks.h and the rest,
# defined in tests/CMakeLists.txt) and GoogleTest's main. The tests are white-box by choice: they
# may include the library's internal headers (common/src) as well as its public ones.
function(dist_add_gtest name label)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE dist_test_support GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/common/src)
  dist_project_warnings(${name})
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${label} TIMEOUT 300
    DISCOVERY_TIMEOUT 60)
endfunction()
