# The emulated multi-node cluster (label cluster; docs/cluster.md): nodes are network + UTS
# namespaces on this machine, Open MPI runs across them over TCP. Each cluster is a CTest
# fixture, brought up once for its tests and always torn down, even when one of them fails.
# The tests need root; without it (or without namespaces) `up` and every test skip (77).
set(CLUSTER_DIR ${TRIPAR_AREA_DIR})
set(CLUSTER_ENV ${TRIPAR_TEST_ENV})

# The delay line that adds latency to the links (the kernel has no netem). Without
# libnetfilter-queue it is not built, and the tests that shape latency skip.
pkg_check_modules(NETFILTER_QUEUE IMPORTED_TARGET libnetfilter_queue)
if(NETFILTER_QUEUE_FOUND)
  add_executable(cluster_delayline ${CLUSTER_DIR}/delayline.c)
  target_link_libraries(cluster_delayline PRIVATE tripar_warnings PkgConfig::NETFILTER_QUEUE)
  list(APPEND CLUSTER_ENV TRIPAR_DELAYLINE=$<TARGET_FILE:cluster_delayline>)
else()
  message(STATUS "libnetfilter-queue not found: the cluster tests that add link latency will skip")
  list(APPEND CLUSTER_ENV TRIPAR_DELAYLINE=/nonexistent/cluster_delayline)
endif()
add_executable(cluster_pingpong ${CLUSTER_DIR}/pingpong.c)
target_link_libraries(cluster_pingpong PRIVATE tripar_warnings MPI::MPI_C)

