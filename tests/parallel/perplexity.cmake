# Perplexity (docs/performance.md, "Perplexity"): every factorization of 1..4 ranks scores the
# shipped text like one rank, and one rank like numpy from its own recorded logits
# (check_perplexity.py); a GPT-2 head with micro-batches; the refusals, each exit 2 naming the
# key and what is allowed; and SmolLM2 on 1 rank, tp=3, pp=2 and dp=2 (label real).
set(PPL_TEXT ${TRIPAR_DATA}/text/tale-of-two-cities-ch1.txt)
set(PPL_CHECK /usr/bin/python3 ${PAR}/check_perplexity.py $<TARGET_FILE:tripar>)
add_test(NAME perplexity_factorizations
         COMMAND ${PPL_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/perplexity_llama
                 ${PAR}/perplexity_llama.yaml 1 2 3 4 --bytes ${PPL_TEXT})
add_test(NAME perplexity_gpt2_microbatches
         COMMAND ${PPL_CHECK} ${CMAKE_CURRENT_BINARY_DIR}/perplexity_gpt2
                 ${PAR}/perplexity_gpt2.yaml 2 4 --bytes ${PPL_TEXT} -- parallel.microbatches=2)
set_tests_properties(perplexity_factorizations perplexity_gpt2_microbatches PROPERTIES
                     LABELS "mpi;unit" ENVIRONMENT "${PAR_ENV}" TIMEOUT 600)

foreach(case window_ctx window_small short_text new_tokens token_input arrival unknown_key)
  add_test(NAME perplexity_refuse_${case}
           COMMAND ${PAR}/perplexity_refusals.sh ${case} ${CMAKE_CURRENT_BINARY_DIR}/perplexity_refuse)
  set_tests_properties(perplexity_refuse_${case} PROPERTIES LABELS "unit;jobs"
                       ENVIRONMENT "${TRIPAR_TEST_ENV};ASAN_OPTIONS=detect_leaks=0" TIMEOUT 60)
endforeach()

add_test(NAME perplexity_smollm2_real
         COMMAND /usr/bin/python3 ${PAR}/perplexity_smollm2.py $<TARGET_FILE:tripar>
                 ${CMAKE_CURRENT_BINARY_DIR}/perplexity_smollm2 ${PPL_TEXT})
# label variant (tests/parallel/tests.cmake): the sanitizer pass scores texts through the
# synthetic perplexity tests above and runs the real model through gguf_smollm2_real
set_tests_properties(perplexity_smollm2_real PROPERTIES LABELS "real;variant" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${PAR_ENV}" TIMEOUT 900)
