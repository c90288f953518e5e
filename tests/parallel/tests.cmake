# Multi-rank tests of 3D parallelism (label mpi): every factorization against one rank, the
# overlap/micro-batch/uneven variants, and impossible meshes.
set(PAR ${CMAKE_CURRENT_SOURCE_DIR}/parallel)
set(PAR_ENV ${TRIPAR_TEST_ENV} MPIEXEC=${MPIEXEC_EXECUTABLE})
function(tripar_parallel_test name)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "mpi" ENVIRONMENT "${PAR_ENV}" TIMEOUT 900)
endfunction()

foreach(world 1 2 3 4 6 8)
  tripar_parallel_test(parallel_factorizations_w${world}
    ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_w${world} ${TRIPAR_FIXTURES}/factor.yaml ${world})
endforeach()
# 5 and 7 ranks: tp = 5 and 7 need heads that they divide (35, head size 4) and a vocabulary
# neither divides (211, prime), so that every factorization of 1..8 ranks is covered.
tripar_parallel_test(parallel_factorizations_w5_w7
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_w5_w7 ${TRIPAR_FIXTURES}/factor.yaml 5 7
  -- model.synthetic.heads=35 model.synthetic.embd=140 model.synthetic.vocab=211)
foreach(mb 2 3 4)
  tripar_parallel_test(parallel_microbatches_${mb}_overlap
    ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_mb${mb} ${TRIPAR_FIXTURES}/factor.yaml 4
    -- parallel.microbatches=${mb} parallel.overlap=true parallel.chunks=3)
endforeach()
tripar_parallel_test(parallel_overlap_chunks
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_overlap ${TRIPAR_FIXTURES}/factor.yaml 2 6
  -- parallel.overlap=true parallel.chunks=4)
# Overlap runs a prefill as two nano-batches (forward.c nano_split), each one's all-reduces in
# flight while the other computes: 4 prompts of 40 in 3 micro-batches (1, 1, 2 prompts) split
# by positions (20 + 20) and by sequences; GPT-2 pre- and post-norm (paged), and Llama, also
# with micro-batches of one prompt of 130, which split at a multiple of 64 positions (64 + 66).
set(NANO parallel.overlap=true parallel.chunks=3 input.synthetic.batch=4
    input.synthetic.length=40 parallel.microbatches=3)
tripar_parallel_test(parallel_overlap_nano
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_nano ${TRIPAR_FIXTURES}/factor.yaml 2 4
  -- ${NANO})
tripar_parallel_test(parallel_overlap_nano_post_paged
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_nano_post ${TRIPAR_FIXTURES}/factor.yaml 2 4
  -- ${NANO} model.norm=post model.kv_cache=paged model.kv_block=4)
tripar_parallel_test(parallel_llama_overlap_nano
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_nano ${TRIPAR_FIXTURES}/factor_llama.yaml 2 4
  -- ${NANO})
tripar_parallel_test(parallel_llama_overlap_nano_aligned
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_nano_aligned ${TRIPAR_FIXTURES}/factor_llama.yaml 2
  -- parallel.overlap=true input.synthetic.batch=2 parallel.microbatches=2 input.synthetic.length=130
  model.synthetic.ctx=160)
# parallel.mpi_tuning: the MPI variables overlap needs, set by tripar unless the user set them
# or turned it off, and recorded in the run file (parallel/mpi_tuning.h).
tripar_parallel_test(parallel_mpi_tuning /usr/bin/python3 ${PAR}/check_mpi_tuning.py
  ${CMAKE_CURRENT_BINARY_DIR}/mpi_tuning ${TRIPAR_FIXTURES}/factor.yaml)
# 5 layers on 2 stages (3 + 2) and 5 prompts over 2 or 3 replicas (uneven splits).
tripar_parallel_test(parallel_uneven_splits
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_uneven ${TRIPAR_FIXTURES}/factor.yaml 2 3 4
  -- model.synthetic.layers=5 input.synthetic.batch=5 parallel.microbatches=2)
