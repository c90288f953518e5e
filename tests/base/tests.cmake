# Base area: the statistics helpers, and the house plan itself: no file includes a header from a
# layer above its own, and the engine never calls MPI (docs/design.md, "House plan").
tripar_unit_test(records_stats SOURCES base/test_stats.c LABELS records)
tripar_unit_test(base_path SOURCES base/test_path.c)

add_test(NAME layers_include_only_below
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_layers.py ${PROJECT_SOURCE_DIR})
set_tests_properties(layers_include_only_below PROPERTIES LABELS "unit" TIMEOUT 60)
add_test(NAME layers_checker_self_test
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/base/check_layers.py --self-test)
set_tests_properties(layers_checker_self_test PROPERTIES LABELS "unit" TIMEOUT 60)
