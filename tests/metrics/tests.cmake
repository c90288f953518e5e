# Metrics area: the analytic per-phase costs behind the rooflines (src/metrics/phase_cost.c),
# against hand counts a reader can redo.
tripar_unit_test(metrics_phase_cost SOURCES metrics/test_phase_cost.c LABELS metrics)
# The ceilings' probes, the device path (backend table only) run on the CPU backend.
tripar_unit_test(metrics_roofline_probes SOURCES metrics/test_roofline_probes.c LABELS metrics)
# The mixture-of-experts MLP's costs: experts read under uniform routing, router, shared expert.
tripar_unit_test(metrics_phase_cost_moe SOURCES metrics/test_phase_cost_moe.c LABELS metrics)