tripar_parallel_test(parallel_post_norm_paged
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/factor_post ${TRIPAR_FIXTURES}/factor.yaml 4
  -- model.norm=post model.kv_cache=paged model.kv_block=4)

# Llama: 24 heads over 12 kv heads (each rank holds kv_heads / tp), over 2 (tp 4 and 8 replicate
# each kv head on 2 and 4 ranks) and over 1 with a paged cache, Llama 3.1 rope scaling and
# micro-batches (tp 3 and 6 replicate it).
foreach(world 1 2 3 4 6)
  tripar_parallel_test(parallel_llama_factorizations_w${world}
    ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_w${world} ${TRIPAR_FIXTURES}/factor_llama.yaml ${world})
endforeach()
# Mixture of experts (mixtral, then qwen2_moe with a shared expert, 3 experts per token and the
# softmax over every expert, with micro-batches): every factorization of 1..8 ranks, experts
# tensor-parallel inside the TP group, and each also with every parallel.ep that divides the 6
# experts (--experts 6: ep 2, 3 and 6) and divides its tp, or is a multiple of tp dividing
# dp x tp (EP groups across replicas, tokens moved by all-to-all; dp 6 with 8 prompts and 2
# micro-batches leaves replicas of one micro-batch idle in the others' all-to-alls); 8 experts
# on 8 ranks take ep 2, 4 and 8.
# 8 ranks take 2 kv heads (tp 8 replicates each on 4), 5 and 7 take 35 heads of 4 (as
# factor.yaml), so that tp 5 and 7 divide them.
set(QWEN2_MOE model.arch=qwen2_moe model.synthetic.shared_expert_mlp=56
    model.synthetic.norm_topk_prob=false model.synthetic.experts_top_k=3 parallel.microbatches=2)
set(MOE_W5_W7 model.synthetic.heads=35 model.synthetic.kv_heads=35 model.synthetic.embd=140
    model.synthetic.vocab=211)
foreach(world 1 2 3 4 6)
  tripar_parallel_test(parallel_moe_factorizations_w${world}
    ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/moe_w${world} ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 ${world})
  tripar_parallel_test(parallel_qwen2_moe_factorizations_w${world}
    ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/qwen2_moe_w${world} ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 ${world}
    -- ${QWEN2_MOE})
endforeach()
tripar_parallel_test(parallel_moe_factorizations_w8
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/moe_w8 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 8
  -- model.synthetic.kv_heads=2)
tripar_parallel_test(parallel_qwen2_moe_factorizations_w8
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/qwen2_moe_w8 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 8
  -- model.synthetic.kv_heads=2 ${QWEN2_MOE})
tripar_parallel_test(parallel_moe_factorizations_w5_w7
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/moe_w5_w7 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 5 7
  -- ${MOE_W5_W7})
tripar_parallel_test(parallel_qwen2_moe_factorizations_w5_w7
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/qwen2_moe_w5_w7 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 6 5 7
  -- ${MOE_W5_W7} ${QWEN2_MOE})
# 8 experts on 8 ranks with overlap: across replicas the shared expert runs while the routed
# rows travel (MPI_Ialltoallv), besides the TP all-reduces' pieces.
tripar_parallel_test(parallel_moe_ep_w8
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/moe_ep_w8 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 8 8
  -- model.synthetic.kv_heads=2 model.synthetic.experts=8 ${QWEN2_MOE} parallel.overlap=true)
tripar_parallel_test(parallel_llama_replicated_kv
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_kv2 ${TRIPAR_FIXTURES}/factor_llama.yaml 4 8
  -- model.synthetic.kv_heads=2)
tripar_parallel_test(parallel_llama_mqa_paged_scaled
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_kv1 ${TRIPAR_FIXTURES}/factor_llama.yaml 6
  -- model.synthetic.kv_heads=1 model.kv_cache=paged model.kv_block=4 parallel.microbatches=2
  "model.synthetic.rope_scaling={factor: 4, original_max_position_embeddings: 16}")
