#!/usr/bin/python3
"""tools/plot.py on real run files: a timeline of the 4-rank run, the phases of two runs and the
scaling of a folder of runs must each give a PNG that is not blank.

  check_plot.py PLOT.py OUTDIR"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_lib as L  # noqa: E402
from e2e_lib import expect, np  # noqa: E402

try:
    import matplotlib.image as mpimg
except ImportError as exc:
    print("SKIP: %s" % exc)
    sys.exit(L.SKIP)


def plot(script, *args):
    p = subprocess.run([sys.executable, script] + list(args), capture_output=True, text=True,
                       timeout=240)
    expect(p.returncode == 0, "plot.py %s: exit %d\n%s%s" % (args[0], p.returncode, p.stdout,
                                                              p.stderr))
    return p.stdout


def check_png(path, min_w, min_h):
    if not expect(os.path.exists(path) and os.path.getsize(path) > 5000, "%s missing or tiny"
                  % path):
        return
    with open(path, "rb") as fh:
        expect(fh.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    expect(w >= min_w and h >= min_h, "%s is %dx%d" % (path, w, h))
    rgb = img[..., :3]
    # drawn: many distinct colours (phases), and a good share of non-white pixels
    colours = len(np.unique((rgb.reshape(-1, 3) * 255).astype(np.uint8), axis=0))
    ink = float((rgb.min(axis=2) < 0.9).mean())
    expect(colours >= 8 and ink > 0.02, "%s looks blank (%d colours, %.1f%% ink)" % (
        path, colours, 100 * ink))
    print("%s: %dx%d, %d colours, %.1f%% ink" % (os.path.basename(path), w, h, colours, 100 * ink))


def main():
    script, d = sys.argv[1], sys.argv[2]
    out = os.path.join(d, "plots")
    os.makedirs(out, exist_ok=True)
    main_run, other = os.path.join(d, "tp2pp2.h5"), os.path.join(d, "pp2.h5")
    for p in (main_run, other):
        if not os.path.exists(p):
            print("FAIL: %s missing (run the records_e2e_events tests first)" % p)
            sys.exit(1)

    png = os.path.join(out, "timeline.png")
    text = plot(script, "timeline", main_run, "-o", png)
    expect("timeline of 4 ranks" in text, "timeline output %r" % text)
    check_png(png, 800, 300)

    png = os.path.join(out, "phases.png")
    text = plot(script, "phases", main_run, other, "-o", png)
    expect("2 runs" in text, "phases output %r" % text)
    check_png(png, 500, 300)

    study = os.path.join(out, "study")
    os.makedirs(study, exist_ok=True)
    n = 0
    for name in ("one", "tp2", "pp2", "dp3", "tp2pp2", "pp4", "overlap"):
        src, dst = os.path.join(d, name + ".h5"), os.path.join(study, name + ".h5")
        if os.path.exists(src):
            if os.path.lexists(dst):
                os.remove(dst)
            os.symlink(os.path.abspath(src), dst)
            n += 1
    png = os.path.join(out, "scaling.png")
    text = plot(script, "scaling", study, "-o", png)
    expect(("%d runs" % n) in text, "scaling output %r, want %d runs" % (text, n))
    check_png(png, 800, 300)
    L.finish("check_plot")


if __name__ == "__main__":
    main()
