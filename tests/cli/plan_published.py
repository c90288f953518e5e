#!/usr/bin/python3
"""`tripar plan --validate-published` (docs/planner.md "Validation against published results").

plan_published.py TRIPAR REPO WORKDIR:
1. every file of REPO/data/published/ has the documented format: a source with its document and
   version, the left-out rows listed, and rows whose every field is given and allowed;
2. every row is predicted: the output has one line per (file, id), with a positive predicted
   value beside the published one, the held-out mark on exactly the rows with id % 3 == 0, and
   the summary over all rows, the held-out third and each file. No time or error bound is
   checked: the errors are what the docs report, not what this test enforces;
3. bad published files exit 2 naming file:line and the allowed values;
4. a tokens_per_s_per_gpu row is predicted as the batch's tokens_per_s over its GPUs.
"""
import os
import re
import subprocess
import sys

import yaml

tripar, repo, work = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
published = os.path.join(repo, "data", "published")
FIELDS = ["id", "model", "cluster", "gpus", "tp", "pp", "batch", "input", "output",
          "precision", "metric", "value", "table"]
METRICS = {"ttft_ms", "tpot_ms", "e2e_ms", "tokens_per_s", "tokens_per_s_per_gpu"}
PRECISIONS = {"fp32", "int8w", "bf16", "fp16"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# 1. the format
files = sorted(f for f in os.listdir(published) if f.endswith(".yaml"))
check(len(files) >= 3, f"data/published/ holds {len(files)} files")
expected = {}
for name in files:
    doc = yaml.safe_load(open(os.path.join(published, name)))
    check(set(doc) <= {"source", "left_out", "rows"}, f"{name}: keys {sorted(doc)}")
    src = doc.get("source", {})
    check(src.get("document") and src.get("version"), f"{name}: source.document and version")
    check(isinstance(doc.get("left_out"), list), f"{name}: left_out lists the rows left out")
    ids = set()
    for row in doc["rows"]:
        missing = [k for k in FIELDS if k not in row]
        check(not missing, f"{name} id {row.get('id')}: missing {missing}")
        check(row["metric"] in METRICS, f"{name} id {row['id']}: metric {row['metric']}")
        check(row["precision"] in PRECISIONS, f"{name} id {row['id']}: precision")
        check(row["value"] > 0 and row["gpus"] % (row["tp"] * row["pp"]) == 0,
              f"{name} id {row['id']}: value or gpus")
        check(os.path.isfile(os.path.join(published, row["cluster"])),
              f"{name} id {row['id']}: cluster {row['cluster']}")
        check(row["id"] not in ids, f"{name}: id {row['id']} twice")
        ids.add(row["id"])
        expected[(name, row["id"])] = row["value"]
check(len(expected) >= 25, f"{len(expected)} rows")

# 2. every row predicted
run = subprocess.run([tripar, "plan", "--validate-published", published + "/"],
                     capture_output=True, text=True)
check(run.returncode == 0, f"exit {run.returncode}: {run.stderr}")
seen = {}
line_re = re.compile(r"^(\S+\.yaml)\s+(\d+)([* ])\s.*\s(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([+-]\d+)%")
for line in run.stdout.splitlines():
    m = line_re.match(line)
    if not m:
        continue
    name, rid, mark, predicted, value = m[1], int(m[2]), m[3], float(m[5]), float(m[6])
    seen[(name, rid)] = True
    check(predicted > 0, f"{name} id {rid}: predicted {predicted}")
    check(abs(value - expected.get((name, rid), -1)) < 0.05 + 1e-3 * value,
          f"{name} id {rid}: published {value} printed, file says {expected.get((name, rid))}")
    check((mark == "*") == (rid % 3 == 0), f"{name} id {rid}: held-out mark '{mark}'")
check(set(seen) == set(expected),
      f"rows not predicted: {sorted(set(expected) - set(seen))[:5]}")
for label in ["all rows", "held-out third (id % 3 == 0)", "other two thirds"] + files:
    check(re.search(rf"^  {re.escape(label)}\s+\d+ rows\s+median\s+\d+%\s+worst\s+\d+%",
                    run.stdout, re.M), f"summary line '{label}'")

# 3. refusals: each case one file in its own folder
cluster = os.path.join(repo, "data", "clusters", "a100-cluster.yaml")
GOOD = (f"{{id: 1, model: llama2-7b, cluster: {cluster}, gpus: 1, tp: 1, pp: 1, batch: 1, "
        "input: 128, output: 1, precision: fp16, metric: ttft_ms, value: 16, table: t}")
HEAD = "source:\n  document: d\n  version: v\nleft_out: []\nrows:\n"
cases = {
    "metric": (GOOD.replace("ttft_ms", "latency_s"),
               r"x\.yaml:6: metric: 'latency_s' is not allowed; allowed: ttft_ms, tpot_ms, e2e_ms, "
               r"tokens_per_s, tokens_per_s_per_gpu$"),
    "precision": (GOOD.replace("fp16", "fp8"),
                  r"x\.yaml:6: precision: 'fp8' is not allowed; allowed: fp32, int8w, bf16, fp16$"),
    "unknown_key": (GOOD.replace("table: t", "table: t, speculative: true"),
                    r"x\.yaml:6: unknown key 'speculative' in a row; allowed: id, model, .*, note$"),
    "missing": (GOOD.replace("batch: 1, ", ""), r"x\.yaml:6: a row misses 'batch'"),
    "gpus": (GOOD.replace("gpus: 1, tp: 1", "gpus: 3, tp: 2"),
             r"x\.yaml:6: gpus: 3 is not a multiple of tp x pp = 2"),
    "model": (GOOD.replace("llama2-7b", "llama9-1t"), r"x\.yaml:6: model: .*presets: gpt2-124m"),
    "value": (GOOD.replace("value: 16", "value: fast"),
              r"x\.yaml:6: value: 'fast' must be a positive number"),
    "duplicate": (GOOD + "\n  - " + GOOD, r"x\.yaml:7: id: 1 is taken by an earlier row"),
    "tp_heads": (GOOD.replace("gpus: 1, tp: 1", "gpus: 3, tp: 3"),
                 r"x\.yaml:6: tripar cannot run dp 1 x tp 3 x pp 1 here"),
}
for case, (row, regex) in cases.items():
    folder = os.path.join(work, case)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "x.yaml"), "w") as f:
        f.write(HEAD + "  - " + row + "\n")
    r = subprocess.run([tripar, "plan", "--validate-published", folder],
                       capture_output=True, text=True)
    err = r.stderr.strip()
    check(r.returncode == 2 and re.search(r"^tripar plan: .*" + regex, err, re.M),
          f"refusal {case}: exit {r.returncode}, stderr {err!r}")
