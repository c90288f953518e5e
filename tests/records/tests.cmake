# Records area: the phase timer and clock alignment, the HDF5 run file, and the run-file tools
# (report, diff, trace, tools/plot.py). records_runfile leaves its files in records_out for the
# tool tests, which run after it through a CTest fixture.
set(RECORDS_OUT ${CMAKE_CURRENT_BINARY_DIR}/records_out)


foreach(t timing runfile)
  add_executable(records_test_${t} records/test_${t}.c)
  target_link_libraries(records_test_${t} PRIVATE tripar_core)
endforeach()

tripar_mpi_test(records_timing 3 $<TARGET_FILE:records_test_timing>)
tripar_mpi_test(records_runfile 3 $<TARGET_FILE:records_test_runfile> ${RECORDS_OUT})
set_tests_properties(records_runfile PROPERTIES FIXTURES_SETUP records_files)
set_property(TEST records_timing records_runfile APPEND PROPERTY LABELS records)
# Open MPI, hwloc and HDF5 keep allocations past MPI_Finalize (some in plugins unloaded by then,
# so no suppression can name them); leaks in our own code are caught by records_tools, which
# runs the readers without MPI.
set_property(TEST records_timing records_runfile APPEND PROPERTY ENVIRONMENT
             ASAN_OPTIONS=detect_leaks=0)

# The tools run serially, without mpirun, as they would on a laptop.
add_executable(records_test_tools records/test_tools.c)
target_link_libraries(records_test_tools PRIVATE tripar_cli)
add_test(NAME records_tools COMMAND records_test_tools ${RECORDS_OUT})
set_tests_properties(records_tools PROPERTIES LABELS "records" FIXTURES_REQUIRED records_files
                     ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120)

add_test(NAME records_plot COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/records/test_plot.py
         ${PROJECT_SOURCE_DIR}/tools/plot.py ${RECORDS_OUT})
set_tests_properties(records_plot PROPERTIES LABELS "records" FIXTURES_REQUIRED records_files
                     ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 300 SKIP_RETURN_CODE 77)

# The same tools through the CLI, started without mpirun.
add_test(NAME records_cli_report COMMAND tripar report ${RECORDS_OUT}/run_a.h5)
set_tests_properties(records_cli_report PROPERTIES LABELS "records" FIXTURES_REQUIRED records_files
                     PASS_REGULAR_EXPRESSION "dp1-tp1-pp3 m2 overlap.*slowest rank 2")
add_test(NAME records_cli_diff COMMAND sh -c "\"$0\" diff \"$1\" \"$2\"; echo exit=$?"
         $<TARGET_FILE:tripar> ${RECORDS_OUT}/run_a.h5 ${RECORDS_OUT}/run_b.h5)
set_tests_properties(records_cli_diff PROPERTIES LABELS "records" FIXTURES_REQUIRED records_files
                     PASS_REGULAR_EXPRESSION "first divergence: layer.1.mlp.*exit=1")

# Timing events (and backend mark slots: CUDA events) preallocated per record.timings level.
tripar_unit_test(records_timer_capacity SOURCES records/test_timer_capacity.c LABELS records)
tripar_unit_test(records_runfile_pad SOURCES records/test_runfile_pad.c LABELS records)

# record.telemetry: the sampler in a real run, the report table, the refused values.
include(${TRIPAR_AREA_DIR}/telemetry.cmake)

# record.sched: the preemption sampler's rows, threads and drops, and its cost per step.
tripar_unit_test(records_sched SOURCES records/test_sched.c LABELS records)
