# Job files: the cmocka test of job_load/job_dump against the fixtures in tests/job, and
# self-tests of tests/expect_exit.sh, the helper for CLI exit-code tests.
tripar_unit_test(test_job SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/job/test_job.c LABELS jobs)
target_compile_definitions(test_job PRIVATE TRIPAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

set(TRIPAR_EXPECT_EXIT ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh)
add_test(NAME expect_exit_pass
         COMMAND ${TRIPAR_EXPECT_EXIT} 2 "bad: line [0-9]+" -- sh -c "echo 'bad: line 7' >&2; exit 2")
add_test(NAME expect_exit_wrong_code
         COMMAND ${TRIPAR_EXPECT_EXIT} 2 "bad" -- sh -c "echo bad; exit 1")
add_test(NAME expect_exit_wrong_output
         COMMAND ${TRIPAR_EXPECT_EXIT} 0 "^expected$" -- sh -c "echo other")
set_tests_properties(expect_exit_wrong_code expect_exit_wrong_output PROPERTIES WILL_FAIL TRUE)
set_tests_properties(expect_exit_pass expect_exit_wrong_code expect_exit_wrong_output
                     PROPERTIES LABELS "unit;jobs" TIMEOUT 30)

# CLI checks with files made at test time (tests/job/cli_checks.sh): 100k- and 250k-deep files,
# files over the size, node and directive limits, FIFOs and directories as job and input files,
# and messages that name --sweep or the --set that gave input.text. Each refusal must exit 2
# within 10 s. Leak checks are off for them as for every test of the tripar binary: Open MPI
# keeps allocations past MPI_Finalize; test_job checks the parser's own leaks in-process.
foreach(check deep huge fifo directory sweep text_origin)
  add_test(NAME job_cli_${check} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/job/cli_checks.sh ${check}
           ${CMAKE_CURRENT_BINARY_DIR}/job_cli_${check})
  set_tests_properties(job_cli_${check} PROPERTIES LABELS "unit;jobs;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV};ASAN_OPTIONS=detect_leaks=0" TIMEOUT 120)
endforeach()