# 4. tokens_per_s_per_gpu is the batch's tokens_per_s over the row's GPUs: the same tp=2 row
# under both metrics, published at the same value, is predicted 2x apart
folder = os.path.join(work, "per_gpu")
os.makedirs(folder, exist_ok=True)
TP2 = GOOD.replace("gpus: 1, tp: 1", "gpus: 2, tp: 2").replace("output: 1,", "output: 16,")
with open(os.path.join(folder, "x.yaml"), "w") as f:
    f.write(HEAD + "  - " + TP2.replace("ttft_ms", "tokens_per_s") + "\n  - " +
            TP2.replace("id: 1", "id: 2").replace("ttft_ms", "tokens_per_s_per_gpu") + "\n")
r = subprocess.run([tripar, "plan", "--validate-published", folder], capture_output=True, text=True)
pred = {int(m[2]): float(m[5]) for m in map(line_re.match, r.stdout.splitlines()) if m}
check(r.returncode == 0 and len(pred) == 2 and abs(pred[1] / pred[2] - 2) < 0.01,
      f"tokens_per_s_per_gpu: exit {r.returncode}, predicted {pred}, stderr {r.stderr!r}")

empty = os.path.join(work, "empty")
os.makedirs(empty, exist_ok=True)
r = subprocess.run([tripar, "plan", "--validate-published", empty], capture_output=True, text=True)
check(r.returncode == 2 and "holds no published file" in r.stderr, f"empty folder: {r.stderr!r}")
r = subprocess.run([tripar, "plan", "--validate-published", empty, "--cluster", cluster],
                   capture_output=True, text=True)
check(r.returncode == 2 and "give no job file" in r.stderr, f"--cluster with it: {r.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(expected)} published rows from {len(files)} files, {len(seen)} predicted, "
      f"{len(cases) + 2} refusals checked")
sys.exit(1 if failures else 0)
