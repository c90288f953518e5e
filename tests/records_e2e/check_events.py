#!/usr/bin/python3
"""Checks the timing events of a real multi-rank run file against what the run did.

  check_events.py RUN.h5                 counts, fields, nesting and cross-rank clock checks
  check_events.py RUN.h5 --iteration-labels   only: every event carries its generation's label

Counts per rank and phase must equal the prediction of e2e_lib.predict_counts (the schedule of
src/engine/schedule.c, src/engine/forward.c and src/cli/run_measure.c, written out in docs/schema.md); at `record.timings: step` only
layer = -1 events may appear, at `off` none. Clock checks compare events of different ranks
that are causally ordered (a receive cannot complete before the matching send started, a
collective cannot complete on one rank before every rank entered it), within the sum of the
two ranks' recorded clock uncertainties."""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_lib as L  # noqa: E402
from e2e_lib import expect, fail, np  # noqa: E402

SLOP = 1e-7  # seconds: float rounding of the stored times


def generation_of(ev):
    """Index of the iteration event (generation, warm-ups included) enclosing each event;
    -1 outside every generation (weight_init, dp_gather)."""
    it = ev["phase"] == "iteration"
    starts, ends = ev["t_start"][it], ev["t_end"][it]
    order = np.argsort(starts)
    starts, ends = starts[order], ends[order]
    gen = np.full(len(ev["phase"]), -1)
    for g, (a, b) in enumerate(zip(starts, ends)):
        inside = (ev["t_start"] >= a) & (ev["t_end"] <= b) & ~it
        gen[inside] = g
    return gen


def check_counts(run):
    for r, ev in enumerate(run.events):
        if ev is None:
            continue
        before = len(L.failures)
        lo, hi, lo_step = L.predict_counts(run, r)
        got = {p: int((ev["phase"] == p).sum()) for p in L.PHASES}
        unknown = set(ev["phase"]) - set(L.PHASES)
        expect(not unknown, "rank %d: unknown phase names %s" % (r, sorted(unknown)))
        for p in L.PHASES:
            if run.level == "layer":
                ok = lo[p] <= got[p] <= hi[p]
                want = "%d" % lo[p] if lo[p] == hi[p] else "%d..%d" % (lo[p], hi[p])
            elif run.level == "step":
                ok = got[p] == lo_step[p]
                want = "%d" % lo_step[p]
            else:
                ok = got[p] == 0
                want = "0"
            expect(ok, "rank %d %s: %d events, predicted %s (level %s)" % (
                r, p, got[p], want, run.level))
        if run.tp == 1:
            expect(got["tp_allreduce"] == 0 and got["tp_wait"] == 0,
                   "rank %d: TP events with tp = 1" % r)
        if run.pp == 1:
            expect(got["pp_send"] == 0 and got["pp_recv_wait"] == 0,
                   "rank %d: PP events with pp = 1" % r)
        if run.level == "step":
            expect(bool((ev["layer"] == -1).all()),
                   "rank %d: level step holds events with layer != -1" % r)
        if len(L.failures) == before:
            print("rank %d: %d events, counts as predicted" % (r, len(ev["phase"])))


