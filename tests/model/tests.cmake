# Model-level tests: the engine against the independent double-precision reference.
add_library(tripar_ref_model STATIC ${CMAKE_CURRENT_SOURCE_DIR}/model/ref_model.c
            ${CMAKE_CURRENT_SOURCE_DIR}/model/ref_llama.c ${CMAKE_CURRENT_SOURCE_DIR}/model/ref_quant.c)
target_link_libraries(tripar_ref_model PUBLIC tripar_core)
target_include_directories(tripar_ref_model PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/model)
tripar_unit_test(test_model SOURCES model/test_model.c LABELS model)
target_link_libraries(test_model PRIVATE tripar_ref_model tripar_cli) # engine_config_from_job
# Counts the allocator calls of tripar's own code to prove generation allocates nothing.
target_link_options(test_model PRIVATE -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
# The host sampler: tiny temperatures are exactly greedy, the argmax's NaN order (issue 14).
tripar_unit_test(test_sample SOURCES model/test_sample.c LABELS model)
# Mixture-of-experts routing: lower-index ties, norm_topk_prob, the shared gate (issue 31).
tripar_unit_test(test_moe_route SOURCES model/test_moe_route.c LABELS model)
