#!/usr/bin/python3
"""tools/plot.py draws non-empty PNGs: timeline and phases from the records_runfile output,
scaling from a synthetic study folder. Exits 77 (CTest skip) when h5py/matplotlib are missing."""
import os
import struct
import subprocess
import sys
import tempfile

try:
    import h5py  # noqa: F401
    import matplotlib  # noqa: F401
    import numpy as np
except ImportError as e:
    print("skipping: %s" % e)
    sys.exit(77)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path
    return struct.unpack(">II", head[16:24])


def check_png(path):
    assert os.path.getsize(path) > 10000, "%s is nearly empty" % path
    w, h = png_size(path)
    assert w >= 600 and h >= 250, "%s is %dx%d" % (path, w, h)


def fake_run(path, dp, tp, pp, tokens_per_s):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = np.bytes_("tripar-run")
        f.attrs["complete"] = 1
        for k, v in (("world_size", dp * tp * pp), ("dp", dp), ("tp", tp), ("pp", pp),
                     ("microbatches", 1)):
            f.attrs[k] = v
        g = f.create_group("metrics")
        g.attrs["tokens_per_s"] = float(tokens_per_s)


def main():
    plot, runs = sys.argv[1], sys.argv[2]
    a, b = os.path.join(runs, "run_a.h5"), os.path.join(runs, "run_b.h5")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "timeline.png")
        subprocess.run([sys.executable, plot, "timeline", a, "-o", out], check=True)
        check_png(out)
        out = os.path.join(tmp, "phases.png")
        subprocess.run([sys.executable, plot, "phases", a, b, "-o", out], check=True)
        check_png(out)
        study = os.path.join(tmp, "study")
        os.mkdir(study)
        fake_run(os.path.join(study, "r1.h5"), 1, 1, 1, 100)
        for n in (2, 4):
            fake_run(os.path.join(study, "tp%d.h5" % n), 1, n, 1, 100 * n * 0.8)
            fake_run(os.path.join(study, "pp%d.h5" % n), 1, 1, n, 100 * n * 0.6)
            fake_run(os.path.join(study, "dp%d.h5" % n), n, 1, 1, 100 * n * 0.95)
        with open(os.path.join(study, "notes.h5"), "w") as f:
            f.write("not hdf5")  # skipped, not fatal
        out = os.path.join(tmp, "scaling.png")
        subprocess.run([sys.executable, plot, "scaling", study, "-o", out], check=True)
        check_png(out)
        if os.environ.get("TRIPAR_KEEP_PLOTS"):
            for name in ("timeline.png", "phases.png", "scaling.png"):
                os.replace(os.path.join(tmp, name),
                           os.path.join(os.environ["TRIPAR_KEEP_PLOTS"], name))
    print("test_plot: ok")


if __name__ == "__main__":
    main()
