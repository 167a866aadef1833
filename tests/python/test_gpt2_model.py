"""A GPT-2-tokenizer model in the Python package: attn.GPT on a checkpoint
of a shrunken gpt2-124m (it carries its tokenizer) encodes as tiktoken's
gpt2 (attn.tokenizer, itself checked against tiktoken), decodes bytes with
errors="replace", and generates what `attn generate` prints; the run's
train/val split is the book's (the first 90% of the characters, each part
encoded on its own with <|endoftext|> allowed); and attn_utf8_display, the
C side of showing bytes, gives Python's bytes.decode(errors="replace") for
any bytes fed in any pieces. PyTorch's GPTModel loads the checkpoint's
tensors (the tokenizer is metadata) and gives attn's logits."""
import ctypes
import json
import os
import random
import re
import subprocess

import pytest

import attn
import attn.tokenizer
from conftest import ATTN_BIN, SRC, corpus_text

VOCAB = next((d for d in (os.path.join(SRC, "data", "gpt2"),
                          os.path.join(SRC, "..", "shared", "data", "gpt2"))
              if os.path.exists(os.path.join(d, "vocab.bpe"))), None)
pytestmark = pytest.mark.skipif(VOCAB is None, reason="no GPT-2 vocabulary (scripts/get-data.sh gpt2)")

TEXT = corpus_text(30) + "Café déjà vu — “naïve” 東京.\n<|endoftext|>\n" + corpus_text(10)
SMALL = '{"emb_dim": 32, "n_layers": 2, "n_heads": 2, "context_length": 32}'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpt2")
    (d / "corpus.txt").write_text(TEXT, encoding="utf-8")
    (d / "small.json").write_text(SMALL)
    r = subprocess.run([ATTN_BIN, "train", "--preset", "gpt2-124m", "--config", d / "small.json",
                        "--data", d / "corpus.txt", "--out", d / "run", "--steps", "3",
                        "--threads", "1"], capture_output=True, text=True,
                       env=dict(os.environ, ATTN_GPT2_DIR=os.path.abspath(VOCAB)))
    assert r.returncode == 0, r.stderr
    return d / "run", r.stdout + r.stderr


@pytest.fixture(scope="module")
def enc():
    return attn.tokenizer.Encoding.from_files(os.path.join(VOCAB, "encoder.json"),
                                              os.path.join(VOCAB, "vocab.bpe"))


def test_split_is_the_books(run, enc):
    # gpt_train.py: split_idx = int(0.9 * len(text)); each part its own GPTDatasetV1.
    split = int(0.9 * len(TEXT))
    n_train = len(enc.encode(TEXT[:split], allowed_special={"<|endoftext|>"}))
    n_val = len(enc.encode(TEXT[split:], allowed_special={"<|endoftext|>"}))
    m = re.search(r"(\d+) train / (\d+) val tokens", run[1])
    assert m and (int(m.group(1)), int(m.group(2))) == (n_train, n_val), run[1]


def test_load_encode_decode(run, enc, monkeypatch):
    monkeypatch.setenv("ATTN_GPT2_DIR", "/nonexistent")  # the checkpoint is self-contained
    with attn.GPT.load(run[0]) as g:
        assert g.tokenizer == "gpt2" and g.vocabulary is None
        assert g.config["vocab_size"] == 50257
        text = "Café déjà vu — 東京 <|endoftext|> done"
        ids = g.encode(text)
        assert ids.tolist() == enc.encode(text, disallowed_special=())
        assert g.encode(text, allowed_special=True).tolist() == \
            enc.encode(text, allowed_special={"<|endoftext|>"})
        assert g.decode(ids) == text
        # "’" is two tokens; one alone is a cut character.
        quote = enc.encode("’")
        assert len(quote) == 2 and g.decode(quote) == "’"
        assert g.decode_bytes(quote[:1]) == "’".encode()[:len(g.decode_bytes(quote[:1]))]
        assert g.decode(quote[:1]) == "’".encode()[:2].decode("utf-8", "replace")
        assert g.attention("First Citizen").shape == (2, 2, 2, 2)


def test_pytorch_loads_the_file(run):
    # The tokenizer is metadata: the file's tensors are the state_dict of the
    # book's GPTModel with gpt2-124m's tied head (attn.variants; all of it but
    # the mask buffers and out_head.weight, which is tok_emb.weight), and its
    # logits are attn's.
    import numpy as np
    import torch
    from gpt_parity import st_read
    from attn.variants import gpt_model
    tensors, meta = st_read(os.path.join(run[0], "model.safetensors"))
    assert meta["tokenizer"] == "gpt2" and "vocabulary" not in meta
    cfg = json.loads(meta["config"])
    assert cfg["qkv_bias"] and cfg["tie_weights"] and cfg["init"] == "gpt2", cfg
    model = gpt_model(cfg).eval()
    assert model.out_head.weight is model.tok_emb.weight
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(v) for k, v in tensors.items()}, strict=False)
    assert not unexpected and all(k.endswith(".att.mask") or k == "out_head.weight"
                                  for k in missing), (missing, unexpected)
    ids = np.random.default_rng(0).integers(0, 50257, size=(2, 32))
    with attn.GPT.load(run[0]) as g, torch.no_grad():
        want = model(torch.from_numpy(ids)).numpy()
        got = g.forward(ids)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("prompt", ["First Citizen:", "Café 東", "<|endoftext|>"])
def test_generate_is_attn_generate(run, prompt):
    with attn.GPT.load(run[0]) as g:
        got = g.generate(prompt, 40, seed=11)
    r = subprocess.run([ATTN_BIN, "generate", run[0], "--prompt", prompt, "--max-new-tokens", "40",
                        "--seed", "11"], capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8") == got + "\n"  # valid UTF-8, the same text


def _display(lib, pieces):
    d = (ctypes.c_ubyte * 8)()  # attn_utf8_display: 4 held bytes + an int
    out = []
    for p in pieces:
        buf = ctypes.create_string_buffer(3 * len(p) + 16)
        n = lib.attn_utf8_display_put(d, p, len(p), buf)
        out.append(buf.raw[:n])
    buf = ctypes.create_string_buffer(16)
    n = lib.attn_utf8_display_end(d, buf)
    out.append(buf.raw[:n])
    return b"".join(out).decode("utf-8")  # valid UTF-8, or this raises


def test_utf8_display_is_pythons_replace():
    lib = attn._lib.lib
    lib.attn_utf8_display_put.restype = ctypes.c_size_t
    lib.attn_utf8_display_put.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.c_char_p]
    lib.attn_utf8_display_end.restype = ctypes.c_size_t
    lib.attn_utf8_display_end.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    rng = random.Random(7)
    alphabet = [b"a", b"\x00", "é".encode(), "東".encode(), "😀".encode(), b"\x80", b"\xbf",
                b"\xc0", b"\xc2", b"\xe0", b"\xe0\x80", b"\xed\xa0", b"\xf0", b"\xf0\x90",
                b"\xf4\x90", b"\xf5", b"\xff", "’".encode()[:2]]
    for _ in range(2000):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        cuts = sorted(rng.sample(range(len(data) + 1), rng.randint(0, min(4, len(data) + 1))))
        pieces = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        want = data.decode("utf-8", "replace").replace("\x00", "\ufffd")  # NUL: not shown
        assert _display(lib, pieces) == want, (data, pieces)
