# record.telemetry end to end (2 ranks, real mpiexec): /telemetry samples, the report's
# per-phase averages, tools/plot.py's overlay, telemetry 0 and the refused values.
add_test(NAME records_telemetry COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/records/test_telemetry.py
         ${TRIPAR_MPIEXEC} $<TARGET_FILE:tripar> ${CMAKE_CURRENT_BINARY_DIR}/records_telemetry)
# Open MPI keeps allocations past MPI_Finalize (see tests.cmake); the report runs without MPI.
set_tests_properties(records_telemetry PROPERTIES LABELS "records;mpi" TIMEOUT 600
                     ENVIRONMENT "${TRIPAR_TEST_ENV};ASAN_OPTIONS=detect_leaks=0")

# The sampler in-process: rate, clock, drops past capacity, prompt stop, rate 0.
add_executable(records_test_telemetry_sampler records/test_telemetry_sampler.c)
target_link_libraries(records_test_telemetry_sampler PRIVATE tripar_core)
tripar_mpi_test(records_telemetry_sampler 1 $<TARGET_FILE:records_test_telemetry_sampler>)
set_property(TEST records_telemetry_sampler APPEND PROPERTY LABELS records)
set_property(TEST records_telemetry_sampler APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
