"""GPT-2 weight files from elsewhere, read by attn (attn/weights_format.h),
against PyTorch live: random weights written as HF GPT2LMHeadModel
safetensors (with config.json, tied and untied), as llm.c's .bin and with
the book's state_dict names; `attn forward gpt` on each gives GPT-2's logits
(an independent torch forward: Conv1D x @ W + b, fused qkv split, tanh GELU,
LayerNorm eps 1e-5, tied head) within 1e-5, and greedy decoding picks the
same 10 tokens. The files are written here, by a small safetensors writer
and numpy: no safetensors or transformers package is needed. Skipped (77)
without torch (run_pytest.sh)."""
import json
import math
import struct

import numpy as np
import pytest
import torch

from conftest import run_attn

V, T, C, L, H = 100, 32, 48, 2, 4


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> float32 array, in order; contiguous, header padded to 8."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_gpt2(seed, tied=True):
    """HF GPT2LMHeadModel's state_dict (Conv1D weights [in, out]) as numpy."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, std=0.2, mean=0.0):
        return (torch.randn(*shape, generator=g) * std + mean).numpy()

    sd = {"transformer.wte.weight": rnd(V, C, std=0.3), "transformer.wpe.weight": rnd(T, C)}
    for i in range(L):
        p = f"transformer.h.{i}."
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = rnd(C, mean=1.0), rnd(C)
        sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"] = rnd(C, 3 * C), rnd(3 * C)
        sd[p + "attn.c_proj.weight"], sd[p + "attn.c_proj.bias"] = rnd(C, C), rnd(C)
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = rnd(C, mean=1.0), rnd(C)
        sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"] = rnd(C, 4 * C), rnd(4 * C)
        sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"] = rnd(4 * C, C), rnd(C)
    sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"] = rnd(C, mean=1.0), rnd(C)
    if not tied:
        sd["lm_head.weight"] = rnd(V, C, std=0.3)
    return sd


def gpt2_logits(sd, ids):
    """GPT2LMHeadModel's forward, written out (float64)."""
    w = {k: torch.from_numpy(v).double() for k, v in sd.items()}
    ids = torch.as_tensor(ids)
    B, n = ids.shape
    D = C // H

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], 1e-5)

    def gelu(x):  # GPT-2's tanh form
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:n]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
    for i in range(L):
        p = f"transformer.h.{i}."
        qkv = ln(x, p + "ln_1") @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(B, n, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
        s = (q @ k.transpose(-2, -1) / math.sqrt(D)).masked_fill(mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, n, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = gelu(ln(x, p + "ln_2") @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    head = w.get("lm_head.weight", w["transformer.wte.weight"])
    return (ln(x, "transformer.ln_f") @ head.T).numpy()


def write_hf(folder, sd, prefix="transformer."):
    """GPT2LMHeadModel's file, or (prefix "") with GPT2Model's names."""
    folder.mkdir()
    hf = {k.replace("transformer.", prefix): v for k, v in sd.items()}
    for i in range(L):  # older save_pretrained files carry the mask buffers
        hf[f"{prefix}h.{i}.attn.bias"] = np.tril(np.ones((1, 1, T, T), np.float32))
    write_safetensors(folder / "model.safetensors", hf, {"format": "pt"})
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "gpt2", "n_head": H, "n_embd": C, "n_layer": L, "n_positions": T,
         "vocab_size": V, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}))
    return folder / "model.safetensors"


