# Fuzzing with libFuzzer (label fuzz): the safetensors parser, the job parser (job files and
# --set values, with deep and large seeds), the GGUF reader, tokenizer.json, and the cluster
# files of `tripar plan`. tests/fuzz/run_fuzz.sh builds each target with clang itself, so the
# main build keeps its own compiler; skipped without clang.
# fuzz_TARGET runs run_fuzz.sh's TARGET for 20 s from seed 1 (run_fuzz.sh says why the seed is fixed).
foreach(target safetensors job gguf tokenizer_json cluster)
  add_test(NAME fuzz_${target}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_fuzz.sh ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/fuzz_${target} 20 ${target})
  set_tests_properties(fuzz_${target} PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
