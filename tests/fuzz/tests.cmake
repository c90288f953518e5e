# Fuzzing with libFuzzer (label fuzz): the safetensors parser, the job parser (job files and
# --set values, with deep and large seeds), the GGUF reader, tokenizer.json, and the cluster
# files of `tripar plan`. tests/fuzz/run_fuzz.sh builds each target with clang itself, so the
# main build keeps its own compiler; skipped without clang.
add_test(NAME fuzz_safetensors
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_safetensors 20)
add_test(NAME fuzz_job
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_job 20 job)
add_test(NAME fuzz_gguf
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_gguf 20 gguf)
add_test(NAME fuzz_tokenizer_json
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_tokenizer_json 20 tokenizer_json)
add_test(NAME fuzz_cluster
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_cluster 20 cluster)
set_tests_properties(fuzz_safetensors fuzz_job fuzz_gguf fuzz_tokenizer_json fuzz_cluster
                     PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 300)