def check_fields(run):
    steps = max(run.new_tokens, 1)
    for r, ev in enumerate(run.events):
        if ev is None or len(ev["phase"]) == 0:
            continue
        ts, te = ev["t_start"], ev["t_end"]
        expect(bool(np.isfinite(ts).all() and np.isfinite(te).all()),
               "rank %d: non-finite event times" % r)
        bad = np.nonzero(te < ts)[0]
        expect(len(bad) == 0, "rank %d: %d events end before they start (first: %s)" % (
            r, len(bad), ev["phase"][bad[0]] if len(bad) else ""))
        expect(bool((ts >= -1.0).all()), "rank %d: event before the run's start" % r)
        scoped = ev["step"] >= 0
        expect(bool((ev["step"][scoped] < steps).all()), "rank %d: step out of range" % r)
        between = np.isin(ev["phase"], list(L.BETWEEN_STEPS))
        expect(bool((ev["microbatch"][between] == -1).all()),
               "rank %d: events between steps with a micro-batch" % r)
        scoped = scoped & ~between
        n_micro = len(run.mb_sizes(r))
        expect(bool(((ev["microbatch"][scoped] >= 0) &
                     (ev["microbatch"][scoped] < n_micro)).all()),
               "rank %d: micro-batch out of [0, %d)" % (r, n_micro))
        l0, l1 = run.stage_layers(r)
        lay = ev["layer"][ev["layer"] != -1]
        expect(bool(((lay >= l0) & (lay < l1)).all()),
               "rank %d: layer outside this stage's [%d, %d)" % (r, l0, l1))
        unscoped = {str(p) for p in ev["phase"][(ev["step"] < 0)]}
        expect(unscoped <= {"iteration", "weight_init", "dp_gather", "nll_wait"},
               "rank %d: step-less events of phases %s" % (r, sorted(unscoped)))
        # every step-scoped event lies inside its step event on the same rank (same clock)
        if run.level == "off":
            continue
        gen = generation_of(ev)
        is_step = ev["phase"] == "step"
        span = {}
        for i in np.nonzero(is_step)[0]:
            span[(gen[i], ev["step"][i], ev["microbatch"][i])] = (ts[i], te[i])
        outside = 0
        for i in np.nonzero(scoped & ~is_step)[0]:
            s = span.get((gen[i], ev["step"][i], ev["microbatch"][i]))
            if s is None or ts[i] < s[0] or te[i] > s[1]:
                outside += 1
        expect(outside == 0, "rank %d: %d events outside their step event" % (r, outside))
        # every generation's step events carry its label: warm-ups -1, then 0, 1, ...
        for g in range(run.warmup + run.iterations):
            want = g - run.warmup if g >= run.warmup else -1
            labels = set(int(x) for x in ev["iteration"][(gen == g) & scoped])
            expect(labels <= {want}, "rank %d generation %d: step events labelled %s, want %d"
                   % (r, g, sorted(labels), want))


def check_iteration_labels(run):
    """The `iteration` events themselves carry the label of the generation they time."""
    for r, ev in enumerate(run.events):
        if ev is None:
            continue
        it = np.nonzero(ev["phase"] == "iteration")[0]
        it = it[np.argsort(ev["t_start"][it])]
        labels = [int(ev["iteration"][i]) for i in it]
        want = [g - run.warmup if g >= run.warmup else -1
                for g in range(run.warmup + run.iterations)]
        expect(labels == want, "rank %d: iteration events labelled %s, want %s (warmup %d)" % (
            r, labels, want, run.warmup))
        wi = ev["iteration"][ev["phase"] == "weight_init"]
        expect(bool((wi == -1).all()), "rank %d: weight_init labelled %s, want -1 (it belongs "
               "to no measured iteration)" % (r, wi.tolist()))


def keyed(run, r, phase):
    """(generation, step, microbatch, layer) -> list of (t_start, t_end) in table order."""
    ev = run.events[r]
    gen = generation_of(ev)
    out = {}
    for i in np.nonzero(ev["phase"] == phase)[0]:
        k = (int(gen[i]), int(ev["step"][i]), int(ev["microbatch"][i]), int(ev["layer"][i]))
        out.setdefault(k, []).append((float(ev["t_start"][i]), float(ev["t_end"][i])))
    return out


