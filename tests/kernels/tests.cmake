# Op tests of the CPU backend against the reference twins, and the weight conversions.
# ref_ops.c is a small library so the CUDA op tests can link the same twins.
add_library(tripar_ref_ops STATIC ${CMAKE_CURRENT_SOURCE_DIR}/kernels/ref_ops.c)
target_include_directories(tripar_ref_ops PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(tripar_ref_ops PUBLIC tripar_core)

tripar_unit_test(test_ops SOURCES kernels/test_ops.c LABELS ops)
target_link_libraries(test_ops PRIVATE tripar_ref_ops)
# The same tests for every instruction-set level of the CPU kernels (kernels/cpu/cpu_isa.h); a
# level this CPU lacks skips with its reason. test_ops itself runs the best level.
foreach(level scalar avx2 avx512 avx512_vnni avx512_bf16 amx_bf16)
  add_test(NAME test_ops_${level} COMMAND test_ops ${level})
  set_tests_properties(test_ops_${level} PROPERTIES LABELS "unit;ops" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                       TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()
tripar_unit_test(test_quant SOURCES kernels/test_quant.c LABELS ops)
target_link_libraries(test_quant PRIVATE tripar_ref_ops)
# Backend selection by name through the table of kernels/backend.c.
tripar_unit_test(test_backend SOURCES kernels/test_backend.c LABELS backend)
# Benchmark, not a test: the attention op's prefill paths and decode, 1 and 2 threads.
add_executable(bench_attention ${CMAKE_CURRENT_SOURCE_DIR}/kernels/bench_attention.c)
target_link_libraries(bench_attention PRIVATE tripar_ref_ops)
# The thread count changes no bit of a run: fp32, bf16, int8w and the block formats on 1, 2 and
# 3 threads, prefill logits and tokens equal (a Llama of SmolLM2's widths, prefill and decode
# both on the tiled path). Open MPI's own allocations outlive the run: no leak check under ASan.
add_test(NAME kernels_threads_bitwise
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/kernels/check_threads.py
                 ${CMAKE_CURRENT_BINARY_DIR}/threads_bitwise
                 ${CMAKE_CURRENT_SOURCE_DIR}/kernels/threads_bitwise.yaml)
set_tests_properties(kernels_threads_bitwise PROPERTIES LABELS "mpi"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
set_property(TEST kernels_threads_bitwise APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
# The block formats' decode GEMV at every level this CPU has: the scalar twin's bits, and the
# double-precision product within rounding.
tripar_unit_test(test_matmul_blocks SOURCES kernels/test_matmul_blocks.c LABELS ops)
target_link_libraries(test_matmul_blocks PRIVATE tripar_ref_ops)
