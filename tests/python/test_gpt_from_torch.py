"""attn.GPT from PyTorch and back (issue 33): from_torch(model, tokenizer)
on the book's GPTModel (and on one with attn.torch's attention swapped in)
gives its logits; state_dict() has the book's keys in its order, the
att.mask buffers included, so the book's load_state_dict(strict=True) takes
it; save() writes a checkpoint that attn.GPT.load and `attn generate` read,
through attn's output check."""
import copy
import os

import numpy as np
import pytest
import torch

import attn
import attn.book as book
import attn.torch as at
from conftest import run_attn

VOCAB = "\n !',.:;?ACEFILMNORSTWabcdefghiklmnoprstuvwyz"
CFG = {"vocab_size": len(VOCAB), "context_length": 16, "emb_dim": 24, "n_heads": 3,
       "n_layers": 2, "drop_rate": 0.1, "qkv_bias": True}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(11)
    return book.GPTModel(CFG).eval()


def test_from_torch_gives_the_models_logits(model):
    gpt = attn.GPT.from_torch(model, VOCAB)
    assert gpt.config["vocab_size"] == len(VOCAB) and gpt.vocabulary == VOCAB
    assert {k: gpt.config[k] for k in CFG} == CFG
    ids = torch.from_numpy(gpt.encode("First Citizen:"))[None]
    with torch.no_grad():
        want = model(ids).numpy()
    assert np.abs(gpt.forward(ids.numpy()) - want).max() <= 1e-5
    swapped = copy.deepcopy(model)
    at.swap_attention(swapped)
    again = attn.GPT.from_torch(swapped, {c: i for i, c in enumerate(VOCAB)})
    assert np.array_equal(again.forward(ids.numpy()), gpt.forward(ids.numpy()))


def test_state_dict_loads_strictly_into_the_book(model):
    gpt = attn.GPT.from_torch(model, list(VOCAB))
    sd = gpt.state_dict()
    assert list(sd) == list(model.state_dict())
    assert sd["trf_blocks.1.att.mask"].shape == (16, 16)
    torch.manual_seed(99)
    fresh = book.GPTModel(CFG)
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    for k, v in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), k


def test_save_writes_a_checkpoint(model, tmp_path, attn_bin):
    gpt = attn.GPT.from_torch(model, VOCAB)
    path = tmp_path / "model.safetensors"
    assert gpt.save(path) == path
    loaded = attn.GPT.load(path)
    assert loaded.config == gpt.config and loaded.vocabulary == VOCAB
    for (k, a), (_, b) in zip(loaded.state_dict().items(), gpt.state_dict().items()):
        assert np.array_equal(a, b), k
    text = gpt.generate("First", 20, seed=3)
    assert loaded.generate("First", 20, seed=3) == text
    r = run_attn("generate", "--checkpoint", path, "--prompt", "First", "--max-new-tokens", 20,
                 "--seed", 3)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == text
    with pytest.raises(attn.Error, match="input"):
        loaded.save(path)  # onto the file it came from
    with pytest.raises(attn.Error, match="folder"):
        gpt.save(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".attn-run").write_text("")
    with pytest.raises(attn.Error, match="run folder"):
        gpt.save(run / "model.safetensors")
    assert not os.path.exists(run / "model.safetensors")


def test_from_torch_refuses_what_it_cannot_hold(model):
    with pytest.raises(attn.Error, match=f"vocab_size is {len(VOCAB)}"):
        attn.GPT.from_torch(model, VOCAB[:-1])
    with pytest.raises(attn.Error, match="single characters"):
        attn.GPT.from_torch(model, ["ab"] * len(VOCAB))
    with pytest.raises(attn.Error, match="not the book's GPTModel"):
        attn.GPT.from_torch(torch.nn.Linear(2, 2), VOCAB)


@pytest.mark.parametrize("how", ["name", "attn", "tiktoken-like"])
def test_from_torch_takes_gpt2s_tokenizer(how, tmp_path, attn_bin):
    """A GPT-2-vocabulary model with GPT-2's tokenizer (issue 47: it was
    refused as "not character-level"): the checkpoint carries the tokenizer,
    so attn.GPT.load and `attn generate` read it with nothing else."""
    import attn.tokenizer
    enc = attn.tokenizer.get_encoding("gpt2")
    tok = {"name": "gpt2", "attn": enc,
           "tiktoken-like": type("Encoding", (), {"name": "gpt2"})()}[how]
    cfg = dict(CFG, vocab_size=50257, emb_dim=12, n_layers=1)
    torch.manual_seed(5)
    m = book.GPTModel(cfg).eval()
    gpt = attn.GPT.from_torch(m, tok)
    ids = enc.encode("Every effort moves you")
    with torch.no_grad():
        want = m(torch.tensor([ids])).numpy()
    np.testing.assert_allclose(gpt.forward([ids]), want, atol=1e-5, rtol=1e-4)
    out = tmp_path / "gpt2.safetensors"
    gpt.save(out)
    with attn.GPT.load(out) as again:
        assert list(again.encode("Every effort moves you")) == ids
    r = run_attn("generate", "--checkpoint", out, "--prompt", "Every effort",
                 "--max-new-tokens", "3", "--seed", "1")
    assert r.returncode == 0, r.stderr
    with pytest.raises(attn.Error, match="50257"):
        attn.GPT.from_torch(model_of(dict(CFG, vocab_size=100)), enc)


def model_of(cfg):
    torch.manual_seed(0)
    return book.GPTModel(cfg).eval()
