# The run-file tools (report, diff, trace) and the checkpoint reader on files they must refuse
# or read despite h5py's edits (issue 14, items 11 and 12). tools_fixtures.sh makes real runs
# and checkpoints of tools_tiny.yaml, and tools_fixtures.py derives the edited files from them.
# Included from tests/cli/tests.cmake.
set(TOOLS_DIR ${TRIPAR_AREA_DIR})
set(TOOLS_WORK ${CMAKE_CURRENT_BINARY_DIR}/tools_files)
set(TOOLS_EXPECT ${TOOLS_DIR}/expect_stderr.sh)

add_test(NAME tools_make_files COMMAND ${TOOLS_DIR}/tools_fixtures.sh ${TOOLS_WORK})
set_tests_properties(tools_make_files PROPERTIES FIXTURES_SETUP tools_files
                     LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120)
# `tripar run` starts MPI, whose allocations outlive MPI_Finalize (see tests/records); the
# serial tools below run with leak checking on.
set(TOOLS_MPI_TESTS tools_make_files)

# tools_test(NAME CODE REGEX COUNT ARGS...): `tripar ARGS...` exits CODE with COUNT stderr lines
# matching REGEX and no HDF5 error stack. @W@ in ARGS stands for the fixture directory.
function(tools_test name code regex count)
  string(REPLACE "@W@" "${TOOLS_WORK}" args "${ARGN}")
  add_test(NAME ${name} COMMAND ${TOOLS_EXPECT} ${code} "${regex}" ${count} --
           $<TARGET_FILE:tripar> ${args})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED tools_files LABELS "unit;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)
endfunction()

# diff refuses what report and trace refuse, instead of saying AGREE.
tools_test(tools_diff_checkpoints 2 "^tripar diff: .*ckpt\\.h5: not a tripar run file .*\"tripar-checkpoint\"" 1
           diff @W@/ckpt.h5 @W@/ckpt.h5)
tools_test(tools_diff_empty_hdf5 2 "^tripar diff: .*empty_a\\.h5: not a tripar run file \\(no root attribute format" 1
           diff @W@/empty_a.h5 @W@/empty_b.h5)
tools_test(tools_diff_foreign_hdf5 2 "^tripar diff: .*foreign\\.h5: not a tripar run file" 1
           diff @W@/run.h5 @W@/foreign.h5)
# An incomplete file is read, with one warning on stderr (the data equal run.h5's).
tools_test(tools_diff_incomplete_warns 0 "^tripar diff: warning: .*incomplete\\.h5 is an incomplete run file" 1
           diff @W@/incomplete.h5 @W@/run.h5)
tools_test(tools_report_incomplete_warns 0 "^tripar report: warning: .*incomplete\\.h5 is an incomplete run file" 1
           report @W@/incomplete.h5)
tools_test(tools_trace_incomplete_warns 0 "^tripar trace: warning: .*incomplete\\.h5 is an incomplete run file" 1
           trace @W@/incomplete.h5 -o @W@/incomplete.trace.json)
# --baseline scores runs of the baseline's model only; another precision is the same model.
tools_test(tools_report_baseline_other_seed 2 "^tripar report: .*run\\.h5 ran another model than the baseline .*seed6\\.h5 \\(baseline vs run: model\\.synthetic\\.seed: 6 vs 5\\)" 1
           report @W@/run.h5 --baseline @W@/seed6.h5)
tools_test(tools_report_baseline_other_shape 2 "^tripar report: .*model\\.synthetic\\.layers: 3 vs 2" 1
           report @W@/run.h5 --baseline @W@/layers3.h5)
tools_test(tools_report_baseline_synthetic_vs_checkpoint 2 "^tripar report: .*baseline vs run: a checkpoint vs synthetic weights" 1
           report @W@/run.h5 --baseline @W@/from_ckpt.h5)
tools_test(tools_report_baseline_same_model 0 "^tripar report" 0
           report @W@/bf16.h5 --baseline @W@/run.h5)
# A format_version newer than this tripar reads is refused by every tool, naming what it reads.
foreach(tool report diff trace)
  set(extra)
  if(tool STREQUAL "diff")
    set(extra @W@/run.h5)
  elseif(tool STREQUAL "trace")
    set(extra -o @W@/newer.trace.json)
  endif()
  tools_test(tools_${tool}_newer_format 2 "^tripar ${tool}: .*newer\\.h5: run file format_version 2 \\(written by a newer tripar\\); this tripar .* reads format_version 1$" 1
             ${tool} @W@/newer.h5 ${extra})
  # a damaged run file: one tripar line, no HDF5 error stack
  tools_test(tools_${tool}_damaged 2 "^tripar ${tool}: .*damaged\\.h5: /output/tokens is not a dataset" 1
             ${tool} @W@/damaged.h5 ${extra})