def check_clocks(run):
    u = [L.uncertainty(run, r) for r in range(run.world)]
    off = [float(run.mesh[r]["clock_offset"]) for r in range(run.world)]
    expect(off[0] == 0.0 and u[0] == 0.0, "rank 0 must have offset 0 and uncertainty 0")
    expect(all(math.isfinite(x) and x >= 0 for x in u), "uncertainties must be >= 0")
    hosts = {L.text(run.mesh[r]["host"]) for r in range(run.world)}
    if len(hosts) == 1:
        # one host: one monotonic clock, so the true offset is 0 and Cristian's bound must hold
        for r in range(run.world):
            expect(abs(off[r]) <= u[r] + 1e-9, "rank %d: |offset| %.3g s exceeds its "
                   "uncertainty %.3g s on a single host" % (r, off[r], u[r]))
    if run.level == "off":
        return 0
    by_coord = {run.coords(r): r for r in range(run.world)}
    pairs = 0

    def after(t_late, t_early, ra, rb, what):
        nonlocal pairs
        pairs += 1
        tol = u[ra] + u[rb] + SLOP
        expect(t_late >= t_early - tol, "%s: rank %d at %.9f precedes rank %d at %.9f by more "
               "than the uncertainty %.3g s" % (what, ra, t_late, rb, t_early, tol))

    # pipeline: stage k's isend of (step, mb) starts before stage k+1's receive of it ends
    if run.pp > 1:
        for (dp, tp, pp), r in by_coord.items():
            if pp + 1 >= run.pp:
                continue
            r_next = by_coord[(dp, tp, pp + 1)]
            sends, recvs = keyed(run, r, "pp_send"), keyed(run, r_next, "pp_recv_wait")
            for k, rv in recvs.items():
                sv = sends.get(k)
                if not expect(sv is not None, "rank %d has a pp_recv_wait at %s but rank %d "
                              "no pp_send" % (r_next, k, r)):
                    continue
                # the isend is the last pp_send of the first stage's step (a wait for an older
                # send comes first) and the first of a middle stage's (its wait comes after)
                isend = sv[-1] if pp == 0 else sv[0]
                after(rv[0][1], isend[0], r_next, r, "pp activations %s" % (k,))
            # tokens: the last stage samples step s, the first stage receives them at s+1
            if pp == 0:
                r_last = by_coord[(dp, tp, run.pp - 1)]
                samples, recv0 = keyed(run, r_last, "sample"), keyed(run, r, "pp_recv_wait")
                for (g, s, mb, layer), sv in samples.items():
                    rv = recv0.get((g, s + 1, mb, layer))
                    if rv is not None:
                        after(rv[0][1], sv[0][1], r, r_last, "pp tokens step %d mb %d" % (s, mb))
    # tensor parallel: an all-reduce completes on no rank before every rank of the group began
    if run.tp > 1:
        for (dp, tp, pp), r in by_coord.items():
            if tp != 0:
                continue
            group = [by_coord[(dp, t, pp)] for t in range(run.tp)]
            tables = [keyed(run, g, "tp_allreduce") for g in group]
            for k, v0 in tables[0].items():
                for n in range(len(v0)):
                    for a, ta in zip(group, tables):
                        for b, tb in zip(group, tables):
                            if a != b and k in ta and k in tb and n < len(ta[k]) and n < len(tb[k]):
                                after(ta[k][n][1], tb[k][n][0], a, b, "tp_allreduce %s #%d" % (k, n))
    # dp_gather is an all-reduce and a broadcast over the world
    if run.world > 1:
        ends = {r: keyed(run, r, "dp_gather") for r in range(run.world)}
        for a in range(run.world):
            for b in range(run.world):
                if a != b and ends[a] and ends[b]:
                    ea, eb = list(ends[a].values())[0][0], list(ends[b].values())[0][0]
                    after(ea[1], eb[0], a, b, "dp_gather")
    print("clock: %d cross-rank causal pairs within the recorded uncertainty (max %.3g s)" % (
        pairs, max(u)))
    return pairs


