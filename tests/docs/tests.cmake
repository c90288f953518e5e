# Every shell command in a code block of README.md and docs/*.md is one test, label docs, run in
# the doc's order in the doc's scratch folder (tests/docs/doc_commands.py: what counts as a
# command, and how one marked `needs: gpu|slurm|netns|long` is checked instead of run). The list
# is read at configure time, and a changed doc re-runs cmake, so a new command is a new test.
set(doc_commands ${TRIPAR_AREA_DIR}/doc_commands.py)
file(GLOB doc_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/*.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${doc_files} ${doc_commands})
execute_process(COMMAND /usr/bin/python3 ${doc_commands} list ${PROJECT_SOURCE_DIR}
                OUTPUT_VARIABLE doc_rows ERROR_VARIABLE doc_error RESULT_VARIABLE doc_rc)
if(NOT doc_rc EQUAL 0)
  # A doc the extractor refuses (an untagged block, an unknown kind) fails a test, not the
  # build: the message is the test's output.
  message(WARNING "${doc_error}")
  add_test(NAME docs_extract COMMAND /usr/bin/python3 ${doc_commands} show ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_extract PROPERTIES LABELS "docs" TIMEOUT 60)
  set(doc_rows "")
endif()
string(REPLACE "\n" ";" doc_rows "${doc_rows}")
set(doc_previous "")
foreach(row ${doc_rows})
  string(REPLACE "|" ";" row "${row}")
  list(GET row 0 doc)
  list(GET row 1 name)
  list(GET row 2 index)
  add_test(NAME docs_${name}
           COMMAND /usr/bin/python3 ${doc_commands} run ${PROJECT_SOURCE_DIR} ${doc} ${index}
                   --build ${CMAKE_BINARY_DIR} --bin $<TARGET_FILE:tripar>)
  # Each command is the fixture of the doc's next one: run alone, a test brings its
  # predecessors (the outputs it reads); after a failure, the rest of the doc is not run.
  set_tests_properties(docs_${name} PROPERTIES LABELS "docs" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                       TIMEOUT 120 FIXTURES_SETUP docs_${name})
  if(index GREATER 1)
    set_tests_properties(docs_${name} PROPERTIES FIXTURES_REQUIRED docs_${doc_previous}
                         DEPENDS docs_${doc_previous})
  endif()
  set(doc_previous ${name})
endforeach()

# The count `ctest -L docs` prints is every documented command.
add_test(NAME docs_command_count
         COMMAND /usr/bin/python3 ${doc_commands} count ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(docs_command_count PROPERTIES LABELS "unit" TIMEOUT 60)

# The extractor itself, on planted docs: the commands it must find and the docs it must refuse.
add_test(NAME docs_extractor_selftest COMMAND /usr/bin/python3 ${doc_commands} selftest)
set_tests_properties(docs_extractor_selftest PROPERTIES LABELS "unit" TIMEOUT 60)