endforeach()
# What is wrong with a path is said in words before HDF5 is asked, by every command that reads
# run files (issue 32): a missing path is "no such file", a JSON file "not an HDF5 file", a
# truncated run file "truncated or damaged"; exit 2, one line, no HDF5 error stack.
foreach(form report report_baseline report_roofline diff trace explain)
  foreach(bad missing report.json truncated.h5)
    set(name ${bad})
    set(regex "not an HDF5 file")
    if(bad STREQUAL "missing")
      set(bad missing.h5)
      set(regex "no such file$")
    elseif(bad STREQUAL "truncated.h5")
      set(name truncated)
      set(regex "HDF5 cannot open it \\(truncated or damaged HDF5 file\\?\\)$")
    else()
      set(name json)
    endif()
    if(form STREQUAL "report_baseline")
      set(args report @W@/run.h5 --baseline @W@/${bad})
    elseif(form STREQUAL "report_roofline")
      set(args report --roofline @W@/${bad})
    elseif(form STREQUAL "diff")
      set(args diff @W@/run.h5 @W@/${bad})
    elseif(form STREQUAL "trace")
      set(args trace @W@/${bad} -o @W@/never.trace.json)
    elseif(form STREQUAL "explain")
      set(args explain @W@/${bad} @W@/run.h5)
    else()
      set(args report @W@/${bad})
    endif()
    string(REGEX REPLACE "_.*" "" tool ${form})
    string(REPLACE "." "\\." shown ${bad})
    tools_test(tools_${form}_${name} 2 "^tripar ${tool}: .*/${shown}: ${regex}" 1 ${args})
  endforeach()
endforeach()
# report says what it cannot know: shares not measured at record.timings: step, percentiles of
# fewer than 3 iterations, no telemetry samples (one line, no empty table), a run cut inside its
# last iteration (step no longer exceeds iteration); times in ms with the mean and ITL (issue 32).
add_test(NAME tools_report_says_what_it_cannot_know
         COMMAND /usr/bin/python3 ${TOOLS_DIR}/report_check.py $<TARGET_FILE:tripar>
                 ${CMAKE_CURRENT_BINARY_DIR}/report_check)
set_tests_properties(tools_report_says_what_it_cannot_know PROPERTIES LABELS "unit;cli"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};ASAN_OPTIONS=detect_leaks=0" TIMEOUT 120)
# A run file whose string attributes h5py rewrote as variable-length reads as before.
tools_test(tools_report_vl_strings 0 "." 0 report @W@/run_vl.h5)

# Checkpoints: h5py's variable-length string attributes load and give the same tokens ...
add_test(NAME ckpt_vl_string_attrs COMMAND ${TOOLS_DIR}/ckpt_vl_tokens.sh ${TOOLS_WORK})
set_tests_properties(ckpt_vl_string_attrs PROPERTIES FIXTURES_REQUIRED tools_files
                     LABELS "unit;cli;checkpoint" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "tokens: 20/20 equal.*AGREE")
list(APPEND TOOLS_MPI_TESTS ckpt_vl_string_attrs)
# ... and a foreign HDF5 file, or a checkpoint whose weights the parallel load cannot read (a
# virtual dataset), given as a checkpoint on 2 ranks, is one tripar message (rank 0), exit 2,
# and no HDF5 error stack.
foreach(bad ckpt_virtual foreign)
  add_test(NAME ckpt_foreign_${bad}_one_message
           COMMAND ${TOOLS_EXPECT} 2 "^tripar: error: .*${bad}\\.h5: " 1 --
                   ${TRIPAR_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 ${TRIPAR_MPI_PREFLAGS}
                   $<TARGET_FILE:tripar> run ${TOOLS_DIR}/tools_tiny.yaml
                   --out ${TOOLS_WORK}/never_${bad}.h5 --set parallel.tp=2
                   --set model.checkpoint=${TOOLS_WORK}/${bad}.h5)
  set_tests_properties(ckpt_foreign_${bad}_one_message PROPERTIES FIXTURES_REQUIRED tools_files
                       LABELS "mpi;cli;checkpoint" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120)
  list(APPEND TOOLS_MPI_TESTS ckpt_foreign_${bad}_one_message)
endforeach()
set_property(TEST ${TOOLS_MPI_TESTS} APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
