#!/usr/bin/python3
"""Checks data/prompts against the table in data/README.md, with no vocabulary: every file is
listed, its bytes and words are as stated, its .tokens twin holds the stated number of GPT-2
ids (all below GPT-2's vocab), the count is at most the nominal length in the file name and
within 6% of it, and each prompt has its task's form.
usage: check_prompts.py DATA_DIR"""
import os
import re
import sys

GPT2_VOCAB = 50257
ROW = re.compile(r"^\| `([a-z]+)-(\d+)\.txt` \| [^|]+ \| +(\d+) \| +(\d+) \| +(\d+) \| .+ \|$")
FORM = {
    "generation": ("Continue the story.\n\n", None),
    "qa": ("Answer the question using the passage.\n\nPassage:\n", "\nAnswer:"),
    "summarisation": ("Summarise the following passage.\n\nPassage:\n", "\n\nSummary:"),
}


def check(data):
    prompts = os.path.join(data, "prompts")
    with open(os.path.join(data, "README.md"), encoding="utf-8") as f:
        rows = [m.groups() for m in map(ROW.match, f.read().splitlines()) if m]
    listed = {f"{task}-{length}.txt" for task, length, *_ in rows}
    on_disk = {n for n in os.listdir(prompts) if n.endswith(".txt")}
    assert listed == on_disk, f"README lists {sorted(listed)}, prompts/ has {sorted(on_disk)}"
    assert {os.path.splitext(n)[0] for n in os.listdir(prompts)} == {
        os.path.splitext(n)[0] for n in on_disk}, "a file without its .txt/.tokens twin"
    stories = {}
    for task, length, tokens, size, words in rows:
        name = f"{task}-{length}"
        with open(os.path.join(prompts, name + ".txt"), "rb") as f:
            raw = f.read()
        with open(os.path.join(prompts, name + ".tokens")) as f:
            lines = f.read().splitlines()
        assert len(lines) == 1, f"{name}.tokens: {len(lines)} lines, expected one prompt"
        ids = [int(x) for x in lines[0].split()]
        text = raw.decode("ascii")  # raises on a non-ASCII byte
        assert len(raw) == int(size), f"{name}.txt: {len(raw)} bytes, README says {size}"
        assert len(text.split()) == int(words), f"{name}.txt: {len(text.split())} words, README says {words}"
        assert len(ids) == int(tokens), f"{name}.tokens: {len(ids)} ids, README says {tokens}"
        assert all(0 <= i < GPT2_VOCAB for i in ids), f"{name}.tokens: an id outside GPT-2's vocab"
        assert 0.94 * int(length) <= len(ids) <= int(length), f"{name}: {len(ids)} tokens"
        assert text == text.rstrip(), f"{name}.txt ends in whitespace"
        head, tail = FORM[task]
        assert text.startswith(head), f"{name}.txt does not open as a {task} prompt"
        assert tail is None or text.endswith(tail), f"{name}.txt does not end with {tail!r}"
        if task == "generation":
            stories[int(length)] = text[len(head):]
    lengths = sorted(stories)
    for short, long in zip(lengths, lengths[1:]):
        assert stories[long].startswith(stories[short]), f"generation-{short} is not a prefix"
    print(f"{len(rows)} prompts match data/README.md")


if __name__ == "__main__":
    check(sys.argv[1])
