# `tripar plan` (docs/planner.md). Included from tests/cli/tests.cmake.
# The cost model's equations on hand-computed cases: tests/analysis/test_plan_cost.c, registered
# in tests/analysis/tests.cmake.

set(PLAN_FIXTURES ${TRIPAR_AREA_DIR}/plan)
set(PLAN_CLUSTERS ${PROJECT_SOURCE_DIR}/data/clusters)

# Bad cluster files: exit 2 with file:line and what is allowed. Each pair: fixture, regex
# (no ';' in a regex: it would split the CMake list; '.' stands for it).
set(plan_bad_clusters
  unknown_key        "unknown_key\\.yaml:8: unknown key 'gpus' in the cluster file. allowed: name, nodes, devices_per_node, cores_per_node, node_gbs, device, network, nccl$"
  bad_unit           "bad_unit\\.yaml:6: network\\.intra\\.beta: '100 GB/h' has an unknown unit. allowed units: B/s, .*Gbit/s"
  efficiency         "efficiency\\.yaml:6: network\\.intra\\.efficiency = 1\\.5 must be a fraction of the link, in \\(0, 1.$"
  missing_inter      "missing_inter\\.yaml:5: network\\.inter is missing. it is required when nodes > 1"
  not_a_number       "not_a_number\\.yaml:4: device\\.gflops \\(GFLOP/s\\): 'fast' is not a number"
  negative_memory    "negative_memory\\.yaml:4: device\\.memory: '-1' must be a positive number"
  inter2_no_group    "inter2_no_group\\.yaml:8: network\\.inter2\\.group_nodes is missing"
  network_not_map    "network_not_map\\.yaml:5: network must be a mapping with keys intra, inter, inter2. got a sequence"
  fractional_nodes   "fractional_nodes\\.yaml:2: nodes: '2\\.5' must be a whole number"
  cores_fractional   "cores_fractional\\.yaml:4: cores_per_node: '1\\.5' must be a whole number from 1 to 10000000$"
  cores_zero         "cores_zero\\.yaml:4: cores_per_node: '0' must be a whole number from 1 to 10000000$"
  node_gbs_below_device "node_gbs_below_device\\.yaml:5: node_gbs = 6 GB/s must be at least device\\.gbs = 12\\.8 GB/s"
  empty              "empty\\.yaml: the cluster file is empty. it needs nodes, devices_per_node, device and network"
  syntax             "syntax\\.yaml:3: YAML syntax error"
  tier_from_and_alpha "tier_from_and_alpha\\.yaml:6: network\\.intra\\.from gives alpha and beta. give them or from, not both"
  device_from_and_gflops "device_from_and_gflops\\.yaml:6: device\\.from gives gflops and gbs. give them or from, not both"
  tier_from_missing  "tier_from_missing\\.yaml:5: network\\.intra\\.from: .*missing-commbench\\.h5 does not exist"
  links_zero         "links_zero\\.yaml:8: network\\.inter\\.links_per_node: '0' must be a whole number from 1 to 10000000$"
  llc_alone          "llc_alone\\.yaml:8: device\\.llc_mib needs device\\.llc_gbs too: the cache's size and the bandwidth a rank reads weights at from it go together$"
  nccl_bad_arch      "nccl_bad_arch\\.yaml:8: nccl\\.arch: 'pascal' is not allowed. allowed: volta, ampere, hopper, blackwell$"
  nccl_nvls_ampere   "nccl_nvls_ampere\\.yaml:9: nccl\\.nvls: true needs NVLink SHARP: NVSwitches with hopper or blackwell GPUs on nvlink \\(got ampere on nvlink\\)$"
  links_intra        "links_intra\\.yaml:6: unknown key 'links_per_node' in network\\.intra. allowed: alpha, beta, efficiency, from$"
  gpu_bad_tile       "gpu_bad_tile\\.yaml:10: device\\.efficiency\\.gemm_tile: '100x100' is not allowed. allowed: 64x64, 64x128, 128x64, 128x128, 128x256, 256x128$"
  gpu_ceiling_over   "gpu_ceiling_over\\.yaml:12: device\\.efficiency\\.gemm_ceiling = 1\\.2 must be a fraction, in \\(0, 1.$"
  gpu_unknown_key    "gpu_unknown_key\\.yaml:11: unknown key 'warp_size' in device\\.efficiency. allowed: sms, gemm_tile, split_k_max, gemm_ceiling, fp32_fraction, attention_ceiling, attention_half_ctx, hbm_fraction, launch, graph_launch, step_overhead, collective_launch$"
  gpu_missing_tile   "gpu_missing_tile\\.yaml:8: device\\.efficiency\\.gemm_tile is missing. it is required \\(64x64, 64x128, 128x64, 128x128, 128x256, 256x128\\)$"
  gpu_bad_launch_unit "gpu_bad_launch_unit\\.yaml:17: device\\.efficiency\\.launch: '4\\.5 ms/s' has an unknown unit. allowed units: s, ms, us, ns")
