"""Shared set-up of the Python package's tests (run by ctest: tests/python/*.py,
one entry per file; see CMakeLists.txt). The package comes from python/ and
the library from $ATTN_LIBRARY (ctest names the build's libattn.so); $ATTN_BIN
is the build's attn program, the reference for generation and --version."""
import os
import subprocess
import sys

import pytest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(1, os.path.join(SRC, "scripts"))  # gen_seed004_fixtures: seed 004's classes
ATTN_BIN = os.environ.get("ATTN_BIN", os.path.join(SRC, "build", "attn"))

# attn before numpy: OpenBLAS then runs the kernels the attn program runs
# (docs/engines.md), so the pages and numbers compared with it are the same.
import attn  # noqa: E402,F401

# The chapter's "Your journey starts with one step" (seed 000, In [1]).
INPUTS = [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
          [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]


def corpus_text(lines=60):
    return "".join(f"First Citizen: before we proceed any further, hear me speak {i % 7}.\n"
                   "All: speak, speak! you are all resolved rather to die than to famish?\n"
                   for i in range(lines))


@pytest.fixture(scope="session")
def attn_bin():
    if not os.access(ATTN_BIN, os.X_OK):
        pytest.fail(f"no attn program at {ATTN_BIN} (set ATTN_BIN)")
    return ATTN_BIN


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_text(corpus_text())
    return path


TINY = {"context_length": 24, "emb_dim": 24, "n_heads": 3, "n_layers": 2, "drop_rate": 0.1}
TINY_KEYS = dict(max_steps=12, batch_size=4, eval_interval=6, eval_iters=1, warmup_steps=2)


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory, corpus):
    """A tiny model trained for 12 steps by attn.train (no progress bar)."""
    import attn
    out = tmp_path_factory.mktemp("ckpt") / "run"
    attn.train(preset="tiny", config=TINY, data=corpus, out=out, progress=False, **TINY_KEYS)
    return out


def run_attn(*args):
    return subprocess.run([ATTN_BIN, *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
