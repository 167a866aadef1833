#!/usr/bin/env python3
"""Write docs/cli.md's command synopsis from the commands' own --help
(tests/cli_synopsis.sh checks they agree).
usage: scripts/cli_synopsis.py ATTN [DOCS/cli.md]"""
import re
import subprocess
import sys

GROUPS = [
    ("walk chapter 3, step by step (+ SVG figures)", ["chapter3"]),
    ("one attention module forward (and backward) on a .npy input", ["forward"]),
    ("a whole GPT's logits (and loss) on token ids", ["forward", "gpt"]),
    ("train a GPT: char-level or GPT-2's tokenizer, checkpoints, resume", ["train"]),
    ("sample text from a run folder or any GPT-2 weights file", ["generate"]),
    ("a model's attention as an HTML page or an SVG heatmap", ["viz"]),
    ("time attention, the kernel, sgemm, a whole model", ["bench"]),
    ("a model's training step", ["bench", "train"]),
    ("a model's generation", ["bench", "generate"]),
    ("PyTorch's generator: raw draws, dropout masks", ["rng"]),
    ("a checkpoint or weights file; this CPU", ["info"]),
    ("GPT-2 weights for other programs", ["export"]),
    ("label texts with a classifier (train --task classify)", ["classify"]),
]


def synopsis(attn, args):
    out = subprocess.run([attn, *args, "--help"], capture_output=True, text=True).stdout
    res, on = [], False
    for line in out.split("\n"):
        if line.startswith("usage: "):
            on = True
            res.append(line[len("usage: "):])
        elif on and re.match(r"^ {6,}\S", line):
            res.append(line[7:])
        elif on:
            break
    return res


def main(argv):
    attn = argv[1]
    doc = argv[2] if len(argv) > 2 else "docs/cli.md"
    lines = []
    for comment, args in GROUPS:
        lines += ["# " + comment] + synopsis(attn, args)
    lines.append("attn --version")
    text = open(doc, encoding="utf-8").read()
    i = text.index("## Commands")
    j = text.index("```sh", i)
    k = text.index("```", j + 5)
    open(doc, "w", encoding="utf-8").write(text[:j] + "```sh\n" + "\n".join(lines) + "\n" +
                                           text[k:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