list(LENGTH plan_bad_clusters plan_n)
math(EXPR plan_last "${plan_n} - 1")
foreach(i RANGE 0 ${plan_last} 2)
  math(EXPR j "${i} + 1")
  list(GET plan_bad_clusters ${i} stem)
  list(GET plan_bad_clusters ${j} regex)
  add_test(NAME cli_plan_cluster_${stem}
           COMMAND ${TRIPAR_AREA_DIR}/expect_stderr.sh 2 "^tripar plan: .*${regex}" 1 --
                   $<TARGET_FILE:tripar> plan --preset gpt2-124m --cluster ${PLAN_FIXTURES}/${stem}.yaml)
  set_tests_properties(cli_plan_cluster_${stem} PROPERTIES LABELS "unit;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 60)
endforeach()

# plan_refuses(NAME REGEX ARGS...): `tripar plan ARGS...` exits 2 with one line matching REGEX.
function(plan_refuses name regex)
  add_test(NAME cli_plan_${name}
           COMMAND ${TRIPAR_AREA_DIR}/expect_stderr.sh 2 "^tripar plan: ${regex}" 1 --
                   $<TARGET_FILE:tripar> plan ${ARGN})
  set_tests_properties(cli_plan_${name} PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                       TIMEOUT 60)
endfunction()
# A model that fits nowhere, an SLO no strategy meets, and the usage errors.
plan_refuses(fits_nowhere "the model fits nowhere on 8 devices of 2\\.5 GiB: the smallest rank needs [0-9.]+ GiB"
             --preset llama3.1-405b --cluster ${PLAN_CLUSTERS}/this-machine.yaml --prompt 16 --new-tokens 4)
plan_refuses(impossible_slo "no strategy meets the SLO \\(TTFT <= 1e-09 s, TPOT <= 0 s. 0 = none\\) on 8 devices: the best TTFT is"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --objective goodput --ttft 1e-9)
plan_refuses(goodput_needs_slo "--objective goodput needs --ttft S and/or --tpot S"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --objective goodput)
plan_refuses(unknown_preset "--preset gpt5 is not a preset. presets: gpt2-124m"
             --preset gpt5 --cluster ${PLAN_CLUSTERS}/this-machine.yaml)
plan_refuses(too_many_gpus "--gpus 9 is more than the 8 devices of .*this-machine\\.yaml \\(1 nodes x 8\\)"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --gpus 9)
plan_refuses(context "a prompt of 1000 tokens plus 100 new tokens exceeds the model's context of 1024"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --prompt 1000 --new-tokens 100)
plan_refuses(no_cluster "--cluster CLUSTER\\.yaml is required" --preset gpt2-124m)
plan_refuses(bad_objective "--objective fastest is not allowed"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --objective fastest)
plan_refuses(bad_precision "--precision fp8 is not allowed. allowed: fp32, int8w, bf16, fp16"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --precision fp8)
# An empty --calibrate, at the end, before another option or before a file that is not HDF5.
plan_refuses(calibrate_empty "--calibrate needs at least one run file \\(RUN\\.h5, recorded with record\\.timings: layer\\)$"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --calibrate)
plan_refuses(calibrate_empty_option "--calibrate needs at least one run file .*. got --top, an option$"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --calibrate --top 3)
plan_refuses(calibrate_job_file "--calibrate needs at least one run file .*. got .*this-machine\\.yaml, which is not an HDF5 file$"
             --preset gpt2-124m --calibrate ${PLAN_CLUSTERS}/this-machine.yaml --cluster ${PLAN_CLUSTERS}/this-machine.yaml)
plan_refuses(bad_kv_dtype "--kv-dtype fp8 is not allowed. allowed: auto, fp32, bf16, fp16, int8"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --kv-dtype fp8)
# Issue 27's case: Llama 2 7B, batch 384, on one A100 fits with the fp16 KV cache that fp16
# weights get by default, and fits nowhere with an fp32 one.
add_test(NAME cli_plan_kv_dtype
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_kv_dtype.py $<TARGET_FILE:tripar>
                 ${PLAN_CLUSTERS}/a100-cluster.yaml)
set_tests_properties(cli_plan_kv_dtype PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 60)
# plan_calibration_test(NAME SCRIPT JOB): SCRIPT TRIPAR JOB this-machine.yaml WORKDIR records
# real runs of JOB under mpiexec and checks what `plan --calibrate` makes of them.
function(plan_calibration_test name script job)
  add_test(NAME ${name}
           COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/${script} $<TARGET_FILE:tripar> ${job}
                   ${PLAN_CLUSTERS}/this-machine.yaml ${CMAKE_CURRENT_BINARY_DIR}/${name})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;cli"
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 120)
endfunction()
# A mixture of experts priced as its runs routed it: report --roofline prices a run's experts
# from its /moe/expert_load, and plan --calibrate takes that routing (plan_expert_routing.py).
plan_calibration_test(cli_plan_expert_routing plan_expert_routing.py ${TRIPAR_FIXTURES}/factor_moe.yaml)
# Calibration refuses what every run-file tool refuses (tools.cmake's fixtures).
tools_test(tools_plan_calibrate_foreign 2 "^tripar plan: .*foreign\\.h5: not a tripar run file" 1
           plan --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --calibrate @W@/foreign.h5)