# cluster_fixture(NAME NODES): tests cluster_NAME_up / cluster_NAME_down around fixture NAME,
# with its state in CLUSTER_STATE_<NAME>.
function(cluster_fixture name nodes)
  set(state ${CMAKE_CURRENT_BINARY_DIR}/cluster-${name})
  set(CLUSTER_STATE_${name} ${state} PARENT_SCOPE)
  add_test(NAME cluster_${name}_up COMMAND ${CLUSTER_DIR}/up.sh ${state} ${nodes})
  add_test(NAME cluster_${name}_down COMMAND ${CLUSTER_DIR}/cluster.sh down ${state})
  set_tests_properties(cluster_${name}_up PROPERTIES FIXTURES_SETUP cluster_${name})
  set_tests_properties(cluster_${name}_down PROPERTIES FIXTURES_CLEANUP cluster_${name})
  set_tests_properties(cluster_${name}_up cluster_${name}_down PROPERTIES LABELS cluster
    ENVIRONMENT "${CLUSTER_ENV}" TIMEOUT 120 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endfunction()

# cluster_test(NAME FIXTURE COMMAND...): a test on a running cluster.
function(cluster_test name fixture)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS cluster FIXTURES_REQUIRED cluster_${fixture}
    ENVIRONMENT "${CLUSTER_ENV}" TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endfunction()

cluster_fixture(2x2 2)
cluster_fixture(4x2 4)
set(C2 ${CLUSTER_STATE_2x2})
set(C4 ${CLUSTER_STATE_4x2})

# Open MPI across nodes: hosts per rank, TCP across (btl self,vader alone fails), latency added.
cluster_test(cluster_mpi_tcp 2x2 ${CLUSTER_DIR}/check_mpi.sh ${C2} $<TARGET_FILE:cluster_pingpong>)
cluster_test(cluster_mpi_tcp_4 4x2 ${CLUSTER_DIR}/check_mpi.sh ${C4} $<TARGET_FILE:cluster_pingpong>)
cluster_test(cluster_link_delay 2x2
  ${CLUSTER_DIR}/check_delay.sh ${C2} $<TARGET_FILE:cluster_pingpong> 1000)

# Every strategy computes the same function across emulated nodes: each dp x tp x pp of 4 ranks
# on 2 nodes of 2, and of every world from 2 to 8 ranks on up to 4 nodes of 2 (placed by slot:
# odd worlds leave the last node half full), against one rank; /mesh names each rank's node.
set(CLUSTER_JOB ${TRIPAR_FIXTURES}/factor.yaml)
cluster_test(cluster_factorizations_2x2 2x2 ${CLUSTER_DIR}/check_factorizations.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_factor_2x2 ${CLUSTER_JOB})
cluster_test(cluster_factorizations_4x2 4x2 ${CLUSTER_DIR}/check_factorizations.sh ${C4}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_factor_4x2 ${CLUSTER_JOB} --sizes "2 3 4 6 8")
# 5 and 7 ranks need heads that 5 and 7 divide (tp = 5, 7) and a vocabulary neither divides.
cluster_test(cluster_factorizations_5_7_4x2 4x2 ${CLUSTER_DIR}/check_factorizations.sh ${C4}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_factor_5_7 ${CLUSTER_JOB} --sizes "5 7"
  -- model.synthetic.heads=35 model.synthetic.embd=140 model.synthetic.vocab=211)
# Llama (grouped kv heads), and GPT-2 with micro-batches and chunked overlap, over TCP.
cluster_test(cluster_factorizations_llama_2x2 2x2 ${CLUSTER_DIR}/check_factorizations.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_llama_2x2 ${TRIPAR_FIXTURES}/factor_llama.yaml)
cluster_test(cluster_factorizations_overlap_2x2 2x2 ${CLUSTER_DIR}/check_factorizations.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_overlap_2x2 ${CLUSTER_JOB}
  -- parallel.microbatches=2 parallel.overlap=true parallel.chunks=3)
# A mixture of experts over TCP: Qwen2-MoE (8 routed experts, top 3, and a shared one) on each
# dp x tp x pp of 4 ranks, and with each expert block count ep that divides tp and the 8 experts
# (tp 4 spans both nodes, so its expert blocks sit one per node at ep 2).
cluster_test(cluster_factorizations_moe_2x2 2x2 ${CLUSTER_DIR}/check_factorizations.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_moe_2x2 ${TRIPAR_FIXTURES}/factor_moe.yaml --experts 8
  -- model.arch=qwen2_moe model.synthetic.experts=8 model.synthetic.experts_top_k=3
  model.synthetic.shared_expert_mlp=56 model.synthetic.norm_topk_prob=false)

# A node that dies mid-run ends the run within 10 s and leaves its partial file (complete = 0):
# its tripar ranks killed, then the whole node (its Open MPI daemon too).
cluster_test(cluster_node_kill_ranks 2x2 ${CLUSTER_DIR}/check_node_kill.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_kill_ranks ${CLUSTER_JOB})
cluster_test(cluster_node_kill_whole 2x2 ${CLUSTER_DIR}/check_node_kill.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_kill_whole ${CLUSTER_JOB} --whole-node)
# The faults nothing reports, ended by the stall watchdog (record.stall_seconds 5): node2's
# ranks frozen (SIGSTOP), node2's link down on the switch side.
cluster_test(cluster_node_stop 2x2 ${CLUSTER_DIR}/check_node_kill.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_stop ${CLUSTER_JOB} --stop)
cluster_test(cluster_link_down 2x2 ${CLUSTER_DIR}/check_node_kill.sh ${C2}
  ${CMAKE_CURRENT_BINARY_DIR}/cluster_link_down ${CLUSTER_JOB} --link-down)

# The node-aware mesh: /mesh hosts, nodes and coordinates for tp-pp-dp, pp-tp-dp and auto (by
# slot and --map-by node), the TP-spans-nodes and uneven-nodes warnings exactly when due, and
# auto's refusal of a tp larger than a node (exit 2 once, sweeps included).
cluster_test(cluster_mesh_nodes 2x2 ${CLUSTER_DIR}/mesh_nodes.sh ${C2} ${TRIPAR_FIXTURES}/factor.yaml)
# commbench across nodes: per-axis node placement, --tiers' inter-node latency on a 1 ms link
# within 30% of the delay plus the measured floor, --order auto's refusal.
cluster_test(cluster_commbench_tiers 2x2 ${CLUSTER_DIR}/commbench_tiers.sh ${C2}
  $<TARGET_FILE:tripar> 1000)
include(${CLUSTER_DIR}/slurm_tests.cmake)
