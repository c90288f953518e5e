# `tripar explain` (issue 16, items 1 and 3; docs/explain.md): real tiny runs and files with
# planted differences (explain_plant.py says how each is planted and what is checked), and the
# files explain must refuse. Included from tests/cli/tests.cmake.
set(EXPLAIN_WORK ${CMAKE_CURRENT_BINARY_DIR}/explain_files)
# The files come from tripar runs, which start MPI: leak checks stay off there, as for the other
# MPI tests (Open MPI leaks past MPI_Finalize); the checks on the files run with them on.
add_test(NAME explain_make_files
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/explain_plant.py make ${EXPLAIN_WORK})
set_tests_properties(explain_make_files PROPERTIES FIXTURES_SETUP explain_files LABELS "mpi;cli"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};ASAN_OPTIONS=detect_leaks=0"
                     TIMEOUT 300)
# A slower MLP, a longer pipeline bubble, an added host gap, a slower prefill that faster
# decode pays back; several OTHER files in every format.
foreach(case mlp bubble gap cancel formats)
  add_test(NAME explain_planted_${case}
           COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/explain_plant.py check ${EXPLAIN_WORK} ${case})
  set_tests_properties(explain_planted_${case} PROPERTIES FIXTURES_REQUIRED explain_files
                       LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120)
endforeach()

# explain_refuses(NAME REGEX BASE OTHER): exit 2, one "tripar explain: ..." line matching REGEX,
# no HDF5 error stack. @E@ is explain's fixture directory, @W@ the run-file tools' (tools.cmake).
function(explain_refuses name regex base other)
  string(REPLACE "@E@" "${EXPLAIN_WORK}" base "${base}")
  string(REPLACE "@W@" "${TOOLS_WORK}" base "${base}")
  string(REPLACE "@E@" "${EXPLAIN_WORK}" other "${other}")
  string(REPLACE "@W@" "${TOOLS_WORK}" other "${other}")
  add_test(NAME explain_refuses_${name} COMMAND ${TOOLS_EXPECT} 2 "^tripar explain: ${regex}" 1 --
           $<TARGET_FILE:tripar> explain ${base} ${other})
  set_tests_properties(explain_refuses_${name} PROPERTIES
                       FIXTURES_REQUIRED "explain_files;tools_files" LABELS "unit;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)
endfunction()
explain_refuses(foreign ".*foreign\\.h5: not a tripar run file" @E@/base.h5 @W@/foreign.h5)
explain_refuses(checkpoint ".*ckpt\\.h5: not a tripar run file .*\"tripar-checkpoint\"" @W@/ckpt.h5 @E@/base.h5)
explain_refuses(incomplete ".*incomplete\\.h5 is an incomplete run file \\(complete=0\\); explain needs whole iterations$"
                @W@/run.h5 @W@/incomplete.h5)
explain_refuses(step_level ".*steplevel\\.h5: timings are not at layer level" @E@/base.h5 @E@/steplevel.h5)
explain_refuses(other_model ".*base\\.h5 and .*embd32\\.h5 ran incomparable models \\(base vs other: embd: 16 vs 32\\)"
                @E@/base.h5 @E@/embd32.h5)
add_test(NAME explain_usage COMMAND ${TOOLS_EXPECT} 2 "^tripar explain: needs BASE\\.h5 and at least one OTHER\\.h5$" 1 --
         $<TARGET_FILE:tripar> explain ${EXPLAIN_WORK}/base.h5)
set_tests_properties(explain_usage PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 60)
# -o follows the output rules of docs/cli.md: never an input, compared by inode ("./" caught).
add_test(NAME explain_out_is_input COMMAND ${TOOLS_EXPECT} 2
         "^tripar explain: -o '.*/\\./base\\.h5' is the same file as the input '.*base\\.h5'" 1 --
         $<TARGET_FILE:tripar> explain ${EXPLAIN_WORK}/base.h5 ${EXPLAIN_WORK}/mlp.h5
         -o ${EXPLAIN_WORK}/./base.h5)
set_tests_properties(explain_out_is_input PROPERTIES FIXTURES_REQUIRED explain_files
                     LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)

# What explain names on real runs with one cause planted (issue 29; explain_straggler.py says
# how each is planted): a busy loop on one rank's core at tp=2 and at pp=2, a slowed
# all-reduce, a pipeline bubble, a precision change; and, on planted files, /sched's
# preemption and the critical rank's lead against the noise. Each asserts names, never a time.
foreach(case tp_straggler pp_straggler allreduce bubble precision sched lead)
  add_test(NAME explain_names_${case}
           COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/explain_straggler.py test
                   ${CMAKE_CURRENT_BINARY_DIR}/explain_names_${case} ${case})
  set_tests_properties(explain_names_${case} PROPERTIES LABELS "mpi;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};ASAN_OPTIONS=detect_leaks=0"
                       TIMEOUT 300)
endforeach()
# The planted loops must not share the machine with another test's ranks, nor the all-reduce's
# transports another test's load; the precision case compares two runs' GEMM rows, which 8
# oversubscribed ranks of a factorization test beside it blurred once (ctest -j2).
set_tests_properties(explain_names_tp_straggler explain_names_pp_straggler
                     explain_names_allreduce explain_names_precision PROPERTIES RUN_SERIAL TRUE)
