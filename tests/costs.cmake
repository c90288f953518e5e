# Start order under `ctest -j`: the suite's longest tests, with their seconds in a Release run
# on 2 cores (2026-12-07), as CTest COST. ctest starts the costliest first; without costs, a fresh
# clone (no Testing/Temporary/CTestCostData.txt yet) starts them in test order, and a minute-long
# test that happens to start last leaves the other core idle while it runs. Ordering only: no
# test depends on it. To refresh after a full run: build/Testing/Temporary/CTestCostData.txt
# holds each test's name, runs and mean seconds. Each entry is NAME:SECONDS.
set(TRIPAR_TEST_COSTS
  slurm_cluster:72
  parallel_q4_k_factorizations:20
  ckpt_precision_e2e:70
  parallel_kv_bf16_llama:42
  parallel_moe_ep_w8:40
  parallel_q4_1_factorizations:38
  parallel_precisions:37
  parallel_kv_fp16_llama:36
  parallel_kv_int8_llama:36
  records_telemetry:34
  records_e2e_startup_stall:33
  cli_plan_ranking:32
  parallel_q4_0_factorizations:31
  fuzz_cluster:29
  parallel_qwen2_moe_factorizations_w8:28
  gguf_smollm2_reference:28
  parallel_moe_factorizations_w8:28
  cluster_factorizations_4x2:27
  parallel_q4_k_w5:8
  parallel_q4_k_w7:8
  parallel_q4_k_w3_w6:15
  parallel_qwen2_moe_factorizations_w6:27
  parallel_moe_factorizations_w6:26
  fuzz_job:26
  fuzz_gguf:25
  fuzz_tokenizer_json:25
  parallel_q8_0_factorizations:23
  fuzz_safetensors:22
  parallel_llama_replicated_kv:21
  perplexity_smollm2_real:20
  gguf_import_vs_hf:18
  gguf_import_moe_vs_hf:17
  cluster_link_down:17
  ckpt_integrity_save:15
  cli_plot_wrong_inputs:15
  cluster_commbench_tiers:15
  cluster_node_stop:14
  gguf_import_spm:14
  cluster_mesh_nodes:13
  gguf_import_tokenizer:13
  ckpt_integrity_hf:13
  parallel_stop_at_eos:12
  text_meta_e2e:12
  slurm_local:12
  kernels_threads_bitwise:11
  ckpt_integrity_gguf:11
  gguf_smollm2_keep:11
  slurm_nodes_nodekill:11
  parallel_order_auto_one_node:11
  parallel_factorizations_w8:11
  records_e2e_stall:11
  parallel_int8w_groups_head:11
  parallel_q8_0_head_microbatches:10
  parallel_overlap_chunks:10
  parallel_llama_mqa_paged_scaled:10
  cli_paths_run_out_not_a_file:10
  slurm_nodes_sweep:10
  parallel_uneven_splits:10
  parallel_int8w_rows:10
  cluster_factorizations_moe_2x2:10
  parallel_q4_1_w5_w7:10
  gguf_vs_gguf_py:9
  cli_report_roofline:9
  parallel_bf16_head:9
  parallel_factorizations_w6:9
  parallel_qwen2_moe_int8w:9
  gguf_smollm2_real:9
  parallel_qwen2_moe_factorizations_w4:9
  parallel_kv_bf16_w5_w7:9
  parallel_kv_int8_w5_w7:9
  test_ops_scalar:9
  cluster_link_delay:9
  parallel_moe_factorizations_w4:9
  parallel_kv_fp16_w5_w7:9
  parallel_qwen2_moe_factorizations_w5_w7:9
  cluster_node_kill_whole:8
  cluster_node_kill_ranks:8
)
foreach(entry IN LISTS TRIPAR_TEST_COSTS)
  string(REGEX MATCH "^(.+):([0-9]+)$" matched "${entry}")
  if(matched AND TEST ${CMAKE_MATCH_1})
    set_tests_properties(${CMAKE_MATCH_1} PROPERTIES COST ${CMAKE_MATCH_2})
  endif()
endforeach()