tools_test(tools_plan_calibrate_incomplete 2 "^tripar plan: .*incomplete\\.h5 is an incomplete run file \\(complete=0\\). calibrate from finished runs" 1
           plan --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --calibrate @W@/incomplete.h5)

# JSON holds every strategy the mesh rules allow, ranked; CSV and text agree; calibration
# from a real run (tools.cmake's run.h5, timings: layer) changes the rates; --validate
# predicts four measured runs, each from the other three; device.from and network.TIER.from
# read a bench.roofline run and a commbench --tiers file (two ranks under mpiexec).
add_test(NAME cli_plan_outputs
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_check.py ${CMAKE_CURRENT_BINARY_DIR}/cli_plan
                 ${TOOLS_WORK})
set_tests_properties(cli_plan_outputs PROPERTIES LABELS "mpi;cli" FIXTURES_REQUIRED tools_files
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)

# -o may not be an input (a copy of the cluster file, reached through "./", so the source tree
# is never at risk) nor a directory.
set(PLAN_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli_plan)
add_test(NAME cli_plan_output_is_input
         COMMAND sh -c "mkdir -p ${PLAN_WORK} && cp ${PLAN_CLUSTERS}/this-machine.yaml ${PLAN_WORK}/c.yaml && cd ${PLAN_WORK} && ${TRIPAR_AREA_DIR}/expect_stderr.sh 2 \"^tripar plan: -o './c.yaml' is the same file as the input 'c.yaml'. an output may not replace an input\" 1 -- $<TARGET_FILE:tripar> plan --preset gpt2-124m --cluster c.yaml -o ./c.yaml && cmp c.yaml ${PLAN_CLUSTERS}/this-machine.yaml")
set_tests_properties(cli_plan_output_is_input PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 60)
plan_refuses(output_is_directory "-o '.*' is a directory"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml -o ${CMAKE_CURRENT_BINARY_DIR})

# --validate's refusals (its table: plan_check.py)
tools_test(tools_plan_validate_incomplete 2 "^tripar plan: .*incomplete\\.h5 is an incomplete run file \\(complete=0\\). validate against finished runs" 1
           plan --validate @W@/run.h5 @W@/incomplete.h5 --cluster ${PLAN_CLUSTERS}/this-machine.yaml)
tools_test(tools_plan_validate_with_preset 2 "^tripar plan: --validate takes its models from the runs it names" 1
           plan --validate @W@/run.h5 --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml)
# --rate (goodput under a Poisson stream): its value, its targets, --duration without it, beside
# --validate, and a stream no strategy serves any request of within the targets.
set(PLAN_RATE_ARGS --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/this-machine.yaml --gpus 2)
plan_refuses(rate_zero "--rate 0 is not allowed. allowed: a number > 0 and at most 1e9 \\(requests per second\\)$"
             ${PLAN_RATE_ARGS} --rate 0 --ttft 1 --tpot 1)
plan_refuses(rate_negative "--rate -2 is not allowed. allowed: a number > 0"
             ${PLAN_RATE_ARGS} --rate -2 --ttft 1 --tpot 1)
plan_refuses(rate_no_targets "--rate needs both targets, --ttft S and --tpot S \\(seconds > 0\\). goodput counts the requests meeting both. missing: --ttft and --tpot$"
             ${PLAN_RATE_ARGS} --rate 2)
