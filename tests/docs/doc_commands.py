#!/usr/bin/python3
"""Every shell command in a code block of README.md and docs/*.md, found, counted and run.

The rules (docs/cli.md, "Commands in these docs", says the same for writers):
- Every fenced block carries a language. Blocks tagged sh, bash or console hold commands; any
  other tag (text, yaml, c, ...) is never run. An untagged block is an error, so that a new
  command cannot slip past the tests in a block nobody tagged.
- In sh/bash blocks, a command is the shortest run of lines, from a line that is neither blank
  nor a comment, that bash parses as complete (`bash -n`): `\\` continuations and for/do/done
  loops are one command. In console blocks a command starts at a `$ ` prompt (the prompt is
  dropped) and takes the lines that complete it; the other lines are sample output, shown and
  not compared.
- A command carries `needs: KIND[, KIND]` in its comment when it needs what a test machine does
  not give it: gpu, slurm (Slurm daemons), netns (network namespaces, root), long (over 30 s;
  the comment must then give an estimate such as `~5 min`). Such a command is checked, never
  run: `bash -n`, every repository path it names exists, `tripar run` runs with --dry-run,
  another tripar command prints its --help, and a script it runs is parsed by `bash -n`, and
  run with --dry-run when its --help offers one. Every other command runs as written.

Commands of one doc run in order in one scratch folder of the build tree, which links the
source tree's top-level entries (jobs/, data/, tools/, ...) and `build` (this build), so
outputs land in the scratch and never in the source. Bare `tripar` is this build's binary
(first on PATH). What a command exports (README's environment lines) reaches the doc's later
commands. README's commands start without the Open MPI variables the tests set and without
TRIPAR_BIN, so its environment lines are tested; the other docs assume them.

  doc_commands.py list SRC          one line per command: DOC|NAME|INDEX|LINE|KINDS (cmake reads it)
  doc_commands.py show SRC          every command, with its place and kinds
  doc_commands.py run SRC DOC INDEX --build BUILD --bin TRIPAR
  doc_commands.py count SRC BUILD   the commands equal the tests `ctest -N -L docs` lists
  doc_commands.py selftest          the extractor on planted docs, good and bad
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

RUN_TAGS = {"sh", "bash", "console"}
KINDS = {"gpu", "slurm", "netns", "long"}
NEEDS = re.compile(r"needs:\s*([a-z]+(?:\s*,\s*[a-z]+)*)")
ESTIMATE = re.compile(r"~\s*\d+(?:\.\d+)?\s*(?:s|min|h)\b")
FENCE = re.compile(r"^\s*```\s*([A-Za-z0-9_+-]*)")
# The variables README's environment lines set; they are removed before README's commands run.
README_ENV = ["OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
              "OMPI_MCA_mpi_yield_when_idle", "OMPI_MCA_rmaps_base_oversubscribe", "TRIPAR_BIN"]


class DocError(Exception):
    pass


def docs(src):
    """README.md then docs/*.md, by name: the order of the tests."""
    names = ["README.md"] + ["docs/" + n for n in sorted(os.listdir(os.path.join(src, "docs")))
                             if n.endswith(".md")]
    return names


def complete(text):
    """True when bash parses text as whole commands (no open quote, loop or continuation)."""
    if text.rstrip("\n").endswith("\\"):
        return False  # bash -n takes a trailing backslash at the end of input as complete
    return subprocess.run(["bash", "-n"], input=text, text=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def comment_of(line):
    """The trailing `# ...` of one shell line, outside quotes ('' when none)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t;"):
            return line[i + 1:]
    return ""


def kinds_of(doc, line, text):
    kinds = []
    for physical in text.split("\n"):
        comment = comment_of(physical)
        m = NEEDS.search(comment)
        if not m:
            continue
        for k in re.split(r"\s*,\s*", m.group(1)):
            if k not in KINDS:
                raise DocError(f"{doc}:{line}: needs: '{k}' is not a kind; allowed: "
                               + ", ".join(sorted(KINDS)))
            kinds.append(k)
        if "long" in kinds and not ESTIMATE.search(comment):
            raise DocError(f"{doc}:{line}: needs: long without a time estimate such as '~5 min'")
    return kinds


def block_commands(doc, tag, lines):
    """(line, text) of each command of one block; lines are (number, text)."""
    out = []
    i = 0
    while i < len(lines):
        num, text = lines[i]
        if tag == "console":
            if not text.startswith("$ "):
                i += 1
                continue
            text = text[2:]
        elif not text.strip() or text.lstrip().startswith("#"):
            i += 1
            continue
        cmd = [text]
        j = i + 1
        while not complete("\n".join(cmd) + "\n"):
            if j >= len(lines):
                raise DocError(f"{doc}:{num}: the command never ends (bash -n): {text}")
            cmd.append(lines[j][1])
            j += 1
        out.append((num, "\n".join(cmd)))
        i = j
    return out


def extract(src, doc):
    """[(line, text, kinds)] of every command of one doc, in order."""
    lines = open(os.path.join(src, doc), encoding="utf-8").read().split("\n")
    commands = []
    block = None
    for num, text in enumerate(lines, 1):
        m = FENCE.match(text)
        if m and block is None:
            if not m.group(1):
                raise DocError(f"{doc}:{num}: a code block without a language; tag it sh, bash "
                               "or console when it holds commands to run, text otherwise")
            block = (m.group(1), num, [])
        elif m:
            tag, _, body = block
            if tag in RUN_TAGS:
                for line, cmd in block_commands(doc, tag, body):
                    commands.append((line, cmd, kinds_of(doc, line, cmd)))
            block = None
        elif block is not None:
            block[2].append((num, text))
    if block is not None:
        raise DocError(f"{doc}:{block[1]}: a code block that is never closed")
    return commands


def stem(doc):
    return os.path.splitext(os.path.basename(doc))[0].lower()


def all_commands(src):
    return [(doc, i, line, cmd, kinds) for doc in docs(src)
            for i, (line, cmd, kinds) in enumerate(extract(src, doc), 1)]


# ---------------------------------------------------------------------------------------------
# Running one command

def scratch_prepare(src, build, scratch, tripar):
    """A fresh scratch folder that looks like the repository after a build."""
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(os.path.join(scratch, ".bin"))
    for name in os.listdir(src):
        if name.startswith(".") or name.startswith("build"):
            continue
        os.symlink(os.path.join(src, name), os.path.join(scratch, name))
    os.symlink(build, os.path.join(scratch, "build"))
    os.symlink(tripar, os.path.join(scratch, ".bin", "tripar"))


def source_state(src):
    """What git sees in the source tree, ignored files included (None outside a git checkout)."""
    r = subprocess.run(["git", "-C", src, "status", "--porcelain", "--ignored"],
                       capture_output=True, text=True)
    return set(r.stdout.splitlines()) if r.returncode == 0 else None


def words(cmd):
    """The shell words of a command, comments dropped."""
    cmd = cmd.replace("\\\n", " ")  # shlex keeps a backslash-newline as a newline word
    try:
        return shlex.split(cmd, comments=True)
    except ValueError:
        return cmd.split()


def tracked_tops(src):
    """The top-level entries git tracks in src (every non-hidden one where src is no git
    checkout)."""
    r = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True)
    if r.returncode != 0:
        return [n for n in os.listdir(src) if not n.startswith(".")]
    return sorted({line.split("/")[0] for line in r.stdout.splitlines() if line})


def repo_paths(src, ws):
    """The words (or KEY=a,b values) that name something under a top-level entry the checkout
    tracks (jobs/, data/, ...; not out/, which runs make and a fresh clone lacks)."""
    tops = tracked_tops(src) + ["build"]
    out = []
    for w in ws:
        for piece in re.split(r"[=,]", w):
            head = piece.split("/")[0]
            if "/" in piece and head in tops and not re.search(r"[*?$\[{]", piece):
                out.append(piece)
    return out


def program(ws):
    """(index of the program word, skipping VAR=x prefixes and an mpirun/srun launcher)."""
    i = 0
    while i < len(ws) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", ws[i]):
        i += 1
    if i < len(ws) and os.path.basename(ws[i]) in ("mpirun", "mpiexec", "srun"):
        i += 1
        while i < len(ws) and ws[i].startswith("-"):
            # -n 4, --ntasks-per-node=2, --oversubscribe: an option's value follows a short one
            i += 2 if re.match(r"^-[a-zA-Z]$|^--(np|hostfile|map-by|bind-to)$", ws[i]) else 1
    return i


def takes_dry_run(script):
    """Whether a script (or a *_lib.sh of its folder that it sources) has a --dry-run option.
    Read, not asked: a script without --help could take `--help` for an output folder."""
    text = open(script, encoding="utf-8").read()
    for lib in re.findall(r"([A-Za-z0-9_]+_lib\.sh)", text):
        path = os.path.join(os.path.dirname(script), lib)
        if os.path.exists(path):
            text += open(path, encoding="utf-8").read()
    return re.search(r"--dry-run\)", text) is not None


def check_marked(cmd, kinds, env, cwd, src):
    """The static check of a command that needs what this machine does not give (docstring)."""
    print(f"needs {', '.join(kinds)}: checked, not run", flush=True)
    if subprocess.run(["bash", "-n", "-c", cmd]).returncode != 0:
        return 1
    ws = words(cmd)
    missing = [p for p in repo_paths(src, ws) if not os.path.exists(os.path.join(cwd, p))]
    if missing:
        print("names what does not exist: " + ", ".join(missing))
        return 1
    i = program(ws)
    if i >= len(ws):
        return 0
    envs = [w for w in ws[:i] if "=" in w and not w.startswith("-")]
    prog = os.path.basename(ws[i])
    script = next((w for w in ws[i:] if re.search(r"\.(sh|sbatch)$", w)
                   and os.path.exists(os.path.join(cwd, w))), None)
    if prog == "tripar" and i + 1 < len(ws):
        sub = ws[i + 1]
        argv = ws[i:] + ["--dry-run"] if sub == "run" else ws[i:i + 2] + ["--help"]
        argv[0] = shutil.which("tripar", path=env["PATH"]) if argv[0] == "tripar" else argv[0]
        print("+ " + shlex.join(envs + argv), flush=True)
        return subprocess.run(["env"] + envs + argv, cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL).returncode
    if script:
        print(f"+ bash -n {script}", flush=True)
        if subprocess.run(["bash", "-n", script], cwd=cwd).returncode != 0:
            return 1
        if takes_dry_run(os.path.join(cwd, script)):
            argv = ["bash"] + ws[ws.index(script):] + ["--dry-run"]
            print("+ " + shlex.join(argv), flush=True)
            return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL).returncode
    return 0


def run_command(src, build, tripar, doc, index):
    commands = extract(src, doc)
    line, cmd, kinds = commands[index - 1]
    scratch = os.path.join(build, "tests", "docs", stem(doc))
    if index == 1:
        scratch_prepare(src, build, scratch, tripar)
    print(f"{doc}:{line}: {cmd}", flush=True)
    env = dict(os.environ)
    for k in README_ENV if doc == "README.md" else ["TRIPAR_BIN"]:
        env.pop(k, None)
    env["PATH"] = os.path.join(scratch, ".bin") + os.pathsep + env.get("PATH", "")
    env["PWD"] = scratch
    carried = os.path.join(scratch, ".env")
    before = source_state(src)
    if kinds:
        rc = check_marked(cmd, kinds, env, scratch, src)
    else:
        # The doc's own exports so far, then the command under -e and pipefail (a failing
        # command in a loop or a pipe fails the test); on exit, the environment it leaves.
        after = os.path.join(scratch, ".env-after")
        script = (f"trap 'rc=$?; env -0 > {shlex.quote(after)}; exit $rc' EXIT\n"
                  f"[ -f .env ] && . ./.env\nset -eo pipefail\n{cmd}\n")
        rc = subprocess.run(["bash", "-c", script], cwd=scratch, env=env).returncode
        if os.path.exists(after):
            left = dict(kv.split("=", 1) for kv in open(after).read().split("\0") if "=" in kv)
            with open(carried + ".new", "w") as f:
                for k, v in sorted(left.items()):
                    if k not in ("PWD", "OLDPWD", "SHLVL", "_") and env.get(k) != v:
                        f.write(f"export {k}={shlex.quote(v)}\n")
            os.replace(carried + ".new", carried)
            os.remove(after)
    after_state = source_state(src)
    if before is not None and after_state is not None and after_state - before:
        print("wrote into the source tree: " + ", ".join(sorted(after_state - before)))
        return 1
    if rc != 0:
        print(f"{doc}:{line}: exit {rc}")
    return 1 if rc else 0


def count(src, build):
    want = len(all_commands(src))
    r = subprocess.run(["ctest", "-N", "-L", "^docs$"], cwd=build, capture_output=True, text=True)
    m = re.search(r"Total Tests:\s*(\d+)", r.stdout)
    got = int(m.group(1)) if m else -1
    print(f"{want} documented commands, {got} tests in label docs")
    if want != got:
        print("re-run cmake: the docs changed since the tests were registered" if got >= 0
              else r.stdout + r.stderr)
        return 1
    return 0


def selftest():
    """The extractor on planted docs: what it counts, and each doc it must refuse."""
    import tempfile
    good = ("```sh\n# a comment, not a command\nexport A=1   # one\n\n"
            "tripar run x.yaml \\\n    --set a=1   # two: a continuation; needs: long, ~2 min\n"
            "for b in 1 2; do\n  echo $b\ndone\n```\n"
            "```console\n$ tripar plan \\\n    --top 3\nrank  strategy\n$ echo hi  # needs: gpu, slurm\n```\n"
            "```text\ntripar run never.yaml\n```\n```yaml\nmodel: {}\n```\n")
    bad = {"```\nls\n```\n": "without a language",
           "```sh\nls   # needs: quantum\n```\n": "'quantum' is not a kind",
           "```sh\nls   # needs: long\n```\n": "without a time estimate",
           "```sh\nls\n": "never closed",
           "```sh\necho 'open\n```\n": "never ends"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "doc.md")
        open(path, "w").write(good)
        got = [(line, kinds) for line, _, kinds in extract(d, "doc.md")]
        want = [(3, []), (5, ["long"]), (7, []), (12, []), (15, ["gpu", "slurm"])]
        if got != want:
            print(f"planted doc: got {got}, want {want}")
            return 1
        for text, message in bad.items():
            open(path, "w").write(text)
            try:
                extract(d, "doc.md")
                print(f"not refused: {text!r}")
                return 1
            except DocError as e:
                if message not in str(e):
                    print(f"refused with '{e}', want '{message}'")
                    return 1
    # A marked command that names a job file the checkout lacks fails its check.
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if check_marked("sbatch slurm/tripar.sbatch jobs/gone.yaml r.h5", ["slurm"], dict(os.environ),
                    src, src) != 1:
        print("a marked command naming jobs/gone.yaml passed its check")
        return 1
    print(f"extractor: {len(want)} planted commands found, {len(bad)} planted faults refused; "
          "a marked command naming a missing file fails")
    return 0


def main(argv):
    try:
        if argv[1] == "list":
            for doc, i, line, _, kinds in all_commands(argv[2]):
                print(f"{doc}|{stem(doc)}_{i:02d}|{i}|{line}|{','.join(kinds) or '-'}")
            return 0
        if argv[1] == "show":
            for doc, i, line, cmd, kinds in all_commands(argv[2]):
                print(f"{doc}:{line} [{','.join(kinds) or 'run'}] {cmd}")
            return 0
        if argv[1] == "run":
            src, doc, index = argv[2], argv[3], int(argv[4])
            opts = dict(zip(argv[5::2], argv[6::2]))
            return run_command(src, os.path.abspath(opts["--build"]), opts["--bin"], doc, index)
        if argv[1] == "selftest":
            return selftest()
        if argv[1] == "count":
            return count(argv[2], argv[3])
    except DocError as e:
        print(e, file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
