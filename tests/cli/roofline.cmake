# Per-phase rooflines (docs/benchmarks.md, "Per-phase rooflines"): real tiny runs with and
# without bench.roofline, `tripar report --roofline` (text, --json, --csv) checked against the
# run files and the label rule, `tools/plot.py roofline`, and the files it must refuse.
# roofline_check.py says what it checks. Included from tests/cli/tests.cmake.
add_test(NAME cli_report_roofline
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/roofline_check.py
                 ${CMAKE_CURRENT_BINARY_DIR}/cli_roofline)
set_tests_properties(cli_report_roofline PROPERTIES LABELS "mpi;cli;bench"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}"
                     TIMEOUT 300)

# The files every tool refuses or warns about (tools.cmake's fixtures), through --roofline.
tools_test(tools_report_roofline_incomplete_warns 0 "^tripar report: warning: .*incomplete\\.h5 is an incomplete run file" 1
           report --roofline @W@/incomplete.h5)
tools_test(tools_report_roofline_newer_format 2 "^tripar report: .*newer\\.h5: run file format_version 2 \\(written by a newer tripar\\)" 1
           report --roofline @W@/newer.h5)
tools_test(tools_report_roofline_foreign 2 "^tripar report: .*foreign\\.h5: not a tripar run file" 1
           report --roofline @W@/foreign.h5)
