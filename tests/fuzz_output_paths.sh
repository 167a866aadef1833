#!/usr/bin/env bash
# Fuzz of the one output check (issue 31): random relative and absolute
# paths, links and hard links into and out of a run folder, for viz --out /
# --svg, forward --output / --save-weights, forward gpt --output, chapter3
# --figures, train --out, Python's View.save and export OUT. A bounded number of tries
# (ATTN_FUZZ_N, default 300) from a fixed seed (ATTN_FUZZ_SEED, printed).
# After every try: the run folder's entries and bytes, and every input, are
# as before; a refusal exits 2 (or 1) with a message naming attn.
# Usage: bash fuzz_output_paths.sh <path-to-attn> <source-dir>
set -u
ATTN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "${2:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/support/lib.sh"
cd "$tmp" || exit 1

make_corpus corpus.txt
cat > cfg.json <<'JSON'
{"context_length": 16, "emb_dim": 16, "n_heads": 2, "n_layers": 1, "drop_rate": 0.1,
 "batch_size": 2, "max_steps": 20, "eval_interval": 10, "eval_iters": 1,
 "log_interval": 1, "warmup_steps": 2}
JSON
"$ATTN" train --data "$tmp/corpus.txt" --config cfg.json --threads 1 --out RUN > /dev/null 2>&1 ||
  { bad "training the run failed"; exit 1; }
