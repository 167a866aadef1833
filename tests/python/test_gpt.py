"""attn.GPT, attn.train and attn.viz: training stopped by the callback and
resumed equals an uninterrupted run; generate equals `attn generate` (fp32
and bf16 weights);
attention() equals the book's GPTModel's softmax weights; to_torch() gives
the book's model with the same logits and loss; the inline page is `attn
viz`'s; bad inputs raise attn.Error with the library's message."""
import filecmp
import re

import numpy as np
import pytest
import torch

import attn
from conftest import TINY, TINY_KEYS, run_attn


def test_train_stopped_then_resumed_equals_uninterrupted(tmp_path, corpus):
    full = attn.train(preset="tiny", config=TINY, data=corpus, out=tmp_path / "a", progress=False,
                      **TINY_KEYS)
    assert full.step == 12 and not full.stopped
    assert [s for s, _, _ in full.history] == list(range(1, 13))
    assert [e[0] for e in full.evals] == [0, 6, 12]
    seen = []
    part = attn.train(preset="tiny", config=TINY, data=corpus, out=tmp_path / "b", progress=False,
                      on_step=lambda step, loss, lr: seen.append((step, loss, lr)) or step == 5,
                      **TINY_KEYS)
    assert part.stopped and part.step == 5 and [s for s, _, _ in seen] == [1, 2, 3, 4, 5]
    assert seen == full.history[:5]  # the callback sees step, loss, lr
    assert part.out == str(tmp_path / "b")
    rest = attn.train(out=tmp_path / "b", resume=True, progress=False)
    assert rest.step == 12 and not rest.stopped
    assert rest.history == full.history[5:]
    assert filecmp.cmp(tmp_path / "a" / "model.safetensors", tmp_path / "b" / "model.safetensors",
                       shallow=False), "stopped + resumed != uninterrupted"
    # attn train --resume continues a run attn.train made (and the reverse).
    r = run_attn("train", "--out", tmp_path / "b", "--resume", "--steps", 14)
    assert r.returncode == 0, r.stderr
    assert attn.GPT.load(tmp_path / "b").step == 14


def test_train_errors_and_exceptions(tmp_path, corpus):
    with pytest.raises(attn.Error, match="unknown training key 'max_stepz'"):
        attn.train(preset="tiny", data=corpus, out=tmp_path / "x", max_stepz=3)
    with pytest.raises(attn.Error, match=r"batch_size must be an integer in \[1, .*\(got 0\)"):
        attn.train(preset="tiny", data=corpus, out=tmp_path / "x", batch_size=0)
    with pytest.raises(attn.Error, match="no-such-preset"):
        attn.train(preset="no-such-preset", data=corpus, out=tmp_path / "x")
    with pytest.raises(attn.Error, match="/no/such/corpus.txt"):
        attn.train(preset="tiny", data="/no/such/corpus.txt", out=tmp_path / "x")
    # An exception in the callback stops the run, which saves, then it is raised.

    def boom(step, loss, lr):
        if step == 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        attn.train(preset="tiny", config=TINY, data=corpus, out=tmp_path / "k", progress=False,
                   on_step=boom, **TINY_KEYS)
    assert attn.GPT.load(tmp_path / "k").step == 3
    with pytest.raises(attn.Error, match="holds a checkpoint"):
        attn.train(preset="tiny", config=TINY, data=corpus, out=tmp_path / "k", progress=False,
                   **TINY_KEYS)


def test_generate_equals_attn_generate(checkpoint):
    with attn.GPT.load(checkpoint) as gpt:
        for kw, args in (({"seed": 7}, ["--seed", 7]),
                         ({"seed": 3, "temperature": 0.0}, ["--seed", 3, "--temperature", 0]),
                         ({"seed": 9, "top_k": 5, "top_p": 0.9, "stop": "e"},
                          ["--seed", 9, "--top-k", 5, "--top-p", 0.9, "--stop", "e"])):
            text = gpt.generate("First Citizen", 60, **kw)
            r = run_attn("generate", "--checkpoint", checkpoint, "--prompt", "First Citizen",
                         "--max-new-tokens", 60, *args)
            assert r.returncode == 0, r.stderr
            assert r.stdout == text + "\n"
        # bf16 weights with fp32 sums, on any CPU: `attn generate --precision bf16`'s text
        for kw, args in (({"seed": 7}, ["--seed", 7]),
                         ({"temperature": 0.0}, ["--temperature", 0])):
            text = gpt.generate("First Citizen", 60, precision="bf16", **kw)
            r = run_attn("generate", "--checkpoint", checkpoint, "--prompt", "First Citizen",
                         "--max-new-tokens", 60, "--precision", "bf16", *args)
            assert r.returncode == 0, r.stderr
            assert r.stdout == text + "\n"
        for bad in ("bf8", "BF16", 1, None):
            with pytest.raises(attn.Error, match="precision must be 'fp32' or 'bf16'"):
                gpt.generate("First", 5, precision=bad)
        pieces = list(gpt.generate_iter("First", 10, seed=7))
        assert len(pieces) == 10 and "First" + "".join(pieces) == gpt.generate("First", 10, seed=7)
        assert gpt.generate("First", 0) == "First"


