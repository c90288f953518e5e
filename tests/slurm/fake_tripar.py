#!/usr/bin/python3
# Stand-in for tripar with the same CLI contracts (run --dry-run/--out/--set, report), used to
# exercise the Slurm harness when tripar is not built. Rank 0 writes the run file; others idle.
import os, signal, socket, sys, time

def rank():
    for k in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if k in os.environ:
            return int(os.environ[k])
    return 0

def size():
    for k in ("OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        if k in os.environ:
            return int(os.environ[k])
    return 1

JOB = {"model": {"synthetic": {"layers": 2, "heads": 4, "embd": 32}},
       "parallel": {"dp": 1, "tp": 1, "pp": 1, "microbatches": 1},
       "input": {"synthetic": {"batch": 4, "length": 8}},
       "generate": {"new_tokens": 4}}

def apply_set(kv):
    key, val = kv.split("=", 1)
    node = JOB
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = int(val) if val.lstrip("-").isdigit() else val

def run(args):
    out, dry = None, False
    i = 1
    while i < len(args):
        if args[i] == "--set":
            apply_set(args[i + 1]); i += 2
        elif args[i] == "--out":
            out = args[i + 1]; i += 2
        elif args[i] == "--dry-run":
            dry = True; i += 1
        else:
            i += 1
    import yaml
    if dry:
        yaml.safe_dump(JOB, sys.stdout)
        return 0
    p = JOB["parallel"]
    if p["dp"] * p["tp"] * p["pp"] != size():
        print("fake_tripar: dp*tp*pp != world", file=sys.stderr)
        return 2
    seconds = float(JOB["generate"]["new_tokens"]) * 0.05
    if rank() != 0:
        time.sleep(seconds)
        return 0
    import h5py
    partial = "%s.partial.%s.%d" % (out, socket.gethostname(), os.getpid())
    f = h5py.File(partial, "w")
    f.attrs["complete"] = 0
    f.attrs["world_size"] = size()
    for k in ("dp", "tp", "pp", "microbatches"):
        f.attrs[k] = p[k]
    def on_term(sig, frame):
        f.close()
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
    time.sleep(seconds)
    f.attrs["complete"] = 1
    f.close()
    os.rename(partial, out)
    return 0

def report(args):
    import h5py
    files, csv, i = [], None, 1
    while i < len(args):
        if args[i] in ("--csv", "--json"):
            if args[i] == "--csv":
                csv = args[i + 1]
            i += 2
        else:
            files.append(args[i]); i += 1
    rows = []
    for name in files:
        with h5py.File(name, "r") as f:
            a = f.attrs
            rows.append([name] + [str(int(a[k])) for k in ("world_size", "dp", "tp", "pp", "microbatches")])
    print("file world dp tp pp microbatches")
    for r in rows:
        print(" ".join(r))
    if csv:
        with open(csv, "w") as f:
            f.write("file,world,dp,tp,pp,microbatches\n")
            for r in rows:
                f.write(",".join(r) + "\n")
    return 0

if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    sys.exit(run(sys.argv[1:]) if cmd == "run" else report(sys.argv[1:]) if cmd == "report" else 2)
