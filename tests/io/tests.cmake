# Checkpoints, import-hf, safetensors and the tokenizer. The HF-style fixture directories are
# written at test time by tests/io/make_hf_dir.py --all (fixture ckpt_hf) into the build tree.
set(CKPT_FIXTURES ${CMAKE_CURRENT_BINARY_DIR}/ckpt_fixtures)
set(CKPT_PYTHON /usr/bin/python3)

# ckpt_case_split("NAME|REGEX" name_var regex_var): one entry of a refusal list.
function(ckpt_case_split entry name_var regex_var)
  string(FIND "${entry}" "|" bar)
  string(SUBSTRING "${entry}" 0 ${bar} name)
  math(EXPR after "${bar} + 1")
  string(SUBSTRING "${entry}" ${after} -1 regex)
  set(${name_var} "${name}" PARENT_SCOPE)
  set(${regex_var} "${regex}" PARENT_SCOPE)
endfunction()

add_test(NAME ckpt_make_fixtures
         COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/make_hf_dir.py --all ${CKPT_FIXTURES})
set_tests_properties(ckpt_make_fixtures PROPERTIES FIXTURES_SETUP ckpt_hf LABELS "unit;checkpoint"
                     TIMEOUT 120)

tripar_unit_test(test_safetensors SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/io/test_safetensors.c
                 LABELS checkpoint)
tripar_unit_test(test_checkpoint SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/io/test_checkpoint.c
                 LABELS checkpoint)
tripar_unit_test(test_tokenizer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/io/test_tokenizer.c
                 LABELS checkpoint)
foreach(t test_checkpoint test_tokenizer)
  target_link_libraries(${t} PRIVATE tripar_cli) # they import through `tripar import-hf`
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT CKPT_FIXTURES=${CKPT_FIXTURES})
  set_tests_properties(${t} PROPERTIES FIXTURES_REQUIRED ckpt_hf)
endforeach()

# Parallel save and load over several meshes (uneven layer and head splits included).
add_executable(test_checkpoint_mpi ${CMAKE_CURRENT_SOURCE_DIR}/io/test_checkpoint_mpi.c)
target_link_libraries(test_checkpoint_mpi PRIVATE tripar_core)
foreach(mesh "1;1;1;1" "2;1;2;1" "3;1;1;3" "3;1;3;1" "4;2;2;1" "4;1;2;2")
  list(GET mesh 0 np)
  list(GET mesh 1 dp)
  list(GET mesh 2 tp)
  list(GET mesh 3 pp)
  set(name ckpt_save_load_dp${dp}_tp${tp}_pp${pp})
  tripar_mpi_test(${name} ${np} $<TARGET_FILE:test_checkpoint_mpi> ${dp} ${tp} ${pp}
                  ${CMAKE_CURRENT_BINARY_DIR}/${name}.h5)
  set_property(TEST ${name} APPEND PROPERTY LABELS checkpoint)
  # Open MPI and HDF5 keep allocations past MPI_Finalize, in plugins no suppression can name;
  # ASan still checks every access, and the serial tests above check leaks in our readers.
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
endforeach()

# The CLI: `tripar import-hf` exit codes and messages (tests/expect_exit.sh).
set(CKPT_EXPECT ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh)
add_test(NAME ckpt_cli_import_ok
         COMMAND ${CKPT_EXPECT} 0 "28 tensors from 3 files \\(F32 0, F16 0, BF16 28\\); tokenizer: yes" --
                 $<TARGET_FILE:tripar> import-hf ${CKPT_FIXTURES}/bf16 --out ${CKPT_FIXTURES}/cli_bf16.h5)
add_test(NAME ckpt_cli_import_usage
         COMMAND ${CKPT_EXPECT} 2 "usage: tripar import-hf" -- $<TARGET_FILE:tripar> import-hf)