def write_llmc(path, sd):
    """llm.c's gpt2 .bin: int32 header, then its tensors, Linear layout (out, in)."""
    Vp = (V + 127) // 128 * 128
    header = np.zeros(256, np.int32)
    header[:8] = [20240326, 3, T, V, L, H, C, Vp]
    wte = np.zeros((Vp, C), np.float32)
    wte[:V] = sd["transformer.wte.weight"]

    def stack(name, t=False):
        return np.stack([sd[f"transformer.h.{i}.{name}"].T if t else sd[f"transformer.h.{i}.{name}"]
                         for i in range(L)])

    parts = [wte, sd["transformer.wpe.weight"], stack("ln_1.weight"), stack("ln_1.bias"),
             stack("attn.c_attn.weight", True), stack("attn.c_attn.bias"),
             stack("attn.c_proj.weight", True), stack("attn.c_proj.bias"),
             stack("ln_2.weight"), stack("ln_2.bias"), stack("mlp.c_fc.weight", True),
             stack("mlp.c_fc.bias"), stack("mlp.c_proj.weight", True), stack("mlp.c_proj.bias"),
             sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(header.astype("<i4").tobytes())
        for a in parts:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    return path


def write_book(path, sd, pth=False):
    """The book's GPTModel.state_dict() names, as its load_weights_into_gpt
    fills them (out_head = wte), with its mask buffers."""
    book = {"tok_emb.weight": sd["transformer.wte.weight"],
            "pos_emb.weight": sd["transformer.wpe.weight"]}
    for i in range(L):
        p, b = f"transformer.h.{i}.", f"trf_blocks.{i}."
        qw = np.split(sd[p + "attn.c_attn.weight"], 3, axis=1)
        qb = np.split(sd[p + "attn.c_attn.bias"], 3)
        for j, n in enumerate(["W_query", "W_key", "W_value"]):
            book[b + f"att.{n}.weight"], book[b + f"att.{n}.bias"] = qw[j].T, qb[j]
        book[b + "att.mask"] = np.triu(np.ones((T, T), np.float32), 1)
        book[b + "att.out_proj.weight"] = sd[p + "attn.c_proj.weight"].T
        book[b + "att.out_proj.bias"] = sd[p + "attn.c_proj.bias"]
        book[b + "ff.layers.0.weight"] = sd[p + "mlp.c_fc.weight"].T
        book[b + "ff.layers.0.bias"] = sd[p + "mlp.c_fc.bias"]
        book[b + "ff.layers.2.weight"] = sd[p + "mlp.c_proj.weight"].T
        book[b + "ff.layers.2.bias"] = sd[p + "mlp.c_proj.bias"]
        for n, hf in [("norm1", "ln_1"), ("norm2", "ln_2")]:
            book[b + n + ".scale"], book[b + n + ".shift"] = sd[p + hf + ".weight"], sd[p + hf + ".bias"]
    book["final_norm.scale"] = sd["transformer.ln_f.weight"]
    book["final_norm.shift"] = sd["transformer.ln_f.bias"]
    book["out_head.weight"] = sd["transformer.wte.weight"]
    if pth:  # as the book saves it: torch.save(model.state_dict(), "model.pth")
        import collections
        import torch
        torch.save(collections.OrderedDict((k, torch.from_numpy(np.ascontiguousarray(v)))
                                           for k, v in book.items()), path)
    else:
        write_safetensors(path, book)
    return path


def attn_logits(weights, ids, tmp, extra=()):
    np.save(tmp / "ids.npy", np.asarray(ids, np.int64))
    r = run_attn("forward", "gpt", weights, "--input", tmp / "ids.npy", "--output",
                 tmp / "logits.npy", *extra)
    assert r.returncode == 0, r.stderr
    return np.load(tmp / "logits.npy")


def greedy(step, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(step(ids)[0, -1])))
    return ids[len(prompt):]


CASES = [("hf", True, ()), ("hf-untied", False, ()), ("hf-gpt2model", True, ()),
         ("llmc", True, ()), ("book", True, ("--n-heads", str(H))),
         ("book-pth", True, ("--n-heads", str(H)))]


