# Data area: the prompt sets of data/prompts match their table in data/README.md (sizes, token
# counts of the .tokens twins, length bounds, each task's form), checked without a vocabulary,
# and jobs/prompts.yaml runs one of them.
add_test(NAME data_prompts_match_readme
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/data/check_prompts.py
                 ${PROJECT_SOURCE_DIR}/data)
set_tests_properties(data_prompts_match_readme PROPERTIES LABELS "unit;data" TIMEOUT 60)

# jobs/prompts.yaml finds its prompt relative to itself from any working directory (CTest runs
# in the build tree) and the resolved job holds the text itself; a synthetic model's vocab below
# 256 cannot hold bytes and is refused at the input key's file:line with exit 2.
add_test(NAME data_prompts_job_resolves
         COMMAND sh -c "$<TARGET_FILE:tripar> run ${PROJECT_SOURCE_DIR}/jobs/prompts.yaml --dry-run | /usr/bin/python3 -c \"import sys, yaml; d = yaml.safe_load(sys.stdin); t = open('${TRIPAR_DATA}/prompts/qa-128.txt').read(); assert d['input']['text'] == t, d['input']\"")
add_test(NAME data_prompts_small_vocab
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2
                 "prompts\\.yaml:[0-9]+: input\\.text_file: a model without a tokenizer reads text as bytes .*vocab >= 256, but it is 100" --
                 $<TARGET_FILE:tripar> run ${PROJECT_SOURCE_DIR}/jobs/prompts.yaml
                 --set model.synthetic.vocab=100 --dry-run)
# `tripar run` starts MPI, and Open MPI keeps allocations past MPI_Finalize: the leak-checked
# unit pass (tools/setup.sh) would report them, as it would for the cli_ tests it skips.
set_tests_properties(data_prompts_job_resolves data_prompts_small_vocab
                     PROPERTIES LABELS "unit;data" TIMEOUT 60
                     ENVIRONMENT "${TRIPAR_TEST_ENV};ASAN_OPTIONS=detect_leaks=0")
