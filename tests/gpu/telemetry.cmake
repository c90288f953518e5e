# The telemetry sampler's NVML loader (dlopen, never linked), on every build: it needs no CUDA
# toolkit, only the driver's libnvidia-ml.so.1, and skips (77) where that is absent.
add_executable(test_nvml_probe ${GPU}/test_nvml_probe.c)
target_link_libraries(test_nvml_probe PRIVATE tripar_core)
add_test(NAME gpu_nvml_probe COMMAND test_nvml_probe)
set_tests_properties(gpu_nvml_probe PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
                     ENVIRONMENT "${GPU_ENV}" TIMEOUT 60)
