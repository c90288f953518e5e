# Op tests of the CPU backend against the reference twins, and the weight conversions.
# ref_ops.c is a small library so the CUDA op tests can link the same twins.
add_library(tripar_ref_ops STATIC ${CMAKE_CURRENT_SOURCE_DIR}/kernels/ref_ops.c)
target_include_directories(tripar_ref_ops PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(tripar_ref_ops PUBLIC tripar_core)

tripar_unit_test(test_ops SOURCES kernels/test_ops.c LABELS ops)
target_link_libraries(test_ops PRIVATE tripar_ref_ops)
tripar_unit_test(test_quant SOURCES kernels/test_quant.c LABELS ops)
target_link_libraries(test_quant PRIVATE tripar_ref_ops)
# Backend selection by name through the table of kernels/backend.c.
tripar_unit_test(test_backend SOURCES kernels/test_backend.c LABELS backend)