def check_sched(run):
    """/sched: present when record.sched and timings are on, one row per step event of each
    rank with that event's numbering and interval, counters finite and non-negative, and no
    more run delay than the threads sampled could have waited during the step."""
    want = run.sched_on and run.level != "off"
    expect((run.sched is not None) == want, "/sched %s, want %s (record.sched %s, timings %s)" % (
        "present" if run.sched is not None else "absent", "present" if want else "absent",
        run.sched_on, run.level))
    if run.sched is None:
        return
    a = run.sched_attrs
    expect(len(L.text(a.get("source", b""))) > 0, "/sched has no source attribute")
    threads = [int(x) for x in a.get("threads_per_rank", [])]
    expect(len(threads) == run.world and min(threads) >= 1 and int(a.get("threads", 0)) ==
           max(threads), "/sched threads %s, threads_per_rank %s" % (a.get("threads"), threads))
    expect(int(np.sum(a.get("dropped", [1]))) == 0, "/sched dropped rows: %s" % a.get("dropped"))
    for r, rows in enumerate(run.sched):
        ev = run.events[r]
        if not expect(rows is not None, "rank %d: no /sched table" % r):
            continue
        st = ev["phase"] == "step"
        steps = sorted(zip(ev["iteration"][st].tolist(), ev["step"][st].tolist(),
                           ev["microbatch"][st].tolist(), ev["t_start"][st].tolist(),
                           ev["t_end"][st].tolist()))
        got = sorted(zip(rows["iteration"].tolist(), rows["step"].tolist(),
                         rows["microbatch"].tolist(), rows["t_start"].tolist(),
                         rows["t_end"].tolist()))
        expect(got == steps, "rank %d: %d /sched rows, %d step events, or their numbering or "
               "times differ" % (r, len(got), len(steps)))
        if len(rows) == 0:
            continue
        delay = rows["run_delay"]
        expect(bool(np.isfinite(delay).all() and (delay >= 0).all()),
               "rank %d: run_delay not finite and non-negative: %s" % (r, delay[:8]))
        expect(bool((rows["nivcsw"] >= 0).all() and (rows["nvcsw"] >= 0).all()),
               "rank %d: negative context switch counts" % r)
        # Linux adds a wait to run_delay when the thread is switched back in, so a step may hold
        # the end of a wait that began before it: no per-step bound holds on a loaded machine.
        # Over the run, every thread waits at most the run's span, plus what it carried in from
        # before the first step (5 s: generous; a unit slip is a factor of 1e3 or more).
        run_span = float(rows["t_end"].max() - rows["t_start"].min())
        bound = threads[r] * (run_span + 5.0) if threads else np.inf
        expect(bool(delay.sum() <= bound), "rank %d: run_delay %.3f s over the run, beyond %d "
               "threads x its %.3f s (+5 s)" % (r, float(delay.sum()), threads[r] if threads else 0,
                                                run_span))
    print("/sched: %s rows, as many as step events" % [len(x) for x in run.sched])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--iteration-labels", action="store_true")
    args = ap.parse_args()
    run = L.Run(args.run)
    if args.iteration_labels:
        check_iteration_labels(run)
        L.finish("check_events --iteration-labels %s" % os.path.basename(args.run))
    want_groups = ["rank_%05d" % r for r in range(run.world)]
    expect(run.rank_groups == want_groups, "/timings groups %s, want %s" % (
        run.rank_groups, want_groups))
    expect(all(ev is not None for ev in run.events), "a rank's events table is missing")
    expect(L.text(run.timings_attrs.get("level", b"?")) == run.level,
           "/timings level %s, job says %s" % (run.timings_attrs.get("level"), run.level))
    dropped = run.timings_attrs.get("dropped")
    expect(dropped is not None and int(np.sum(dropped)) == 0, "dropped events: %s" % dropped)
    check_counts(run)
    check_fields(run)
    check_sched(run)
    pairs = check_clocks(run)
    if run.level == "layer" and (run.tp > 1 or run.pp > 1):
        expect(pairs > 0, "no cross-rank pair was checked")
    L.finish("check_events %s (dp%d tp%d pp%d m%d, %s)" % (
        os.path.basename(args.run), run.dp, run.tp, run.pp, run.microbatches, run.level))


if __name__ == "__main__":
    main()