# int8w on every Llama matrix (untied head included) with micro-batches and chunked overlap.
# int8 products quantise their activations in blocks, so a mesh's 1e-7 summation-order
# differences may move a block by one rounding step: activations within int8w's tolerance and
# tokens apart only at near ties, as for factor_q8.yaml below (check_lowp_factorizations.py).
tripar_parallel_test(parallel_llama_int8w_overlap /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/llama_int8w ${TRIPAR_FIXTURES}/factor_llama.yaml 2e-2 4
  -- model.synthetic.kv_heads=2 model.precision=int8w parallel.microbatches=2 parallel.overlap=true
  parallel.chunks=3)
# int8w on every expert (routed and shared; the router stays fp32) of a Qwen2-MoE model, with
# ep 2 too (each row's scale agreed within its expert-TP block only), inside the TP group and
# across replicas (whole experts).
tripar_parallel_test(parallel_qwen2_moe_int8w /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/qwen2_moe_int8w ${TRIPAR_FIXTURES}/factor_moe.yaml 2e-2 --experts 6 4
  -- model.precision=int8w ${QWEN2_MOE})
# Low-precision weights on a model where every int8 product quantises its activations in blocks
# (data/fixtures/factor_q8.yaml): every factorization of 2 to 4 ranks gives the one-rank tokens,
# and activations within the precision's own tolerance (docs/kernels.md, "Accuracy"), for int8w
# with scales per row, per 64 columns with the head in int8 too and micro-batches, and for
# bf16 with the head in bf16; then each precision against fp32 within docs/kernels.md's
# tolerances and every cpu kernel level against the detected one.
tripar_parallel_test(parallel_int8w_rows /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/q8_rows ${TRIPAR_FIXTURES}/factor_q8.yaml 2e-2 2 3 4
  -- model.precision=int8w)
tripar_parallel_test(parallel_int8w_groups_head /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/q8_groups ${TRIPAR_FIXTURES}/factor_q8.yaml 2e-2 2 3 4
  -- model.precision=int8w model.int8_group=64 model.quantize_head=true parallel.microbatches=2)
tripar_parallel_test(parallel_bf16_head /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/bf16_head ${TRIPAR_FIXTURES}/factor_q8.yaml 1e-2 2 3 4
  -- model.precision=bf16 model.quantize_head=true)
tripar_parallel_test(parallel_precisions
  /usr/bin/python3 ${PAR}/check_precisions.py ${CMAKE_CURRENT_BINARY_DIR}/precisions ${TRIPAR_FIXTURES}/factor_q8.yaml)
# ggml's block formats (model.precision q8_0, q4_0, q4_1) on every factorization of 1 to 8 ranks
# (data/fixtures/factor_blocks.yaml: every rank's share of every matrix input is whole 32-column
# blocks; 35 heads for tp 5 and 7): activations quantised in blocks of 32, so the int8w rule
# holds, activations within 2e-2 and tokens apart only at near ties. q8_0 also with the head in
# q8_0 and micro-batches.
foreach(p q8_0 q4_0 q4_1)
  tripar_parallel_test(parallel_${p}_factorizations /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
    ${CMAKE_CURRENT_BINARY_DIR}/blocks_${p} ${TRIPAR_FIXTURES}/factor_blocks.yaml 2e-2 2 3 4 6 8
    -- model.precision=${p})
  tripar_parallel_test(parallel_${p}_w5_w7 /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
    ${CMAKE_CURRENT_BINARY_DIR}/blocks_${p}_w5_w7 ${TRIPAR_FIXTURES}/factor_blocks.yaml 2e-2 5 7
    -- model.precision=${p} model.synthetic.heads=35 model.synthetic.kv_heads=35)
