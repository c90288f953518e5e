# Fuzzing the safetensors parser with libFuzzer (label fuzz). tests/fuzz/run_fuzz.sh builds the
# target with clang itself, so the main build keeps its own compiler; skipped without clang.
add_test(NAME fuzz_safetensors
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/fuzz_safetensors 20)
set_tests_properties(fuzz_safetensors PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 300)
