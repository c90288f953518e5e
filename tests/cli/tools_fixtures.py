"""Derives the files of the run-file tool tests from real tripar output in WORKDIR (run.h5,
ckpt.h5, written by tools_fixtures.sh), editing them with h5py as a user or another tool would:
  empty_a.h5, empty_b.h5  HDF5 files with nothing in them
  foreign.h5              an HDF5 file of someone else's (a dataset, no tripar attributes)
  incomplete.h5           run.h5 marked complete = 0 (as a killed run leaves it)
  newer.h5                run.h5 claiming format_version 2 (a layout this tripar predates)
  damaged.h5              run.h5 whose /output/tokens is a group, not a dataset
  run_vl.h5               run.h5 with every string attribute variable-length (h5py's default)
  ckpt_vl.h5              ckpt.h5 likewise
  ckpt_virtual.h5         ckpt.h5 whose lnf_g is a virtual dataset over another dataset
  report.json             a JSON file (report --json's), given where a run file goes
  truncated.h5            the first 4 KiB of run.h5: HDF5's signature, but no whole file
usage: tools_fixtures.py WORKDIR"""
import os
import shutil
import sys

import h5py
import numpy as np

work = sys.argv[1]


def path(name):
    return os.path.join(work, name)


def derived(src, dst):
    shutil.copyfile(path(src), path(dst))
    return h5py.File(path(dst), "a")


def strings_to_variable(obj):
    """Rewrites every string attribute of obj as h5py writes a str: variable-length UTF-8."""
    for key in list(obj.attrs):
        value = obj.attrs[key]
        if isinstance(value, (bytes, np.bytes_)):
            obj.attrs[key] = value.decode()
        elif isinstance(value, np.ndarray) and value.dtype.kind == "S":
            obj.attrs[key] = [v.decode() for v in value]
        elif not isinstance(value, str):
            continue
        tid = obj.attrs.get_id(key).get_type()
        assert tid.is_variable_str(), key


for name in ("empty_a.h5", "empty_b.h5"):
    h5py.File(path(name), "w").close()
with h5py.File(path("foreign.h5"), "w") as f:
    f["temperature"] = np.linspace(0, 1, 16, dtype="f4")
    f.attrs["instrument"] = "thermometer"

with open(path("report.json"), "w") as f:
    f.write('{"runs": []}\n')
with open(path("run.h5"), "rb") as src, open(path("truncated.h5"), "wb") as dst:
    dst.write(src.read(4096))

with derived("run.h5", "incomplete.h5") as f:
    assert f.attrs["complete"] == 1
    f.attrs.modify("complete", np.int64(0))
with derived("run.h5", "newer.h5") as f:
    assert f.attrs["format_version"] == 1
    f.attrs.modify("format_version", np.int64(2))
with derived("run.h5", "damaged.h5") as f:
    del f["output/tokens"]
    f.create_group("output/tokens")
with derived("run.h5", "run_vl.h5") as f:
    strings_to_variable(f)

with h5py.File(path("ckpt.h5"), "r") as src, h5py.File(path("ckpt_vl.h5"), "w") as dst:
    for key, value in src.attrs.items():
        dst.attrs[key] = value
    strings_to_variable(dst)
    assert dst.attrs.get_id("format").get_type().is_variable_str()
    for group in src:
        src.copy(group, dst)
with derived("ckpt.h5", "ckpt_virtual.h5") as f:
    data = f["weights/lnf_g"][...]
    f["weights/lnf_g_source"] = data
    del f["weights/lnf_g"]
    layout = h5py.VirtualLayout(shape=data.shape, dtype="f4")
    layout[:] = h5py.VirtualSource(f["weights/lnf_g_source"])
    f.create_virtual_dataset("weights/lnf_g", layout)
print("tool fixtures in", work)