endforeach()
# q4_k's 256-weight super-blocks on every factorization of 1 to 8 ranks
# (data/fixtures/factor_blocks_k.yaml): each rank's attention columns must be whole blocks, so
# each set of world sizes gets the least head count of 256 that all its tp values split:
# 8 heads for 2, 4 and 8 ranks, 6 for 3 and 6, 5 and 7 for 5 and 7 (one width for all would be
# 24 heads, then 35, and took 70 s): its sub-blocks run q4_1's path, the same rule.
tripar_parallel_test(parallel_q4_k_factorizations /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/blocks_q4_k ${TRIPAR_FIXTURES}/factor_blocks_k.yaml 2e-2 2 4 8)
tripar_parallel_test(parallel_q4_k_w3_w6 /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/blocks_q4_k_w3_w6 ${TRIPAR_FIXTURES}/factor_blocks_k.yaml 2e-2 3 6
  -- model.synthetic.heads=6)
foreach(w 5 7)
  tripar_parallel_test(parallel_q4_k_w${w} /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
    ${CMAKE_CURRENT_BINARY_DIR}/blocks_q4_k_w${w} ${TRIPAR_FIXTURES}/factor_blocks_k.yaml 2e-2 ${w}
    -- model.synthetic.heads=${w})
endforeach()
tripar_parallel_test(parallel_q8_0_head_microbatches /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/blocks_q8_0_head ${TRIPAR_FIXTURES}/factor_blocks.yaml 2e-2 4
  -- model.precision=q8_0 model.quantize_head=true parallel.microbatches=2)
# Each narrow KV cache type (model.kv_dtype) on every factorization of 1 to 8 ranks: Llama
# (RoPE, one kv head for 24 query heads, so every tp replicates it) on 2, 3, 4, 6 and 8 ranks, GPT-2
# with 35 heads and a paged cache on 5 and 7 (as parallel_factorizations_w5_w7). A narrow cache rounds each key
# and value as it is stored, so a mesh's 1e-7 summation-order differences may move one by a step
# of the type: activations within the type's tolerance and tokens apart only at near ties
# (check_lowp_factorizations.py), against the one-rank run with the same cache type.
foreach(kv bf16 fp16 int8)
  tripar_parallel_test(parallel_kv_${kv}_llama /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
    ${CMAKE_CURRENT_BINARY_DIR}/kv_${kv}_llama ${TRIPAR_FIXTURES}/factor_llama.yaml 2e-2 2 3 4 6 8
    -- model.kv_dtype=${kv} model.synthetic.kv_heads=1 generate.new_tokens=4)
  tripar_parallel_test(parallel_kv_${kv}_w5_w7 /usr/bin/python3 ${PAR}/check_lowp_factorizations.py
    ${CMAKE_CURRENT_BINARY_DIR}/kv_${kv}_w5_w7 ${TRIPAR_FIXTURES}/factor.yaml 2e-2 5 7
    -- model.kv_dtype=${kv} model.synthetic.heads=35 model.synthetic.embd=140 model.synthetic.vocab=211
    model.kv_cache=paged model.kv_block=4 generate.new_tokens=4)
endforeach()
# head_dim 6 apart from embd / heads = 4 (Hugging Face's head_dim, as Mistral-Nemo's): attention
# 144 wide over a residual stream of 96, split by heads over tp 2 and 4 (kv heads replicated).
tripar_parallel_test(parallel_llama_head_dim
  ${PAR}/check_factorizations.sh ${CMAKE_CURRENT_BINARY_DIR}/llama_head_dim ${TRIPAR_FIXTURES}/factor_llama.yaml 4
  -- model.synthetic.head_dim=6 model.synthetic.kv_heads=2)

tripar_parallel_test(parallel_bad_mesh_product
  ${PAR}/check_bad_mesh.sh 3 "dp \\* tp \\* pp = 1 \\* 2 \\* 1 = 2, but the job was started with 3"
  ${TRIPAR_FIXTURES}/factor.yaml --set parallel.tp=2)
