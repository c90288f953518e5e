# Records end to end (label mpi): real multi-rank runs of tests/records_e2e/mesh.yaml, their
# timing events checked against the schedule, the run file against docs/schema.md, the tools
# (report, diff, trace, plot.py) on them, and runs stopped by SIGTERM or broken by SIGKILL.
# The events tests leave their files in records_e2e_out for the tool tests (fixture).
set(E2E ${CMAKE_CURRENT_SOURCE_DIR}/records_e2e)
set(E2E_OUT ${CMAKE_CURRENT_BINARY_DIR}/records_e2e_out)
# Open MPI and HDF5 keep allocations past MPI_Finalize (see tests/records/tests.cmake).
set(E2E_ENV ${TRIPAR_TEST_ENV} MPIEXEC=${MPIEXEC_EXECUTABLE} ASAN_OPTIONS=detect_leaks=0)

function(records_e2e_test name)
  cmake_parse_arguments(T "" "FIXTURE;TIMEOUT" "" ${ARGN})
  add_test(NAME records_e2e_${name} COMMAND ${T_UNPARSED_ARGUMENTS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 180)
  endif()
  set_tests_properties(records_e2e_${name} PROPERTIES LABELS "mpi;records" ENVIRONMENT
                       "${E2E_ENV}" TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77)
  if(T_FIXTURE STREQUAL "setup")
    set_tests_properties(records_e2e_${name} PROPERTIES FIXTURES_SETUP records_e2e_files)
  elseif(T_FIXTURE STREQUAL "required")
    set_tests_properties(records_e2e_${name} PROPERTIES FIXTURES_REQUIRED records_e2e_files)
  endif()
endfunction()

# 1. event counts per rank and phase against the schedule, for several meshes and levels
records_e2e_test(events_tp2pp2 ${E2E}/run_case.sh ${E2E_OUT} tp2pp2 4
  parallel.tp=2 parallel.pp=2 parallel.microbatches=2 FIXTURE setup)
records_e2e_test(events_pp2 ${E2E}/run_case.sh ${E2E_OUT} pp2 2
  parallel.pp=2 parallel.microbatches=2 bench.warmup=1 bench.iterations=2 record.flush_every=1
  FIXTURE setup)
records_e2e_test(events_one ${E2E}/run_case.sh ${E2E_OUT} one 1 FIXTURE setup)
records_e2e_test(events_tp2 ${E2E}/run_case.sh ${E2E_OUT} tp2 2 parallel.tp=2)
records_e2e_test(events_dp3 ${E2E}/run_case.sh ${E2E_OUT} dp3 3 parallel.dp=3 record.sched=false)
records_e2e_test(events_pp4 ${E2E}/run_case.sh ${E2E_OUT} pp4 4
  parallel.pp=4 parallel.microbatches=3 record.flush_every=2)
records_e2e_test(events_overlap ${E2E}/run_case.sh ${E2E_OUT} overlap 4
  parallel.dp=2 parallel.tp=2 parallel.microbatches=2 parallel.overlap=true parallel.chunks=3)
records_e2e_test(events_step ${E2E}/run_case.sh ${E2E_OUT} step 4
  parallel.tp=2 parallel.pp=2 parallel.microbatches=3 model.norm=post record.timings=step)
records_e2e_test(events_off ${E2E}/run_case.sh ${E2E_OUT} off 4
  parallel.tp=2 parallel.pp=2 record.timings=off)
# The `iteration` events carry the label of the generation they time (warm-up -1, then 0, 1...)
# and weight_init belongs to none (-1).
records_e2e_test(iteration_labels /usr/bin/python3 ${E2E}/check_events.py ${E2E_OUT}/pp2.h5
  --iteration-labels FIXTURE required)

# 2. a real 4-rank file against docs/schema.md
records_e2e_test(schema /usr/bin/python3 ${E2E}/check_schema.py ${PROJECT_SOURCE_DIR}/docs/schema.md
  ${E2E_OUT}/tp2pp2.h5 FIXTURE required)

# 4, 5. report, diff (1e-5 against one rank; a planted divergence at layer.2.mlp) and trace
records_e2e_test(tools /usr/bin/python3 ${E2E}/check_tools.py ${E2E_OUT} FIXTURE required)

# 8. plot.py: timeline, phases of two runs, scaling over a folder of runs
records_e2e_test(plot /usr/bin/python3 ${E2E}/check_plot.py ${PROJECT_SOURCE_DIR}/tools/plot.py
  ${E2E_OUT} FIXTURE required TIMEOUT 300)

# 6, 7. interrupted runs
foreach(mode term-mpirun term-rank kill-rank kill-alone term-stalled stall)
  records_e2e_test(${mode} ${E2E}/test_signal.sh ${mode} ${E2E_OUT}/signal)
endforeach()
# a rank frozen before MPI_Init: the watchdog's set-up mode ends the job (30 s; bound 90 s)
records_e2e_test(startup_stall ${E2E}/test_startup_stall.sh ${E2E_OUT}/signal TIMEOUT 150)

# 9. the run file under faults (issue 14): a file system filled at the end of a dp=2 run (the
# collective activation writes) and mid-run (a timing flush) exits 1 with one message and an
# incomplete file that opens, never hangs (skipped, with the reason, where no tmpfs can be
# mounted); two runs writing one --out at once both succeed and leave one run's whole file; a
# run killed by SIGKILL with the default flush settings leaves a partial file that opens, and
# record.flush_seconds flushes the timing events while the run goes on.
foreach(mode activations events)
  records_e2e_test(full_fs_${mode} ${E2E}/test_full_fs.sh ${mode} ${E2E_OUT}/faults TIMEOUT 120)
endforeach()
records_e2e_test(concurrent_out ${E2E}/test_concurrent_out.sh ${E2E_OUT}/faults)
foreach(mode default seconds)
  records_e2e_test(kill_${mode} ${E2E}/test_kill_default.sh ${mode} ${E2E_OUT}/faults TIMEOUT 120)
endforeach()

# record.sched: a busy loop pinned on rank 1's core shows as rank 1's run delay in /sched
records_e2e_test(preempt ${E2E}/test_preempt.sh ${E2E_OUT}/preempt TIMEOUT 300)
# alone: the planted loops must be the only load the suite itself puts on rank 1's core
set_tests_properties(records_e2e_preempt PROPERTIES RUN_SERIAL TRUE)

# A mixture of experts' expert load (/moe/expert_load): one rank against tp=2 with ep=2, dp=2
# and pp=2, read back by check_moe_load (the tools' reader), then `tripar report`'s section and
# `tripar explain`'s verdict; a dense run gets neither.
add_executable(check_moe_load ${E2E}/check_moe_load.c)
target_link_libraries(check_moe_load PRIVATE tripar_core)
records_e2e_test(moe_load ${E2E}/moe_load.sh $<TARGET_FILE:check_moe_load>
  ${CMAKE_CURRENT_BINARY_DIR}/records_e2e_moe_load TIMEOUT 300)
