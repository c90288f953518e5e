# tripar under a real multi-node Slurm (labels cluster and slurm; docs/cluster.md, "Slurm across the emulated nodes"): a 2-node
# emulated cluster of its own (fixture cluster_slurm2), a Slurm on it (fixture slurm_nodes:
# slurm.sh up/down), then one test per case of slurm_tests.sh. The node-kill case runs last, and
# brings node2's slurmd back when it ends. Included by tests/cluster/tests.cmake after its
# cluster_fixture() and CLUSTER_ENV.
cluster_fixture(slurm2 2)
set(SLURM_NODES_STATE ${CLUSTER_STATE_slurm2})
set(SLURM_NODES_WORK ${CMAKE_CURRENT_BINARY_DIR}/slurm-nodes)
# Open MPI and hwloc leak at exit; a sanitized tripar would fail every run (jobs inherit it).
set(SLURM_NODES_ENV ${CLUSTER_ENV} ASAN_OPTIONS=detect_leaks=0)

add_test(NAME slurm_nodes_up COMMAND ${CLUSTER_DIR}/slurm.sh up ${SLURM_NODES_STATE})
add_test(NAME slurm_nodes_down COMMAND ${CLUSTER_DIR}/slurm.sh down ${SLURM_NODES_STATE})
set_tests_properties(slurm_nodes_up PROPERTIES FIXTURES_SETUP slurm_nodes)
set_tests_properties(slurm_nodes_down PROPERTIES FIXTURES_CLEANUP slurm_nodes)
set_tests_properties(slurm_nodes_up slurm_nodes_down PROPERTIES LABELS "cluster;slurm"
  FIXTURES_REQUIRED cluster_slurm2 ENVIRONMENT "${SLURM_NODES_ENV}" TIMEOUT 120 RUN_SERIAL TRUE
  SKIP_RETURN_CODE 77)

set(SLURM_NODES_CASES srun sbatch mpirun sweep)
foreach(c ${SLURM_NODES_CASES} nodekill)
  add_test(NAME slurm_nodes_${c}
           COMMAND ${CLUSTER_DIR}/slurm_tests.sh ${c} ${SLURM_NODES_STATE} ${SLURM_NODES_WORK})
  set_tests_properties(slurm_nodes_${c} PROPERTIES LABELS "cluster;slurm"
    FIXTURES_REQUIRED "cluster_slurm2;slurm_nodes" ENVIRONMENT "${SLURM_NODES_ENV}" TIMEOUT 300
    RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endforeach()
list(TRANSFORM SLURM_NODES_CASES PREPEND slurm_nodes_)
set_tests_properties(slurm_nodes_nodekill PROPERTIES DEPENDS "${SLURM_NODES_CASES}")