tripar_parallel_test(parallel_bad_mesh_heads
  ${PAR}/check_bad_mesh.sh 5 "parallel.tp = 5 does not divide model.heads = 24"
  ${TRIPAR_FIXTURES}/factor.yaml --set parallel.tp=5)
tripar_parallel_test(parallel_bad_mesh_kv_heads
  ${PAR}/check_bad_mesh.sh 4 "parallel.tp = 4 does not fit model.kv_heads = 6: tp must divide the kv heads or be a multiple of them. tp values that work: 1, 2, 3, 6, 12, 24"
  ${TRIPAR_FIXTURES}/factor_llama.yaml --set parallel.tp=4 --set model.synthetic.kv_heads=6)
tripar_parallel_test(parallel_bad_mesh_layers
  ${PAR}/check_bad_mesh.sh 4 "parallel.pp = 4 is more than model.layers = 3"
  ${TRIPAR_FIXTURES}/factor.yaml --set parallel.pp=4 --set model.synthetic.layers=3)
tripar_parallel_test(parallel_bad_mesh_prompts
  ${PAR}/check_bad_mesh.sh 4 "parallel.dp = 4 replicas but the input has only 2 prompts"
  ${TRIPAR_FIXTURES}/factor.yaml --set parallel.dp=4 --set input.synthetic.batch=2)

