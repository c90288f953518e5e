# CLI exit codes: every bad job of tests/job/README.md makes `tripar run` exit 2 with its
# message (the table is the single list of cases; test_job.c checks the same rows through the
# API). Plus the usage and version contracts.
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/job/README.md bad_rows REGEX "^\\| `[^`]+\\.yaml` \\|")
foreach(row ${bad_rows})
  string(REGEX MATCH "^\\| `([^`]+)` \\|[^|]*\\| `(.*)` \\|$" matched "${row}")
  if(NOT matched)
    message(FATAL_ERROR "tests/job/README.md: cannot parse row: ${row}")
  endif()
  set(file ${CMAKE_MATCH_1})
  set(regex ${CMAKE_MATCH_2})
  string(REPLACE ".yaml" "" stem ${file})
  add_test(NAME cli_${stem}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 "${regex}" --
                   $<TARGET_FILE:tripar> run ${CMAKE_CURRENT_SOURCE_DIR}/job/${file})
  set_tests_properties(cli_${stem} PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                       TIMEOUT 60)
endforeach()

add_test(NAME cli_version COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "^tripar [0-9]+\\.[0-9]+\\.[0-9]+" -- $<TARGET_FILE:tripar> --version)
add_test(NAME cli_unknown_command COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2
         "unknown command 'frobnicate'" -- $<TARGET_FILE:tripar> frobnicate)
add_test(NAME cli_run_help COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "usage: tripar run JOB.yaml" -- $<TARGET_FILE:tripar> run --help)
# the usage once: the early read of the job before MPI_Init parses the same arguments
add_test(NAME cli_run_help_once COMMAND sh -c
         "test \"$(\"$0\" run --help | grep -c '^usage: tripar run')\" = 1" $<TARGET_FILE:tripar>)
add_test(NAME cli_run_no_job COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2
         "no job file given" -- $<TARGET_FILE:tripar> run)
add_test(NAME cli_dry_run COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 0
         "pp_rank: 1, tp_rank: 1, layer_begin: 2, layer_end: 4" -- $<TARGET_FILE:tripar> run
         ${PROJECT_SOURCE_DIR}/jobs/demo.yaml --dry-run)
set_tests_properties(cli_version cli_unknown_command cli_run_help cli_run_help_once cli_run_no_job
                     cli_dry_run
                     PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)

# --dry-run prints one YAML document: the resolved job plus memory_per_rank.
add_test(NAME cli_dry_run_is_yaml COMMAND sh -c
         "$<TARGET_FILE:tripar> run ${PROJECT_SOURCE_DIR}/jobs/demo.yaml --dry-run | /usr/bin/python3 -c \"import sys, yaml; d = yaml.safe_load(sys.stdin); assert d['parallel']['tp'] == 2 and len(d['memory_per_rank']) == 4, d\"")
set_tests_properties(cli_dry_run_is_yaml PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 60)

# Output-path safety (tests/cli/output_paths.sh): an output that is an input, a device node, a
# FIFO, a directory, '' or in a missing directory is refused with exit 2 before any compute, on
# two ranks, leaving every input byte-identical and no .partial. The import-hf cases read the
# fixtures of tests/io (fixture ckpt_hf). Exit 77 (not root for the device nodes) is a skip.
set(CLI_PATHS_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli_paths)
foreach(case import_onto_safetensors import_onto_shard import_missing_config)
  add_test(NAME cli_paths_${case} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/output_paths.sh ${case}
           ${CLI_PATHS_WORK} ${CMAKE_CURRENT_BINARY_DIR}/ckpt_fixtures)
  set_tests_properties(cli_paths_${case} PROPERTIES LABELS "unit;cli" FIXTURES_REQUIRED ckpt_hf
                       ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 120)
