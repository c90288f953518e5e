# End to end with real checkpoints: Hugging Face import against an independent numpy GPT-2,
# on one rank and on a tp=2 x pp=2 mesh, and the save/reload round trip (label mpi).
foreach(variant f32 f16 bf16 f32-mlp)
  foreach(mesh "1;1;1" "4;2;2")
    list(GET mesh 0 np)
    list(GET mesh 1 tp)
    list(GET mesh 2 pp)
    set(name ckpt_e2e_${variant}_np${np})
    add_test(NAME ${name} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_e2e.sh
             ${CMAKE_CURRENT_BINARY_DIR}/ckpt_fixtures/${variant} ${CMAKE_CURRENT_BINARY_DIR}/ckpt_e2e
             ${np} ${tp} ${pp})
    set_tests_properties(${name} PROPERTIES LABELS "mpi;checkpoint" FIXTURES_REQUIRED ckpt_hf
                         ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
  endforeach()
endforeach()
add_test(NAME ckpt_save_reload_bit_identical COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_roundtrip.sh
         ${CMAKE_CURRENT_SOURCE_DIR}/parallel/factor.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_roundtrip)
set_tests_properties(ckpt_save_reload_bit_identical PROPERTIES LABELS "mpi;checkpoint"
                     ENVIRONMENT "${TRIPAR_TEST_ENV};MPIEXEC=${MPIEXEC_EXECUTABLE}" TIMEOUT 300)