# The comm interface: every comm_ops entry on the mpi and staged backends, and comm_setup's choice.
add_executable(parallel_test_comm parallel/test_comm.c)
target_link_libraries(parallel_test_comm PRIVATE tripar_core)
foreach(np 2 3)
  tripar_mpi_test(parallel_comm_np${np} ${np} $<TARGET_FILE:parallel_test_comm>)
  set_tests_properties(parallel_comm_np${np} PROPERTIES
                       PASS_REGULAR_EXPRESSION "test_comm: 0 failure\\(s\\)")
  set_property(TEST parallel_comm_np${np} APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
endforeach()

# comm_ops' all-to-all (alltoallv, ialltoallv) on the mpi and staged backends, 1 to 4 ranks
# (oversubscribed), irregular counts with zeros and a rank that sends nothing, every type; and a
# count past MPI's int refused by name.
add_executable(parallel_test_alltoallv parallel/test_alltoallv.c)
target_link_libraries(parallel_test_alltoallv PRIVATE tripar_core)
foreach(np 1 2 3 4)
  tripar_mpi_test(parallel_alltoallv_np${np} ${np} $<TARGET_FILE:parallel_test_alltoallv>)
  set_tests_properties(parallel_alltoallv_np${np} PROPERTIES
                       PASS_REGULAR_EXPRESSION "test_alltoallv: 0 failure\\(s\\) over ${np} ranks")
  set_property(TEST parallel_alltoallv_np${np} APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
endforeach()
tripar_mpi_test(parallel_alltoallv_too_large 1 $<TARGET_FILE:parallel_test_alltoallv> too-large)
set_tests_properties(parallel_alltoallv_too_large PROPERTIES
                     PASS_REGULAR_EXPRESSION "all-to-all: send count 2147483648 for peer 0 exceeds MPI_Alltoallv's int counts"
                     FAIL_REGULAR_EXPRESSION "was accepted")
set_property(TEST parallel_alltoallv_too_large APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)

# The agreements of parallel/agree.c (what the run file and the checkpoint agree on), each on
# 1, 2 and 3 ranks with inputs that differ by rank.
add_executable(parallel_test_agree parallel/test_agree.c)
target_link_libraries(parallel_test_agree PRIVATE tripar_core)
foreach(np 1 2 3)
  tripar_mpi_test(parallel_agree_np${np} ${np} $<TARGET_FILE:parallel_test_agree>)
  set_tests_properties(parallel_agree_np${np} PROPERTIES
                       PASS_REGULAR_EXPRESSION "test_agree: 0 failure\\(s\\) over ${np} ranks")
  set_property(TEST parallel_agree_np${np} APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
endforeach()

# Which environment variable picks a rank's GPU under mpirun, srun and mpirun inside Slurm.
tripar_unit_test(parallel_test_device SOURCES parallel/test_device.c LABELS parallel)
# The NCCL comm's host-wait decision (parallel/comm_poll.c), which needs no GPU.
tripar_unit_test(test_comm_poll SOURCES parallel/test_comm_poll.c LABELS comm)
# parallel.order auto's node-major layout and its refusals, as a pure function (no MPI).
tripar_unit_test(parallel_test_mesh_layout SOURCES parallel/test_mesh_layout.c LABELS parallel)
# On one node parallel.order auto gives tp-pp-dp's coordinates and tokens, for every
# factorization of 4 ranks.
tripar_parallel_test(parallel_order_auto_one_node
  ${PAR}/check_auto_order.sh ${CMAKE_CURRENT_BINARY_DIR}/order_auto ${TRIPAR_FIXTURES}/factor.yaml 4)
# tripar report's nodes line and groups crossing nodes, from /mesh (one node, rewritten node
# columns, a file without the column).
tripar_parallel_test(parallel_report_nodes
  ${PAR}/check_report_nodes.sh ${CMAKE_CURRENT_BINARY_DIR}/report_nodes ${TRIPAR_FIXTURES}/factor.yaml)
# Perplexity: every factorization, the refusals, SmolLM2 (label real).
include(${TRIPAR_AREA_DIR}/perplexity.cmake)
# generate.stop_at_eos: an eos id that ends some sequences early (picked from a first run's
# tokens) gives the one-rank tokens, -1 after each eos, under every factorization of 2 to 4
# ranks with micro-batches and uneven splits, and for Llama with replicated kv heads.
tripar_parallel_test(parallel_stop_at_eos /usr/bin/python3 ${PAR}/check_eos_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/eos ${TRIPAR_FIXTURES}/factor.yaml 12 2 3 4
  -- parallel.microbatches=2 record.activations=[])
tripar_parallel_test(parallel_llama_stop_at_eos /usr/bin/python3 ${PAR}/check_eos_factorizations.py
  ${CMAKE_CURRENT_BINARY_DIR}/llama_eos ${TRIPAR_FIXTURES}/factor_llama.yaml 12 4
  -- model.synthetic.kv_heads=2 parallel.microbatches=2 record.activations=[])

# Label `variant`: a test whose code the sanitizer pass of tools/setup.sh reaches through another
# test, so that pass leaves it out (about 4 minutes of the suite's 40). Most run the same
# sharding and communication code as a sibling, with only the number format or the model's
# optional parts changed: the
# block formats' sibling is q8_0 (q4_0, q4_1 and q4_k differ only in how a block unpacks,
# whose kernels test_ops* run under the sanitizers at every level; q4_k's 256-column
# super-blocks go through the same split code with another unit), the narrow KV caches' is int8,
# and Mixtral's is Qwen2-MoE, whose layer runs Mixtral's routed experts plus a shared one.
set_property(TEST parallel_q4_0_factorizations parallel_q4_0_w5_w7 parallel_q4_1_factorizations
             parallel_q4_1_w5_w7 parallel_q4_k_factorizations parallel_q4_k_w3_w6
             parallel_q4_k_w5 parallel_q4_k_w7
             parallel_kv_bf16_llama parallel_kv_bf16_w5_w7
             parallel_kv_fp16_llama parallel_kv_fp16_w5_w7 parallel_moe_factorizations_w1
             parallel_moe_factorizations_w2 parallel_moe_factorizations_w3
             parallel_moe_factorizations_w4 parallel_moe_factorizations_w6
             parallel_moe_factorizations_w8 parallel_moe_factorizations_w5_w7
             APPEND PROPERTY LABELS variant)
# parallel_precisions compares every ISA level's logits end to end; under the sanitizers every
# level's kernels already run against their double twins in test_ops* (tests/kernels).
set_property(TEST parallel_precisions APPEND PROPERTY LABELS variant)
