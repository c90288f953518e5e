# Base area: the statistics helpers, and the house plan itself: no file includes a header from a
# layer above its own, the engine never calls MPI nor opens a file, raw MPI calls stay where
# they belong, and no files of one folder call each other in a circle (docs/design.md, "House plan").
tripar_unit_test(records_stats SOURCES base/test_stats.c LABELS records)
tripar_unit_test(base_path SOURCES base/test_path.c)
# The memory-limit readers on fixture trees of /proc and /sys/fs/cgroup (tests/base/memlimit/).
tripar_unit_test(base_memlimit SOURCES base/test_memlimit.c)
target_compile_definitions(base_memlimit
                           PRIVATE MEMLIMIT_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/base/memlimit")

add_test(NAME layers_include_only_below
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers_include_only_below PROPERTIES LABELS "unit" TIMEOUT 60)
add_test(NAME layers_checker_self_test
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_layers.py --self-test)
set_tests_properties(layers_checker_self_test PROPERTIES LABELS "unit" TIMEOUT 60)

# Inside a folder, files call each other in a chain, never in a circle (check_calls.py reads the
# call graph off the built objects with nm).
add_test(NAME layers_files_call_no_circle
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_calls.py ${PROJECT_BINARY_DIR}
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(layers_files_call_no_circle PROPERTIES LABELS "unit" TIMEOUT 60)
add_test(NAME layers_calls_checker_self_test
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_calls.py --self-test)
set_tests_properties(layers_calls_checker_self_test PROPERTIES LABELS "unit" TIMEOUT 60)
