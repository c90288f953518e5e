"""Shared helpers of the records end-to-end checks: reading a real run file with h5py and
predicting, from the job it records, how many timing events of each phase every rank emits.
The prediction follows the schedule of src/engine/schedule.c, src/engine/forward.c and
src/cli/run_measure.c; the formula is written out in docs/schema.md ("Event counts")."""
import sys

SKIP = 77  # CTest SKIP_RETURN_CODE when h5py (or PyYAML) is missing

try:
    import h5py
    import numpy as np
    import yaml
except ImportError as exc:  # pragma: no cover - depends on the machine
    print("SKIP: %s (needs /usr/bin/python3 with h5py, numpy and PyYAML)" % exc)
    sys.exit(SKIP)

PHASES = ["embed", "norm", "qkv_gemm", "attention", "attn_out_gemm", "mlp_gemm",
          "tp_allreduce", "tp_wait", "pp_send", "pp_recv_wait", "head", "sample",
          "dp_gather", "step", "weight_init", "iteration", "sample_wait", "nll_wait",
          "stop_wait", "ep_dispatch", "ep_expert", "ep_combine", "ep_wait"]
# Phases tagged with a step but no micro-batch (-1): they lie between step events.
BETWEEN_STEPS = {"stop_wait"}
NANO_ALIGN = 64  # metrics/phase_cost.h NANO_ALIGN: where a one-sequence prefill splits

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def expect(cond, msg):
    if not cond:
        fail(msg)
    return cond


def finish(name):
    if failures:
        print("%s: %d failure(s)" % (name, len(failures)))
        sys.exit(1)
    print("%s: ok" % name)
    sys.exit(0)


def split_begin(n, parts, i):
    return n * i // parts


def split_count(n, parts, i):
    return split_begin(n, parts, i + 1) - split_begin(n, parts, i)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


