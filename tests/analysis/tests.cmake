# Analysis area: the planner's cost model (src/analysis/plan_cost.c) on hand-computed cases. The
# test keeps the name it had under tests/metrics/ (docs and CI scripts name it); `tripar plan`
# end to end is tests/cli/plan.cmake.
tripar_unit_test(metrics_plan_cost SOURCES analysis/test_plan_cost.c LABELS metrics analysis)
# The GPU efficiency models (src/analysis/plan_gpu.c): tile and wave quantization, attention,
# launches and a calibration's precedence, on hand-computed cases.
tripar_unit_test(analysis_plan_gpu SOURCES analysis/test_plan_gpu.c LABELS analysis)
# The goodput model (src/analysis/plan_goodput.c): tripar's serve loop simulated on arrivals
# worked by hand, its bound, light load (goodput = rate), overload (within capacity), and the
# per-generation costs read from the cost model.
tripar_unit_test(analysis_plan_goodput SOURCES analysis/test_plan_goodput.c LABELS analysis)
# The expert-load imbalance (src/analysis/moe_load.c): max/mean tokens per expert per step, the ep
# blocks' ratio and the hottest expert, prefill and decode apart, on hand-computed loads.
tripar_unit_test(analysis_moe_load SOURCES analysis/test_moe_load.c LABELS analysis)
