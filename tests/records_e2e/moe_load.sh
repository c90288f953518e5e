#!/bin/sh
# moe_load.sh CHECKER WORKDIR: a mixture of experts' expert load end to end (issue 31, item 5):
# data/fixtures/factor_moe.yaml (8 layers, 6 experts, top-2, 8 prompts of 6 tokens, 6 new
# tokens) on one rank and on two (tp=2 with ep=2, dp=2, dp=2 with ep=2 across the replicas,
# pp=2), after a warm-up. CHECKER
# (check_moe_load.c) reads /moe/expert_load of each: its shape, each step's rows x top_k, the
# same counts on every mesh. Then `tripar report` prints the expert-load section (and its JSON)
# and `tripar explain` the expert-load verdict; a dense run has neither. Uses $TRIPAR_BIN,
# $MPIEXEC and $TRIPAR_SOURCE_DIR.
set -eu
checker=$1
work=$2
fixtures=$TRIPAR_SOURCE_DIR/data/fixtures
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { # run JOB NP OUT ARGS...
    job=$1 np=$2 out=$3
    shift 3
    "$MPIEXEC" -n "$np" --oversubscribe --bind-to none "$TRIPAR_BIN" run "$fixtures/$job" \
        --out "$out" --set bench.warmup=1 --set bench.iterations=2 --set 'record.activations=[]' \
        "$@" >>log 2>&1 || { cat log; fail "tripar run $job $*"; }
}
run factor_moe.yaml 1 one.h5
run factor_moe.yaml 2 tp2ep2.h5 --set parallel.tp=2 --set parallel.ep=2
run factor_moe.yaml 2 dp2.h5 --set parallel.dp=2
run factor_moe.yaml 2 dp2ep2.h5 --set parallel.dp=2 --set parallel.ep=2
run factor_moe.yaml 2 pp2.h5 --set parallel.pp=2 --set parallel.microbatches=2
run factor_llama.yaml 1 dense.h5
"$checker" 8 6 6 one.h5 tp2ep2.h5 dp2.h5 dp2ep2.h5 pp2.h5 --dense dense.h5 || fail "check_moe_load"

# expert parallelism across replicas records its phases: per rank, MoE layer and micro-batch
# of every step, one ep_dispatch, ep_expert and ep_combine and two ep_wait (docs/schema.md);
# ep 2 inside the TP group records none
/usr/bin/python3 - <<'PY' || fail "ep phases"
import h5py
for name, want in (("dp2ep2.h5", 1), ("tp2ep2.h5", 0)):
    with h5py.File(name, "r") as f:
        for rank in ("rank_00000", "rank_00001"):
            ev = f["timings"][rank]["events"][()]
            names = {v: k for k, v in h5py.check_enum_dtype(ev.dtype["phase"]).items()}
            counted = [names[p] for p in ev["phase"]]
            steps = len({(s, i) for s, i, p in zip(ev["step"], ev["iteration"], counted)
                         if p == "step"})  # one micro-batch: a step event per step
            for p, per in (("ep_dispatch", 1), ("ep_expert", 1), ("ep_combine", 1), ("ep_wait", 2)):
                n = counted.count(p)
                assert steps >= 6 and n == want * per * 8 * steps, (name, rank, p, n, steps)
PY

# report: the section, one row per layer and the overall one; the ep-block columns with ep 2
"$TRIPAR_BIN" report one.h5 tp2ep2.h5 --json report.json --csv report.csv >report.txt
cat report.txt
[ "$(grep -c '^  expert load (/moe: iteration 1, 6 steps, 1 dp replica, 6 experts, top-2, ep 1)' \
    report.txt)" = 1 ] || fail "report: no expert-load section for one.h5"
grep -q '^  expert load (/moe: iteration 1, 6 steps, 1 dp replica, 6 experts, top-2, ep 2)' \
    report.txt || fail "report: no expert-load section for tp2ep2.h5"
[ "$(grep -cE '^    [0-7] +[0-9.]+ \([0-9.]+\) +[0-9.]+ \([0-9.]+\) +e[0-5] ' report.txt)" = 16 ] ||
    fail "report: not 8 layer rows per run"
[ "$(grep -c '^    layer .*hottest decode  *ep-block pre  *ep-block dec$' report.txt)" = 1 ] ||
    fail "report: not one table with ep-block columns (tp2ep2.h5's)"
/usr/bin/python3 - <<'PY' || fail "report JSON/CSV"
import csv, json
runs = json.load(open("report.json"))["runs"]
for r in runs:
    e = r["expert_load"]
    assert e["experts"] == 6 and e["top_k"] == 2 and e["iteration"] == 1, e
    for p in ("prefill", "decode"):
        assert len(e[p]["layers"]) == 8 and e[p]["imbalance_mean"] >= 1, e[p]
        assert 0 <= e[p]["hottest_layer"] < 8 and 0 <= e[p]["hottest_expert"] < 6, e[p]
    # prefill: 8 prompts x 6 tokens x top-2 per layer
    assert e["prefill"]["routed_rows"] == 8 * 8 * 6 * 2, e["prefill"]["routed_rows"]
    assert e["decode"]["routed_rows"] == 8 * 8 * 5 * 2, e["decode"]["routed_rows"]
assert [r["expert_load"]["ep"] for r in runs] == [1, 2], runs
rows = list(csv.DictReader(open("report.csv")))
assert all(float(r["moe_prefill_imbalance"]) >= 1 for r in rows), rows
PY
"$TRIPAR_BIN" report dense.h5 --json dense.json --csv dense.csv >dense.txt
grep -q "expert load" dense.txt && fail "report: an expert-load section for a dense run"
grep -q "expert_load\|moe_" dense.json dense.csv && fail "report: expert-load fields for a dense run"

# explain: the verdict of each MoE run, after the comparison's verdict; none for dense runs
"$TRIPAR_BIN" explain one.h5 tp2ep2.h5 >explain.txt || { cat explain.txt; fail "explain"; }
"$TRIPAR_BIN" explain one.h5 tp2ep2.h5 --format json >explain.json || fail "explain json"
cat explain.txt
grep -qE '^expert load: BASE (un)?balanced: max/mean tokens per expert [0-9.]+ in prefill, [0-9.]+ in decode' \
    explain.txt || fail "explain: no expert-load verdict for BASE"
grep -qE '^             OTHER (un)?balanced: ' explain.txt || fail "explain: none for OTHER"
grep -q '^             OTHER unbalanced: .*With ep 2 the busiest EP block' explain.txt ||
    grep -q '^             OTHER balanced: ' explain.txt || fail "explain: no ep cost for OTHER"
SCHEMA=$TRIPAR_SOURCE_DIR/docs/explain.schema.json /usr/bin/python3 -c "import json, os, jsonschema; \
d = json.load(open('explain.json')); \
jsonschema.validate(d, json.load(open(os.environ['SCHEMA']))); \
assert 'balanced: max/mean' in d['base']['expert_load'], d['base']; \
assert 'With ep 2' in d['others'][0]['run']['expert_load'] or \
    d['others'][0]['run']['expert_load'].startswith('balanced')" || fail "explain JSON"
"$TRIPAR_BIN" explain dense.h5 dense.h5 >explain_dense.txt || fail "explain dense"
grep -q "expert load" explain_dense.txt && fail "explain: an expert-load verdict for dense runs"
echo "moe_load: ok"