endforeach()
foreach(case run_out_is_job run_out_is_checkpoint run_out_is_tokens run_save_checkpoint_is_out
             run_out_device run_out_not_a_file run_checkpoint_fifo run_sweep_save_is_input
             commbench_out)
  add_test(NAME cli_paths_${case} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/output_paths.sh ${case}
           ${CLI_PATHS_WORK})
  set_tests_properties(cli_paths_${case} PROPERTIES LABELS "mpi;cli" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
endforeach()

# The run-file tools and the checkpoint reader on refused and h5py-edited files (tools.cmake).
include(${TRIPAR_AREA_DIR}/tools.cmake)
# commbench: --tiers, node placement per axis, NCCL (commbench.cmake).
include(${TRIPAR_AREA_DIR}/commbench.cmake)
# Per-phase rooflines: report --roofline and plot.py roofline on real runs (roofline.cmake).
include(${TRIPAR_AREA_DIR}/roofline.cmake)
# tripar explain: planted differences and the files it refuses (explain.cmake).
include(${TRIPAR_AREA_DIR}/explain.cmake)
# tripar plan: equations, bad cluster files, refusals, the outputs (plan.cmake).
include(${TRIPAR_AREA_DIR}/plan.cmake)

# Numerics guards end to end (issue 14: non-finite weights and logits, tiny temperatures,
# what a stop leaves in the run file); tests/cli/numerics.py says what each mode checks.
set(NUMERICS_OUT ${CMAKE_CURRENT_BINARY_DIR}/cli_numerics)
function(numerics_test name np)
  add_test(NAME cli_numerics_${name} COMMAND /usr/bin/python3
           ${CMAKE_CURRENT_SOURCE_DIR}/cli/numerics.py ${NUMERICS_OUT}/${name} ${ARGN})
  set(labels "cli;numerics")
  if(np GREATER 1)
    set(labels "mpi;cli;numerics")
  endif()
  set_tests_properties(cli_numerics_${name} PROPERTIES LABELS "${labels}" TIMEOUT 300
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};ASAN_OPTIONS=detect_leaks=0")
endfunction()
numerics_test(nan_weight_tp1 1 nan-weight 1 1)
numerics_test(nan_weight_tp2 2 nan-weight 2 2)
numerics_test(import_nonfinite 1 import-nonfinite)
numerics_test(logits_pos_np1 1 nonfinite pos 1)
numerics_test(logits_pos_dp2pp2 4 nonfinite pos 4 parallel.dp=2 parallel.pp=2 parallel.microbatches=2)
numerics_test(logits_mlp3_tp2pp2 4 nonfinite mlp:3 4 parallel.tp=2 parallel.pp=2 parallel.overlap=true)
numerics_test(logits_head_sampled_tp2 2 nonfinite head 2 parallel.tp=2 generate.sampling=sample)
# expert parallelism across 2 replicas, the first a micro-batch short (3 prompts, 2 per batch)
numerics_test(logits_moe_ep_dp2 2 nonfinite-moe 2 parallel.dp=2 parallel.ep=2
              input.synthetic.batch=3 parallel.microbatches=2)
numerics_test(temperature_np1 1 temperature 1)
numerics_test(temperature_tp2 2 temperature 2 parallel.tp=2 parallel.microbatches=2)
numerics_test(signal_generation 2 signal-generation)
numerics_test(signal_iterations 1 signal-iterations)
# --dry-run for model presets: llama3-70b at tp = 8 equals the hand count in docs/jobs.md.
add_test(NAME cli_dry_run_presets COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_dry_run_presets.py $<TARGET_FILE:tripar> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_dry_run_presets PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}")

# The tools on the Llama family (issue 12, item 7; tests/cli/llama_tools.sh says what each
# check proves): activation points across meshes, report's model line, diff refusing another
# architecture, report --baseline for int8w vs fp32, a sweep over the mesh.
foreach(check points report arch_mismatch baseline sweep)
  add_test(NAME cli_llama_${check} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/llama_tools.sh ${check}
           ${CMAKE_CURRENT_BINARY_DIR}/cli_llama_${check})
  set_tests_properties(cli_llama_${check} PROPERTIES LABELS "mpi;cli" TIMEOUT 300
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};ASAN_OPTIONS=detect_leaks=0")
endforeach()

# Every job file in jobs/ parses and plans (--dry-run), and the Llama variant pair keeps the
# shape docs/benchmarks.md gives it.
add_test(NAME cli_jobs_dry_run COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_jobs.py
         ${PROJECT_SOURCE_DIR}/jobs)
set_tests_properties(cli_jobs_dry_run PROPERTIES LABELS "unit;cli" TIMEOUT 120
                     ENVIRONMENT "${TRIPAR_TEST_ENV}")

# The JSON writer every output shares (src/cli/cli_json.c): reals at their precision.
tripar_unit_test(cli_json SOURCES cli/test_cli_json.c LABELS cli)
target_link_libraries(cli_json PRIVATE tripar_cli)

# The memory check on a cgroup-limited run (tests/cli/memory_cgroup.sh): the test makes a
# 256 MiB memory cgroup and runs mpirun -n 2 in it: a model that does not fit exits 2 within
# 60 s with rank, host, need and have and no OOM kill; a tiny one runs; with the check off the
# OOM killer ends a rank and mpirun the job within 60 s. Exit 77 (no memory cgroup) is a skip.
foreach(case refuse fits oom)
  add_test(NAME cli_memory_cgroup_${case}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/memory_cgroup.sh ${case}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_memory)
  set_tests_properties(cli_memory_cgroup_${case} PROPERTIES LABELS "mpi;cli" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
endforeach()
