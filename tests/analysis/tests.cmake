# Analysis area: the planner's cost model (src/analysis/plan_cost.c) on hand-computed cases. The
# test keeps the name it had under tests/metrics/ (docs and CI scripts name it); `tripar plan`
# end to end is tests/cli/plan.cmake.
tripar_unit_test(metrics_plan_cost SOURCES analysis/test_plan_cost.c LABELS metrics analysis)
# The GPU efficiency models (src/analysis/plan_gpu.c): tile and wave quantization, attention,
# launches and a calibration's precedence, on hand-computed cases.
tripar_unit_test(analysis_plan_gpu SOURCES analysis/test_plan_gpu.c LABELS analysis)