@pytest.mark.parametrize("name,tied,extra", CASES, ids=[c[0] for c in CASES])
def test_logits_and_greedy_match_torch(tmp_path, attn_bin, name, tied, extra):
    sd = random_gpt2(seed=len(name) + 7 * tied, tied=tied)
    if name.startswith("hf"):
        path = write_hf(tmp_path / "hf", sd, "" if name == "hf-gpt2model" else "transformer.")
    elif name == "llmc":
        path = write_llmc(tmp_path / "gpt2.bin", sd)
    elif name == "book-pth":
        path = write_book(tmp_path / "model.pth", sd, pth=True)
    else:
        path = write_book(tmp_path / "book.safetensors", sd)
    ids = np.random.default_rng(5).integers(0, V, size=(2, T))
    ref = gpt2_logits(sd, ids)
    got = attn_logits(path, ids, tmp_path, extra)
    assert got.shape == (2, T, V)
    assert np.abs(got - ref).max() < 1e-5, np.abs(got - ref).max()
    prompt = [3, 14, 15, 92, 65]
    want = greedy(lambda s: gpt2_logits(sd, [s]), prompt, 10)
    assert greedy(lambda s: attn_logits(path, [s], tmp_path, extra), prompt, 10) == want


def test_export_book_pth_is_what_torch_load_reads(tmp_path, attn_bin):
    """attn export --format book writes the book's torch.save file: torch.load
    (weights_only too) gives the book's state_dict, masks included, and the
    values of the weights exported."""
    import torch
    sd = random_gpt2(seed=3, tied=True)
    src = write_hf(tmp_path / "hf", sd)
    r = run_attn("export", src, tmp_path / "model.pth", "--format", "book")
    assert r.returncode == 0, r.stderr
    got = torch.load(tmp_path / "model.pth", weights_only=True)
    assert len(got) == 2 + L * 17 + 3  # embeddings; per block 16 tensors and the mask; norm, head
    assert list(got)[:3] == ["tok_emb.weight", "pos_emb.weight", "trf_blocks.0.att.mask"]
    assert torch.equal(got["trf_blocks.0.att.mask"], torch.triu(torch.ones(T, T), diagonal=1))
    assert np.array_equal(got["tok_emb.weight"].numpy(), sd["transformer.wte.weight"])
    assert np.array_equal(got["out_head.weight"].numpy(), sd["transformer.wte.weight"])
    q = sd["transformer.h.0.attn.c_attn.weight"][:, :C].T
    assert np.array_equal(got["trf_blocks.0.att.W_query.weight"].numpy(), q)


GPT2_FILES = __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "gpt2"


@pytest.mark.parametrize("fmt", ["hf", "llmc", "book-pth"])
def test_gpt_load_reads_gpt2_files(tmp_path, monkeypatch, fmt):
    """attn.GPT.load takes HF, llm.c and the book's .pth GPT-2 weights (at
    GPT-2's vocabulary of 50,257) with GPT-2's tokenizer: logits within
    1e-5 of the independent torch forward, text round-trips."""
    import sys
    import attn
    if not (GPT2_FILES / "encoder.json").is_file():
        pytest.skip("no GPT-2 vocabulary files in data/gpt2 (scripts/get-data.sh gpt2)")
    monkeypatch.setattr(sys.modules[__name__], "V", 50257)
    monkeypatch.setenv("ATTN_GPT2_DIR", str(GPT2_FILES))
    sd = random_gpt2(seed=11, tied=True)
    if fmt == "hf":
        path = write_hf(tmp_path / "hf", sd)
    elif fmt == "llmc":
        path = write_llmc(tmp_path / "gpt2.bin", sd)
    else:
        path = write_book(tmp_path / "model.pth", sd, pth=True)
    ids = np.random.default_rng(2).integers(0, 50257, size=(1, T))
    ref = gpt2_logits(sd, ids)
    gpt = attn.GPT.load(path, n_heads=H if fmt == "book-pth" else None)
    try:
        got = gpt.forward(ids)
        assert np.abs(got - ref).max() < 1e-5, np.abs(got - ref).max()
        assert gpt.decode(gpt.encode("Every effort moves you")) == "Every effort moves you"
    finally:
        gpt.close()
    with pytest.raises(attn.Error, match="n_heads"):
        attn.GPT.load(path, n_heads=H + 1) if fmt != "book-pth" else \
            attn.GPT.load(write_book(tmp_path / "m2.pth", sd, pth=True))