class Run:
    """A run file's job, mesh and per-rank events (phase as a name)."""

    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            self.attrs = {k: f.attrs[k] for k in f.attrs}
            self.job = yaml.safe_load(text(f.attrs["job"]))
            self.world = int(f.attrs["world_size"])
            self.mesh = f["mesh"][...] if "mesh" in f else None
            self.timings_attrs = dict(f["timings"].attrs) if "timings" in f else {}
            self.rank_groups = sorted(f["timings"].keys()) if "timings" in f else []
            self.events = []
            for r in range(self.world):
                p = "timings/rank_%05d/events" % r
                if p not in f:
                    self.events.append(None)
                    continue
                d = f[p]
                mapping = h5py.check_enum_dtype(d.dtype["phase"]) or {}
                names = {v: k for k, v in mapping.items()}
                ev = d[...]
                self.events.append({
                    "phase": np.array([names.get(int(x), "?") for x in ev["phase"]], dtype=object),
                    "step": ev["step"], "microbatch": ev["microbatch"], "layer": ev["layer"],
                    "iteration": ev["iteration"], "t_start": ev["t_start"],
                    "t_end": ev["t_end"]})
            # /sched: one table per rank (docs/schema.md), None when the group is absent
            self.sched_attrs = dict(f["sched"].attrs) if "sched" in f else None
            self.sched = [f["sched/rank_%05d" % r][...] if "sched/rank_%05d" % r in f else None
                          for r in range(self.world)] if "sched" in f else None
        j = self.job
        syn = j["model"]["synthetic"]
        self.layers = int(syn["layers"])
        inp = j["input"]
        if "synthetic" in inp:
            self.batch = int(inp["synthetic"]["batch"])
            self.prompt_len = int(inp["synthetic"]["length"])
        else:
            self.batch = len(inp["tokens"])
            self.prompt_len = len(inp["tokens"][0])
        par = j["parallel"]
        self.dp, self.tp, self.pp = int(par["dp"]), int(par["tp"]), int(par["pp"])
        self.microbatches = int(par["microbatches"])
        self.overlap = bool(par["overlap"])
        self.chunks = min(int(par["chunks"]), 64)
        self.new_tokens = int(j["generate"]["new_tokens"])
        self.warmup = int(j["bench"]["warmup"])
        self.iterations = int(j["bench"]["iterations"])
        self.pre_norm = j["model"]["norm"] == "pre"
        # PyYAML reads YAML 1.1, where a bare `off` is the boolean false
        level = j["record"]["timings"]
        self.level = "off" if level is False else str(level)
        self.sched_on = bool(j["record"].get("sched", True))

    def coords(self, r):
        row = self.mesh[r]
        return int(row["dp_rank"]), int(row["tp_rank"]), int(row["pp_rank"])

    def mb_sizes(self, r):
        dp_rank = self.coords(r)[0]
        local = split_count(self.batch, self.dp, dp_rank)
        n_micro = min(self.microbatches, local)
        return [split_count(local, n_micro, i) for i in range(n_micro)]

    def stage_layers(self, r):
        pp_rank = self.coords(r)[2]
        b = split_begin(self.layers, self.pp, pp_rank)
        return b, b + split_count(self.layers, self.pp, pp_rank)

    def pieces(self, rows):
        """Row pieces of a row-parallel product (forward.c row_parallel_start)."""
        p = self.chunks if (self.overlap and self.tp > 1) else 1
        return max(1, min(p, rows))

    def nano_rows(self, nb, n_new):
        """Rows of each nano-batch of a micro-batch (forward.c nano_split): two in a prefill
        with overlap and TP, by sequences or, for one sequence, by positions."""
        if not (self.overlap and self.tp > 1) or n_new == 1:
            return [nb * n_new]
        if nb >= 2:
            return [nb // 2 * n_new, (nb - nb // 2) * n_new]
        half = n_new // 2
        first = half // NANO_ALIGN * NANO_ALIGN or half
        return [first, n_new - first]


def predict_counts(run, r):
    """Per phase: (low, high) event counts of rank r over the whole run at level `layer`,
    and the same restricted to layer = -1 events (what level `step` keeps).
    Only tp_wait under overlap is a range (a piece whose all-reduce finished before the wait
    leaves no tp_wait event); everything else is exact."""
    _, tp_rank, pp_rank = run.coords(r)
    first, last = pp_rank == 0, pp_rank == run.pp - 1
    l0, l1 = run.stage_layers(r)
    n_layers = l1 - l0
    steps = max(run.new_tokens, 1)
    gens = run.warmup + run.iterations
    lo = dict.fromkeys(PHASES, 0)
    hi = dict.fromkeys(PHASES, 0)
    lo_step = dict.fromkeys(PHASES, 0)  # layer = -1 events only

    def add(phase, n, n_hi=None, layer_event=False):
        lo[phase] += n
        hi[phase] += n if n_hi is None else n_hi
        if not layer_event:
            lo_step[phase] += n

    for _ in range(gens):
        add("iteration", 1)
        if run.world > 1:
            add("stop_wait", steps)                     # each step's stop vote, waited after the next
        for s in range(steps):
            n_new = run.prompt_len if s == 0 else 1
            for nb in run.mb_sizes(r):
                add("step", 1)
                if first:
                    if s > 0 and run.pp > 1:
                        add("pp_recv_wait", 1)          # tokens from the last stage
                    if run.pp > 1 and s >= 2:
                        add("pp_send", 1)               # wait for the send of step s-2
                    add("embed", 1)
                    if run.tp > 1:
                        add("tp_allreduce", 1)          # vocab-parallel embedding
                        add("tp_wait", 1)
                else:
                    add("pp_recv_wait", 1)              # activations from the previous stage
                # engine_stage_forward, per nano-batch
                nanos = run.nano_rows(nb, n_new)
                for rows in nanos:
                    if run.pre_norm and n_layers > 0:
                        add("norm", 1, layer_event=True)  # LN1 of the stage's first layer
                    P = run.pieces(rows)
                    for _layer in range(n_layers):
                        add("qkv_gemm", 1, layer_event=True)
                        add("attention", 1, layer_event=True)
                        add("attn_out_gemm", P, layer_event=True)
                        add("norm", 2, layer_event=True)
                        add("mlp_gemm", 1 + P, layer_event=True)  # fc1+gelu, then fc2 pieces
                        if run.tp > 1:
                            add("tp_allreduce", 2 * P, layer_event=True)
                            if P == 1 and len(nanos) == 1:  # blocking
                                add("tp_wait", 2, layer_event=True)
                            else:
                                add("tp_wait", 0, 2 * P, layer_event=True)
                if not last:
                    add("pp_send", 1)                   # the isend itself
                if not first and not last and s >= 1 and s + 1 < steps:
                    add("pp_send", 1)                   # middle stage: wait for step s-1's send
                if last:
                    add("head", 1)
                    if run.tp > 1:
                        add("sample", 2)                # local work before and after the collective
                        add("sample_wait", 1)           # the argmax MAXLOC across TP
                    else:
                        add("sample", 1)
                    if run.pp > 1 and s >= 1 and s + 1 < steps:
                        add("pp_send", 1)               # wait for the previous token send
    add("weight_init", 1)
    add("dp_gather", 1)
    return lo, hi, lo_step


def uncertainty(run, r):
    if run.mesh is not None and "clock_uncertainty" in run.mesh.dtype.names:
        return float(run.mesh[r]["clock_uncertainty"])
    return 0.0
