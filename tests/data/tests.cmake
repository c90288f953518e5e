# Data area: the prompt sets of data/prompts match their table in data/README.md (sizes, token
# counts of the .tokens twins, length bounds, each task's form), checked without a vocabulary.
add_test(NAME data_prompts_match_readme
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/data/check_prompts.py
                 ${PROJECT_SOURCE_DIR}/data)
set_tests_properties(data_prompts_match_readme PROPERTIES LABELS "unit;data" TIMEOUT 60)
