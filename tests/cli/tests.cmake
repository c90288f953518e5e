# CLI exit codes: every bad job of tests/job/README.md makes `tripar run` exit 2 with its
# message (the table is the single list of cases; test_job.c checks the same rows through the
# API). Plus the usage and version contracts.
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/job/README.md bad_rows REGEX "^\\| `[^`]+\\.yaml` \\|")
foreach(row ${bad_rows})
  string(REGEX MATCH "^\\| `([^`]+)` \\|[^|]*\\| `(.*)` \\|$" matched "${row}")
  if(NOT matched)
    message(FATAL_ERROR "tests/job/README.md: cannot parse row: ${row}")
  endif()
  set(file ${CMAKE_MATCH_1})
  set(regex ${CMAKE_MATCH_2})
  string(REPLACE ".yaml" "" stem ${file})
  add_test(NAME cli_${stem}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 "${regex}" --
                   $<TARGET_FILE:tripar> run ${CMAKE_CURRENT_SOURCE_DIR}/job/${file})
  set_tests_properties(cli_${stem} PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                       TIMEOUT 60)
endforeach()

add_test(NAME cli_version COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "^tripar [0-9]+\\.[0-9]+\\.[0-9]+" -- $<TARGET_FILE:tripar> --version)
add_test(NAME cli_unknown_command COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2
         "unknown command 'frobnicate'" -- $<TARGET_FILE:tripar> frobnicate)
add_test(NAME cli_run_help COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "usage: tripar run JOB.yaml" -- $<TARGET_FILE:tripar> run --help)
add_test(NAME cli_run_no_job COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2
         "no job file given" -- $<TARGET_FILE:tripar> run)
add_test(NAME cli_dry_run COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "pp_rank: 1, tp_rank: 1, layer_begin: 2, layer_end: 4" -- $<TARGET_FILE:tripar> run
         ${PROJECT_SOURCE_DIR}/jobs/demo.yaml --dry-run)
set_tests_properties(cli_version cli_unknown_command cli_run_help cli_run_no_job cli_dry_run
                     PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)

# --dry-run prints one YAML document: the resolved job plus memory_per_rank.
add_test(NAME cli_dry_run_is_yaml COMMAND sh -c
         "$<TARGET_FILE:tripar> run ${PROJECT_SOURCE_DIR}/jobs/demo.yaml --dry-run | /usr/bin/python3 -c \"import sys, yaml; d = yaml.safe_load(sys.stdin); assert d['parallel']['tp'] == 2 and len(d['memory_per_rank']) == 4, d\"")
set_tests_properties(cli_dry_run_is_yaml PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 60)

# --dry-run for model presets: llama3-70b at tp = 8 equals the hand count in docs/jobs.md.
add_test(NAME cli_dry_run_presets COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_dry_run_presets.py $<TARGET_FILE:tripar> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_dry_run_presets PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}")
