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