add_test(NAME ckpt_cli_import_missing
         COMMAND ${CKPT_EXPECT} 2 "tensor 'h\\.1\\.attn\\.c_proj\\.bias' is missing" --
                 $<TARGET_FILE:tripar> import-hf ${CKPT_FIXTURES}/break-missing-tensor
                 --out ${CKPT_FIXTURES}/cli_never.h5)
add_test(NAME ckpt_cli_import_shape
         COMMAND ${CKPT_EXPECT} 2 "'h\\.1\\.mlp\\.c_fc\\.weight' has shape \\[16, 72\\]" --
                 $<TARGET_FILE:tripar> import-hf ${CKPT_FIXTURES}/break-shape-config-mismatch
                 --out ${CKPT_FIXTURES}/cli_never.h5)
add_test(NAME ckpt_cli_import_header
         COMMAND ${CKPT_EXPECT} 2 "header size .* runs past the end of the file" --
                 $<TARGET_FILE:tripar> import-hf ${CKPT_FIXTURES}/break-header-past-eof
                 --out ${CKPT_FIXTURES}/cli_never.h5)
set_tests_properties(ckpt_cli_import_ok ckpt_cli_import_usage ckpt_cli_import_missing
                     ckpt_cli_import_shape ckpt_cli_import_header
                     PROPERTIES LABELS "unit;checkpoint" FIXTURES_REQUIRED ckpt_hf TIMEOUT 60)
# --precision and --int8-group: another value exits 2 listing the allowed ones (both importers
# share the parser, cli_import.c).
function(ckpt_import_refusal name regex)
  add_test(NAME ckpt_cli_import_${name}
           COMMAND ${CKPT_EXPECT} 2 "${regex}" -- $<TARGET_FILE:tripar> import-hf
                   ${CKPT_FIXTURES}/f32 --out ${CKPT_FIXTURES}/cli_never.h5 ${ARGN})
  set_tests_properties(ckpt_cli_import_${name} PROPERTIES LABELS "unit;checkpoint"
                       FIXTURES_REQUIRED ckpt_hf TIMEOUT 60)
endfunction()
ckpt_import_refusal(precision
    "--precision 'fp16' is not a stored precision. allowed: fp32, bf16, int8w" --precision fp16)
ckpt_import_refusal(group "--int8-group '48': allowed: 0 .one scale per row., 32, 64"
                    --precision int8w --int8-group 48)
ckpt_import_refusal(group_bf16 "--int8-group 64 needs --precision int8w. allowed with bf16: 0"
                    --precision=bf16 --int8-group=64)
ckpt_import_refusal(precision_value "--precision needs a value" --precision)
# Stored precisions end to end (tests/io/ckpt_precision_check.py): bf16 and int8w files run bit
# for bit as the fp32 file in that model.precision, on 1 rank and tp=2 x pp=2; sizes; refusals.
add_test(NAME ckpt_precision_e2e
         COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/ckpt_precision_check.py
                 $<TARGET_FILE:tripar> ${CMAKE_CURRENT_BINARY_DIR}/ckpt_precision)