mkdir -p RUN/mine && echo "a user's notes" > RUN/mine/notes.txt
printf '\x93NUMPY\x01\x00\x76\x00' > ids.npy
printf "%-117s\n" "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 4), }" >> ids.npy
head -c 32 /dev/zero >> ids.npy
{
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3), }"
  head -c 96 /dev/zero
} > x.npy
# Python's save as the suite runs Python (tests/python/pyenv.sh: this build's
# library, and the sanitizer runtimes first when it is a sanitized build).
. "$SRC/tests/python/pyenv.sh"
pyenv "$SRC" "$(dirname "$ATTN")/libattn.so"
PY_PRELOAD=
PY_ASAN=
if [ "${PY[0]}" = env ]; then PY_PRELOAD=${PY[1]#LD_PRELOAD=}; PY_ASAN=${PY[2]#ASAN_OPTIONS=}; fi
export PY_PRELOAD PY_ASAN
PYX=/usr/bin/python3
"$PYX" -c "import numpy" 2> /dev/null && pysave=1 || pysave=0

ATTN="$ATTN" SRC="$SRC" PYSAVE=$pysave PYEXE="$PYX" python3 - <<'PYDRIVER'
import hashlib, os, random, subprocess, sys

attn, src = os.environ["ATTN"], os.environ["SRC"]
seed = int(os.environ.get("ATTN_FUZZ_SEED", "31"))
n_tries = int(os.environ.get("ATTN_FUZZ_N", "300"))
print(f"fuzz_output_paths: seed {seed}, {n_tries} tries")
rng = random.Random(seed)
top = os.getcwd()
live = sorted(d for d in os.listdir("RUN") if d.startswith("ckpt-"))[0]
INPUTS = ["corpus.txt", "ids.npy", "x.npy", "cfg.json"]


INPUTS_OF = {"viz": [], "viz-svg": [], "forward": ["x.npy"], "forward-gpt": ["ids.npy"],
             "chapter3": [], "export": ["corpus.txt"], "train": ["corpus.txt", "cfg.json"]}


def restore_others(kind):
    """Files that are no input of this command are fair outputs: put them back."""
    for p in INPUTS:
        if p not in INPUTS_OF[kind] and os.path.exists(p) and \
                open(p, "rb").read() != open("orig/" + p, "rb").read():
            os.unlink(p)  # a new file, not a write through a hard link of it
            with open(p, "wb") as f:
                f.write(open("orig/" + p, "rb").read())


def snap():
    """Every entry of RUN (type, link target) and every file's bytes, and the inputs'."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk("RUN"):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            if n == ".lock":
                continue
            h.update(p.encode())
            if os.path.islink(p):
                h.update(b"L" + os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    for p in INPUTS:
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def fixtures():
    """Links into and out of the run (made again when a try replaced one)."""
    os.makedirs("out/sub", exist_ok=True)
    links = {"out/l_run": "../RUN", "out/l_best": "../RUN/best", f"out/l_live": f"../RUN/{live}",
             "out/l_model": "../RUN/model.safetensors", "out/l_loss": "../RUN/loss.csv",
             "out/d_run": "../RUN/new-file", "out/l_corpus": "../corpus.txt",
             "out/l_out": "sub", "RUN/mine/l_back": "../../out"}
    for p, t in links.items():
        if not os.path.islink(p):
            if os.path.lexists(p):
                if os.path.isdir(p) and not os.path.islink(p):
                    continue
                os.unlink(p)
            os.symlink(t, p)
    for p, t in {"out/h_loss": "RUN/loss.csv", "out/h_corpus": "corpus.txt", "out/h_x": "x.npy"}.items():
        try:
            if not os.path.lexists(p):
                os.link(t, p)
        except OSError:
            pass


BASES = ["RUN", "RUN/best", f"RUN/{live}", "RUN/mine", "RUN/best/../mine", "out", "out/sub",
         "out/l_run", "out/l_best", "out/l_live", "out/l_out", "RUN/mine/l_back", ".", "out/new",
         "out//sub/.", "out/sub/../../RUN"]
NAMES = ["model.safetensors", "train_state.safetensors", "loss.csv", "loss.svg", ".attn-run",
         ".lock", "latest", "x.html", "y.npy", "w.st", "l_model", "l_loss", "d_run", "h_loss",
         "h_corpus", "h_x", "l_corpus", "corpus.txt", "x.npy", "ids.npy", "new", "figs", "", "."]


def rand_path():
    p = rng.choice(BASES)
    name = rng.choice(NAMES)
    if name:
        p = p + "/" + name
    if rng.random() < 0.3:
        p = os.path.join(top, p)
    if rng.random() < 0.1:
        p = p.replace("/", "//", 1)
    return p


def in_run(p):
    """Whether a write to p lands in the run folder (links followed)."""
    r = os.path.realpath(p)
    run = os.path.realpath("RUN")
    return r == run or r.startswith(run + "/")


def command(kind, p, q):
    if kind == "viz":
        return [attn, "viz", "--checkpoint", "RUN", "--prompt", "ab", "--out", p]
    if kind == "viz-svg":
        return [attn, "viz", "--checkpoint", "RUN", "--prompt", "ab", "--layer", "0", "--head", "0",
                "--svg", p, "--out", q]
    if kind == "forward":
        return [attn, "forward", "mha", "--d-out", "4", "--heads", "2", "--input", "x.npy",
                "--output", p, "--save-weights", q]
    if kind == "forward-gpt":
        return [attn, "forward", "gpt", "--checkpoint", "RUN", "--input", "ids.npy", "--output", p]
    if kind == "export":
        return [attn, "export", "RUN", p, "--format", "book"]
    if kind == "chapter3":
        return [attn, "chapter3", "--figures", p]
    return [attn, "train", "--data", "corpus.txt", "--config", "cfg.json", "--threads", "1",
            "--steps", "2", "--out", p] + (["--resume"] if rng.random() < 0.3 else []) + \
           (["--force"] if rng.random() < 0.3 else [])


fails = 0
os.makedirs("orig", exist_ok=True)
for p in INPUTS:
    with open("orig/" + p, "wb") as f:
        f.write(open(p, "rb").read())
base = None
fixtures()
base = snap()
counts = {}
py_paths = []
def attempt(i, kind, p, q):
    """Run one try; a changed run or input, a bad exit or an accepted path in the run fails."""
    global base, fails
    r = subprocess.run(command(kind, p, q), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=120)
    err = r.stderr.decode("utf-8", "replace")
    restore_others(kind)
    key = (kind, r.returncode)
    counts[key] = counts.get(key, 0) + 1
    now = snap()
    why = None
    if now != base:
        why = "the run folder or an input changed"
    elif r.returncode not in (0, 1, 2):
        why = f"exit {r.returncode}"
    elif r.returncode != 0 and "attn" not in err:
        why = "a refusal without a message"
    elif r.returncode == 0 and kind != "train" and in_run(p):
        why = "accepted an output inside the run folder"
    if why:
        fails += 1
        print(f"FAIL - try {i}: {' '.join(command(kind, p, q)[1:])}: {why}; rc {r.returncode} {err[:300]}")
        base = now
    fixtures()
    base = snap() if not why else base


for i in range(n_tries):
    kind = rng.choice(["viz", "viz", "viz-svg", "forward", "forward", "forward-gpt", "chapter3",
                       "train", "python"])
    p, q = rand_path(), rand_path()
    if kind.startswith("viz") and p.endswith(".svg"):
        p += ".html"
    if kind == "python":
        py_paths.append(p)
        continue
    while kind == "train" and os.path.realpath(p) == os.path.realpath("RUN"):
        p = rand_path()  # the run's own trainer may write there
    attempt(i, kind, p, q)

if os.environ.get("PYSAVE") == "1" and py_paths:
    code = ("import sys, attn\nv = attn.viz('RUN', 'ab')\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n        v.save(p); print('wrote', p)\n"
            "    except (attn.Error, OSError):\n        print('refused', p)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(src, "python"),
               ATTN_LIBRARY=os.path.join(os.path.dirname(attn), "libattn.so"))
    if os.environ.get("PY_PRELOAD"):  # a sanitized library: its runtimes first
        env.update(LD_PRELOAD=os.environ["PY_PRELOAD"], ASAN_OPTIONS=os.environ["PY_ASAN"])
    r = subprocess.run([os.environ["PYEXE"], "-c", code] + py_paths, env=env,
                       capture_output=True, text=True, timeout=300)
    wrote = [l[6:] for l in r.stdout.splitlines() if l.startswith("wrote ")]
    refused = [l for l in r.stdout.splitlines() if l.startswith("refused ")]
    bad_in = [p for p in wrote if in_run(p)]
    restore_others("viz")
    if r.returncode != 0 or snap() != base or bad_in:
        fails += 1
        print(f"FAIL - Python save: rc {r.returncode}, in the run: {bad_in} {r.stderr[-500:]}")
    counts[("python-save", "refused")] = len(refused)
    counts[("python-save", "wrote")] = len(wrote)

# attn export OUT, after the rest and from its own generator (the tries
# above stay those of the seed).
rng = random.Random(seed + 1000)
for i in range(max(1, n_tries // 10)):
    attempt(f"export {i}", "export", rand_path(), None)

for k in sorted(counts, key=str):
    print(f"  {k[0]:12s} {str(k[1]):8s} {counts[k]}")
print("ok   - fuzz: the run folder and every input unchanged" if fails == 0 else
      f"FAIL - fuzz: {fails} tries failed (seed {seed})")
sys.exit(1 if fails else 0)
PYDRIVER