def softmax_weights(model, ids):
    """Every torch.softmax output of the book's model on ids (its attention)."""
    caught, real = [], torch.softmax

    def spy(*a, **k):
        out = real(*a, **k)
        caught.append(out.detach().clone())
        return out
    torch.softmax = spy
    try:
        with torch.no_grad():
            logits = model(ids)
    finally:
        torch.softmax = real
    return caught, logits


def test_attention_and_to_torch_equal_the_book(checkpoint):
    gpt = attn.GPT.load(checkpoint)
    prompt = "First Citizen: before we"
    w = gpt.attention(prompt)
    L, H, T = gpt.config["n_layers"], gpt.config["n_heads"], len(prompt)
    assert w.shape == (L, H, T, T)
    model = gpt.to_torch()
    ids = torch.from_numpy(gpt.encode(prompt))[None]
    caught, logits = softmax_weights(model, ids)
    assert len(caught) == L
    for layer in range(L):
        assert np.abs(w[layer] - caught[layer][0].numpy()).max() <= 1e-5
    assert np.abs(gpt.forward(ids.numpy()) - logits.numpy()).max() <= 1e-4
    assert np.array_equal(gpt.forward(ids[0].numpy()), gpt.forward(ids.numpy())[0])
    targets = torch.from_numpy(gpt.encode("irst Citizen: before we "))[None]
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    assert abs(gpt.loss(ids.numpy(), targets.numpy()) - ref.item()) <= 1e-5
    assert list(gpt.state_dict()) == list(model.state_dict())  # the mask buffers too


def test_viz_inline_page(checkpoint, tmp_path):
    v = attn.viz(checkpoint, "First Citizen", generate=6, seed=7)
    page = v.html
    assert page.startswith("<!DOCTYPE html>") and 'id="attn-data"' in page
    r = run_attn("viz", "--checkpoint", checkpoint, "--prompt", "First Citizen", "--generate", 6,
                 "--seed", 7, "--out", tmp_path / "cli.html")
    assert r.returncode == 0, r.stderr
    data = re.compile(r'<script type="application/json" id="attn-data">(.*?)</script>', re.S)
    cli = (tmp_path / "cli.html").read_text()
    assert data.search(page).group(1).replace(str(checkpoint), "") == \
        data.search(cli).group(1).replace(str(checkpoint), "")
    inline = v._repr_html_()
    assert inline.startswith("<iframe") and 'srcdoc="' in inline and "<script" not in inline
    assert not re.search(r'(src|href)="(https?:)?//', page)
    v.save(tmp_path / "saved.html")
    assert (tmp_path / "saved.html").read_text() == page
    with attn.GPT.load(checkpoint) as gpt:  # a GPT works as well as a folder
        assert data.search(attn.viz(gpt, "First", seed=1).html)


def test_bad_inputs(checkpoint, tmp_path):
    with pytest.raises(attn.Error, match="/no/such/run") as e:
        attn.GPT.load("/no/such/run")
    assert e.value.status in ("not found", "I/O error", "io")
    gpt = attn.GPT.load(checkpoint)
    V, ctx = gpt.config["vocab_size"], gpt.config["context_length"]
    with pytest.raises(attn.Error, match=r"position \(0, 1\)|\(b, t\) = \(0, 1\)|outside"):
        gpt.forward([[0, V]])
    with pytest.raises(attn.Error, match=f"context_length = {ctx}"):
        gpt.forward(np.zeros((1, ctx + 1), np.int64))
    with pytest.raises(attn.Error, match="must hold integers, got dtype float64"):
        gpt.forward(np.zeros((1, 4)))
    with pytest.raises(attn.Error, match=r"must be \(B, T\) or \(T,\)"):
        gpt.forward(np.zeros((1, 2, 3), np.int64))
    with pytest.raises(attn.Error, match="character 'Z' at position 2"):
        gpt.attention("FiZ")
    with pytest.raises(attn.Error, match="targets must be shaped as ids"):
        gpt.loss([1, 2, 3], [1, 2])
    with pytest.raises(attn.Error, match="Z"):
        gpt.generate("Z", 5)
    with pytest.raises(attn.Error, match="temperature"):
        gpt.generate("F", 5, temperature=-1)
    with pytest.raises(attn.Error, match="generate asks for"):
        attn.viz(gpt, "First", generate=ctx)
    it = gpt.generate_iter("First", 10)
    next(it)
    gpt.close()  # while an iterator is drawing from it
    with pytest.raises(attn.Error, match="GPT is closed"):
        next(it)
    for call in (lambda: gpt.forward([1]), lambda: gpt.generate("F", 1), gpt.state_dict,
                 lambda: attn.viz(gpt, "F")):
        with pytest.raises(attn.Error, match="GPT is closed"):
            call()