set_tests_properties(ckpt_precision_e2e PROPERTIES LABELS "mpi;checkpoint" TIMEOUT 600
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}")
# End to end with real checkpoints: Hugging Face import against an independent numpy GPT-2,
# on one rank and on a tp=2 x pp=2 mesh, and the save/reload round trip (label mpi).
foreach(variant f32 f16 bf16 f32-mlp)
  foreach(mesh "1;1;1" "4;2;2")
    list(GET mesh 0 np)
    list(GET mesh 1 tp)
    list(GET mesh 2 pp)
    set(name ckpt_e2e_${variant}_np${np})
    add_test(NAME ${name} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_e2e.sh
             ${CMAKE_CURRENT_BINARY_DIR}/ckpt_fixtures/${variant} ${CMAKE_CURRENT_BINARY_DIR}/ckpt_e2e
             ${np} ${tp} ${pp})
    set_tests_properties(${name} PROPERTIES LABELS "mpi;checkpoint" FIXTURES_REQUIRED ckpt_hf
                         ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
  endforeach()
endforeach()
add_test(NAME ckpt_save_reload_bit_identical COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_roundtrip)
set_tests_properties(ckpt_save_reload_bit_identical PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
add_test(NAME ckpt_llama_save_reload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_llama_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor_llama.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_llama_roundtrip)
set_tests_properties(ckpt_llama_save_reload PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
# Mixtral and Qwen2-MoE (a shared expert, q/k/v biases absent): the router, the stacked experts
# and the shared expert round-trip across meshes, with the routing attributes.
add_test(NAME ckpt_mixtral_save_reload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_llama_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor_moe.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_mixtral_roundtrip)
set_tests_properties(ckpt_mixtral_save_reload PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};CKPT_ARCH=mixtral" TIMEOUT 300)
add_test(NAME ckpt_qwen2_moe_save_reload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_llama_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor_moe.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_qwen2_moe_roundtrip
         model.arch=qwen2_moe model.synthetic.shared_expert_mlp=56 model.synthetic.norm_topk_prob=false)
set_tests_properties(ckpt_qwen2_moe_save_reload PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE};CKPT_ARCH=qwen2_moe" TIMEOUT 300)
# Expert parallelism: saved from tp 4 x ep 2, the global tensors (a reload with ep 1 matches);
# reloaded on tp 2 x pp 2 x ep 2 and tp 4 x ep 2, each rank reading only its own experts, in
# parts that cross from one layer's experts to the next: bit-identical to the synthetic model.
add_test(NAME ckpt_moe_ep_save_reload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_ep_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor_moe.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_moe_ep_roundtrip
         model.arch=qwen2_moe model.synthetic.shared_expert_mlp=56)
set_tests_properties(ckpt_moe_ep_save_reload PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
# The same with head_dim 6 and embd 100, which the 24 heads do not divide: the head_dim
# attribute and the (L, (heads + 2 kv_heads) * 6, C) and (L, C, heads * 6) datasets round-trip
# across meshes, and the reload accepts embd % heads != 0 beside head_dim.
add_test(NAME ckpt_llama_save_reload_head_dim
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_llama_roundtrip.sh
         ${TRIPAR_FIXTURES}/factor_llama.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_llama_head_dim
         model.synthetic.head_dim=6 model.synthetic.embd=100)
set_tests_properties(ckpt_llama_save_reload_head_dim PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
# Integrity (docs/checkpoint.md): a flipped bit in a saved, an import-hf and an import-gguf
# checkpoint exits 2 naming tensor and file on 4 ranks, each run within 120 s (only a hang
# fails that); model.verify_checksums=false loads it; the layout without checksums warns once.
foreach(kind save hf gguf)
  set(name ckpt_integrity_${kind})
  add_test(NAME ${name} COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_integrity.py
           $<TARGET_FILE:tripar> ${CMAKE_CURRENT_BINARY_DIR}/ckpt_integrity ${kind})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;checkpoint" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 600)
endforeach()
# the GGUF file is written by gguf-py, downloaded into a venv like the other GGUF tests
set_property(TEST ckpt_integrity_gguf APPEND PROPERTY LABELS real)
# A data/prompts file as input.text_file of a checkpoint with a tokenizer (label mpi).
add_test(NAME ckpt_prompt_file COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/prompt_file.sh
         ${CMAKE_CURRENT_BINARY_DIR}/ckpt_prompt_file ${TRIPAR_DATA}/prompts/qa-128.txt)
set_tests_properties(ckpt_prompt_file PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)

# Hugging Face tokenizer.json: tests/io/make_tokenizer_json.py writes byte-level BPE files
# (Llama 3 and GPT-2 layouts, merges as strings and as pairs, vocab.json + merges.txt twins, and
# one file per unsupported feature); test_tokenizer_json checks ids derived by hand from them.
set(TOKJSON_FIXTURES ${CMAKE_CURRENT_BINARY_DIR}/tok_json_fixtures)
add_test(NAME tok_json_make_fixtures
         COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/make_tokenizer_json.py
                 ${TOKJSON_FIXTURES})
set_tests_properties(tok_json_make_fixtures PROPERTIES FIXTURES_SETUP tok_json
                     LABELS "unit;checkpoint" TIMEOUT 60)
tripar_unit_test(test_tokenizer_json SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/io/test_tokenizer_json.c
                 LABELS checkpoint)
target_link_libraries(test_tokenizer_json PRIVATE tripar_cli) # imports through `tripar import-hf`
set_property(TEST test_tokenizer_json APPEND PROPERTY ENVIRONMENT
             TOKJSON_FIXTURES=${TOKJSON_FIXTURES} CKPT_FIXTURES=${CKPT_FIXTURES})
set_tests_properties(test_tokenizer_json PROPERTIES FIXTURES_REQUIRED "tok_json;ckpt_hf")
# ... and through the CLI: import-hf keeps tokenizer.json, `run` encodes and decodes with it,
# model.tokenizer gives one to a synthetic model, and the refusals exit 2 (label mpi).
add_test(NAME tok_json_e2e COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/tokenizer_json_e2e.sh
         ${CMAKE_CURRENT_BINARY_DIR}/tok_json_e2e ${TOKJSON_FIXTURES})
set_tests_properties(tok_json_e2e PROPERTIES LABELS "mpi;checkpoint" FIXTURES_REQUIRED tok_json
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)

# The Llama family in import-hf: tests/io/make_hf_llama.py writes LlamaForCausalLM (F32, an
# index and 2 shards, untied, GQA, llama3 rope_scaling), MistralForCausalLM (BF16, one file,
# tied, one kv head), Qwen2ForCausalLM (F16, q/k/v biases), MixtralForCausalLM and
# Qwen2MoeForCausalLM (mixtures of experts, a shared expert) directories, and the reference
# logits and greedy tokens of an independent float64 numpy Llama that reads their safetensors.
set(LLAMA_HF_FIXTURES ${CMAKE_CURRENT_BINARY_DIR}/llama_hf_fixtures)
add_test(NAME llama_hf_make_fixtures
         COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/make_hf_llama.py --all ${LLAMA_HF_FIXTURES})
set_tests_properties(llama_hf_make_fixtures PROPERTIES FIXTURES_SETUP llama_hf
                     LABELS "unit;checkpoint" TIMEOUT 120)
# Import, then run on one rank and on meshes that split kv heads (tp=2), replicate them (tp=4
# over 2 kv heads, tp=2 over 1) and add a pipeline (tp=2 x pp=2): logits within 1e-4 of the
# reference and the same greedy tokens (tests/io/checkpoint_e2e.sh, as for GPT-2).
foreach(run "llama-f32-sharded;1;1;1" "llama-f32-sharded;4;2;2" "mistral-bf16-tied;1;1;1"
            "mistral-bf16-tied;2;2;1" "qwen2-bias;1;1;1" "qwen2-bias;4;4;1"
            "nemo-head-dim;1;1;1" "nemo-head-dim;2;2;1" "nemo-head-dim;4;2;2"
            "mixtral-f32-sharded;1;1;1" "mixtral-f32-sharded;4;2;2" "mixtral-f32-sharded;2;1;2"
            "qwen2-moe-bf16;1;1;1" "qwen2-moe-bf16;2;2;1" "qwen2-moe-bf16;4;4;1"
            "qwen2-moe-norm;1;1;1" "qwen2-moe-norm;2;1;2")
  list(GET run 0 variant)
  list(GET run 1 np)
  list(GET run 2 tp)
  list(GET run 3 pp)
  set(name llama_hf_e2e_${variant}_np${np}_tp${tp})
  add_test(NAME ${name} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/io/checkpoint_e2e.sh
           ${LLAMA_HF_FIXTURES}/${variant} ${CMAKE_CURRENT_BINARY_DIR}/llama_hf_e2e ${np} ${tp} ${pp})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;checkpoint" FIXTURES_REQUIRED llama_hf
                       ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
endforeach()
add_test(NAME llama_hf_import_summary
         COMMAND ${CKPT_EXPECT} 0 "kv_heads 2, rope_theta 1e\\+06, untied head, q/k/v biases yes" --
                 $<TARGET_FILE:tripar> import-hf ${LLAMA_HF_FIXTURES}/qwen2-bias
                 --out ${LLAMA_HF_FIXTURES}/cli_qwen2.h5)
# What tripar does not run is refused with exit 2, naming the key and its value.
set(LLAMA_HF_REFUSALS
    "gelu|hidden_act = \"gelu\" is not supported"
    "sliding|sliding_window = 64 is not supported"
    "qwen2-sliding|use_sliding_window = true is not supported"
    "yarn|rope_scaling.rope_type = \"yarn\" is not supported"
    "moe|num_local_experts = 8: mixture-of-experts"
    "head-dim|head_dim = 7 is odd"
    "llama-bias|attention_bias = true for LlamaForCausalLM"
    "missing-k|tensor 'model\\.layers\\.1\\.self_attn\\.k_proj\\.bias' is missing"
    "qwen2-moe-sparse-step|decoder_sparse_step = 2 is not supported"
    "qwen2-moe-mlp-only|mlp_only_layers = \\[1\\] is not supported"
    "mixtral-top-k|num_experts_per_tok = 5 is more than the 4 experts")
set(llama_hf_tests llama_hf_import_summary)
foreach(refusal ${LLAMA_HF_REFUSALS})
  ckpt_case_split("${refusal}" case regex)
  add_test(NAME llama_hf_refuse_${case}
           COMMAND ${CKPT_EXPECT} 2 "${regex}" -- $<TARGET_FILE:tripar> import-hf
                   ${LLAMA_HF_FIXTURES}/refuse-${case} --out ${LLAMA_HF_FIXTURES}/never-${case}.h5)
  list(APPEND llama_hf_tests llama_hf_refuse_${case})
endforeach()
set_tests_properties(${llama_hf_tests} PROPERTIES LABELS "unit;checkpoint"
                     FIXTURES_REQUIRED llama_hf TIMEOUT 60)
# Memory: a 170 MB import peaks within a few largest tensors of a tiny one (import_memory.py).
# Not under ASan, whose quarantine keeps freed buffers resident by design.
if(NOT TRIPAR_SANITIZE)
  add_test(NAME llama_hf_import_memory
           COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io/import_memory.py
                   $<TARGET_FILE:tripar> ${CMAKE_CURRENT_BINARY_DIR}/llama_hf_memory)
  set_tests_properties(llama_hf_import_memory PROPERTIES LABELS "unit;checkpoint" TIMEOUT 120)
endif()
include(${CMAKE_CURRENT_SOURCE_DIR}/io/gguf.cmake)

# input.chat: one user turn through the real templates of each family, against Jinja
# (python3-jinja2); other templates refused.
add_executable(chat_render ${CMAKE_CURRENT_SOURCE_DIR}/io/chat_render.c)
target_link_libraries(chat_render PRIVATE tripar_core)
add_test(NAME chat_template_jinja
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/chat_template_check.py
                 $<TARGET_FILE:chat_render> ${CMAKE_SOURCE_DIR}/tests/data/chat
                 ${CMAKE_CURRENT_BINARY_DIR}/chat_template)
set_tests_properties(chat_template_jinja PROPERTIES LABELS "unit;checkpoint" SKIP_RETURN_CODE 77)
# What the /tokenizer attributes (as import-gguf writes them) ask of a run: bos by
# add_bos_token, input.chat through the template, generate.eos_id ending a sequence at once,
# and the refusals (label mpi).
add_test(NAME text_meta_e2e COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/io/text_meta_e2e.py
         ${CMAKE_CURRENT_BINARY_DIR}/text_meta_e2e ${TOKJSON_FIXTURES})
set_tests_properties(text_meta_e2e PROPERTIES LABELS "mpi;checkpoint" FIXTURES_REQUIRED tok_json
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