plan_refuses(rate_no_tpot "--rate needs both targets.* missing: --tpot$"
             ${PLAN_RATE_ARGS} --rate 2 --ttft 1)
plan_refuses(ttft_zero "--ttft 0 is not allowed. allowed: a number > 0 and at most 1e9 \\(seconds\\)$"
             ${PLAN_RATE_ARGS} --rate 2 --ttft 0 --tpot 1)
plan_refuses(tpot_negative "--tpot -0.1 is not allowed. allowed: a number > 0 and at most 1e9 \\(seconds\\)$"
             ${PLAN_RATE_ARGS} --rate 2 --ttft 1 --tpot -0.1)
plan_refuses(duration_without_rate "--duration is the length of --rate's stream. give --rate R with it$"
             ${PLAN_RATE_ARGS} --duration 10)
plan_refuses(rate_unmeetable "no strategy serves any request within the SLO \\(TTFT <= 1e-06 s, TPOT <= 1 s\\) at 2 requests/s on 2 devices: the best p50 TTFT under that load is"
             ${PLAN_RATE_ARGS} --rate 2 --ttft 1e-6 --tpot 1)
# The goodput's outputs and --validate on a real arrival-rate run (plan_goodput.py).
add_test(NAME cli_plan_goodput
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_goodput.py ${CMAKE_CURRENT_BINARY_DIR}/cli_plan_goodput)
set_tests_properties(cli_plan_goodput PROPERTIES LABELS "cli" ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 300)

# GPT-2 124M on 13 ranks with one prompt: tp 13 splits no head, pp 13 > 12 layers, dp 13 > 1.
plan_refuses(no_strategy "no strategy of tripar runs this model on 13 ranks"
             --preset gpt2-124m --cluster ${PLAN_CLUSTERS}/a100-cluster.yaml --gpus 13 --batch 1)

# The ranking: calibrate on two real runs of plan_rank.yaml, plan 2 ranks, run the predicted
# top 3 and bottom 3 three times each; pairs predicted 3x apart must measure in that order, and
# under ASan (TRIPAR_SANITIZE in TRIPAR_TEST_ENV) no order is asserted (plan_ranking.py).
add_test(NAME cli_plan_ranking
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_ranking.py ${CMAKE_CURRENT_BINARY_DIR}/cli_plan_ranking)
# RUN_SERIAL: the runs it compares are timed, so no other test shares the cores meanwhile.
# Under the sanitizers it asserts no order (plan_ranking.py), so it shares them like any test.
if(TRIPAR_SANITIZE)
  set(PLAN_RANKING_SERIAL FALSE)
else()
  set(PLAN_RANKING_SERIAL TRUE)
endif()
set_tests_properties(cli_plan_ranking PROPERTIES LABELS "mpi;cli;bench" RUN_SERIAL ${PLAN_RANKING_SERIAL}
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 600)

# plot.py plan: the predicted throughput/latency plot of two batch sizes and its Pareto front.
add_test(NAME cli_plan_plot COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_plot_check.py
         ${CMAKE_CURRENT_BINARY_DIR}/plan_plot)
set_tests_properties(cli_plan_plot PROPERTIES LABELS "unit;cli" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 120)

# plot.py given the wrong kind of file (a JSON that is not a plan, a run file to plan, a plan to
# timeline, a missing file, a text file, ...): exit 2, one line `plot.py: ...`, no traceback.
add_test(NAME cli_plot_wrong_inputs COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plot_errors.py
         ${CMAKE_CURRENT_BINARY_DIR}/plot_errors ${TOOLS_WORK}/run.h5)
set_tests_properties(cli_plot_wrong_inputs PROPERTIES LABELS "unit;cli" FIXTURES_REQUIRED tools_files
                     ENVIRONMENT "${TRIPAR_TEST_ENV}" TIMEOUT 180)

# --validate-published: the format of data/published/, every row predicted (never an error
# bound: docs/planner.md reports the errors), and bad published files refused with file:line.
add_test(NAME cli_plan_validate_published
         COMMAND /usr/bin/python3 ${TRIPAR_AREA_DIR}/plan_published.py $<TARGET_FILE:tripar>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cli_plan_published)
set_tests_properties(cli_plan_validate_published PROPERTIES LABELS "unit;cli"
                     ENVIRONMENT "${TRIPAR_TEST_ENV}")
# The TP all-reduces calibrated from a blocking run's own (plan_comm_calibration.py).
plan_calibration_test(cli_plan_comm_calibration plan_comm_calibration.py ${TRIPAR_FIXTURES}/factor.yaml)
