# Bench area: the composite score, accuracy metrics, sweeps and the arrival stream (unit), and
# CLI runs under mpiexec (mpi): commbench verification, paged vs contiguous tokens, a 2-point
# sweep, a 2-point sweep over data/prompts files (and one whose point files would clash), a
# bounded arrival stream and report --baseline. The int8w quantize/dequantize error
# bound is tested by test_quant (tests/kernels/tests.cmake), not here.
tripar_unit_test(bench_unit SOURCES bench/test_bench.c LABELS bench)
target_compile_definitions(bench_unit PRIVATE TRIPAR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# the roofline's FLOP and KV-byte counts for GPT-2 and Llama (GQA) against hand counts
tripar_unit_test(bench_roofline SOURCES bench/test_roofline.c LABELS bench)

set(BENCH_DIR ${CMAKE_CURRENT_SOURCE_DIR}/bench)
set(BENCH_EXPECT_EXIT ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh)
set(BENCH_ENV ${TRIPAR_TEST_ENV} MPIEXEC=${MPIEXEC_EXECUTABLE} ASAN_OPTIONS=detect_leaks=0)

# every axis and op on 2 ranks (tp=2) and 4 ranks (tp=2, dp=2: groups running at once)
foreach(np 2 4)
  math(EXPR dp "${np} / 2")
  tripar_mpi_test(bench_commbench_np${np} ${np} $<TARGET_FILE:tripar> commbench --tp 2
                  --dp ${dp} --sizes 8:256K --iters 3 --warmup 1
                  --out ${CMAKE_CURRENT_BINARY_DIR}/commbench_np${np}.h5)
endforeach()
set_property(TEST bench_commbench_np2 bench_commbench_np4 APPEND PROPERTY LABELS bench)
set_tests_properties(bench_commbench_np2 bench_commbench_np4 PROPERTIES
                     PASS_REGULAR_EXPRESSION "#wrong total: 0\n"
                     FAIL_REGULAR_EXPRESSION "#wrong total: [1-9]")
add_test(NAME bench_commbench_planted
         COMMAND ${BENCH_EXPECT_EXIT} 1 "#wrong total: [1-9][0-9]* +FAILED" --
                 ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
                 --sizes 8:1K --iters 2 --ops allreduce,allgather --plant-error)
add_test(NAME bench_commbench_bad_mesh
         COMMAND ${BENCH_EXPECT_EXIT} 2 "dp \\* tp \\* pp" --
                 ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
                 --tp 3)
add_test(NAME bench_sweep_bad_point
         COMMAND ${BENCH_EXPECT_EXIT} 2 "--sweep input.synthetic.length=100: prompt of 100 tokens .*exceeds model.ctx" --
                 ${MPIEXEC_EXECUTABLE} -n 1 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> run
                 ${BENCH_DIR}/small.yaml --out ${CMAKE_CURRENT_BINARY_DIR}/never.h5
                 --sweep input.synthetic.length=8,100)
set_tests_properties(bench_commbench_planted bench_commbench_bad_mesh bench_sweep_bad_point
                     PROPERTIES LABELS "mpi;bench" ENVIRONMENT "${BENCH_ENV}" TIMEOUT 300)

foreach(check paged sweep sweep_peak prompts prompts_clash arrival baseline)
  add_test(NAME bench_${check} COMMAND ${BENCH_DIR}/run_checks.sh ${check}
           ${CMAKE_CURRENT_BINARY_DIR}/bench_${check})
  set_tests_properties(bench_${check} PROPERTIES LABELS "mpi;bench" ENVIRONMENT "${BENCH_ENV}"
                       TIMEOUT 300)
endforeach()

# commbench --sizes model on a Llama job: the header gives the sizes from its shape, and every
# op is timed at exactly those two sizes (and no other), all verified.
tripar_mpi_test(bench_commbench_llama_sizes 2 $<TARGET_FILE:tripar> commbench
                ${BENCH_DIR}/llama_small.yaml --sizes model --iters 2 --warmup 1 --axes tp,world)
set_property(TEST bench_commbench_llama_sizes APPEND PROPERTY LABELS bench)
set_tests_properties(bench_commbench_llama_sizes PROPERTIES
  PASS_REGULAR_EXPRESSION "sizes from the job's model \\(llama, embd 64\\): decode step 512 B = 2 x 64 x 4, prefill 4096 B = 2 x 8 x 64 x 4\n#\n# allreduce over tp[^\n]*\n[^\n]*\n +512 +128 +float[^\n]*\n +4096 +1024 +float[^\n]*\n# allreduce over tp: avg busbw [0-9.e+-]+ GB/s over 2 sizes \\(in place\\)\n# allgather.*#wrong total: 0\n# Avg bus bandwidth : [0-9.e+-]+ GB/s, the mean busbw of the [0-9]+ rows above\n"
  FAIL_REGULAR_EXPRESSION "#wrong total: [1-9]")
add_test(NAME bench_commbench_model_sizes_no_job
         COMMAND ${BENCH_EXPECT_EXIT} 2 "--sizes model needs a job file" --
                 ${MPIEXEC_EXECUTABLE} -n 1 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
                 --sizes model)
set_tests_properties(bench_commbench_model_sizes_no_job PROPERTIES LABELS "mpi;bench"
                     ENVIRONMENT "${BENCH_ENV}" TIMEOUT 120)
