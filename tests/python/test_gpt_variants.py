"""The model variants from Python (issue 20): attn.train takes the variant
keys, attn.GPT reports them, and to_torch() builds attn.variants.GPTModel,
which gives attn's logits and loss, holds attn's tensors under the same names
(a tied head once, as tok_emb.weight), and is the book's GPTModel when every
key is the book's."""
import numpy as np
import pytest
import torch

import attn
from attn import book, variants
from conftest import TINY, TINY_KEYS

CASES = [{"norm": "rmsnorm"}, {"act": "relu2"}, {"act": "swiglu"}, {"tie_weights": True},
         {"pos_emb": "none"},
         {"norm": "rmsnorm", "act": "swiglu", "tie_weights": True, "pos_emb": "none"},
         {"n_kv_heads": 1}, {"pos_emb": "rope"}, {"pos_emb": "alibi"}, {"window": 3},
         {"qk_norm": True}, {"softcap": 5.0},
         {"pos_emb": "rope", "n_kv_heads": 1, "window": 4, "qk_norm": True, "softcap": 5.0}]


@pytest.mark.parametrize("keys", CASES, ids=lambda k: "+".join(f"{a}={b}" for a, b in k.items()))
def test_variant_trains_and_to_torch_gives_its_numbers(tmp_path, corpus, keys):
    res = attn.train(preset="tiny", config={**TINY, **keys}, data=corpus, out=tmp_path / "run",
                     progress=False, **TINY_KEYS)
    assert res.evals[-1][2] < res.evals[0][2], res.evals  # it learns
    gpt = attn.GPT.load(tmp_path / "run")
    assert {k: gpt.config[k] for k in keys} == keys
    model = gpt.to_torch()
    assert isinstance(model, variants.GPTModel)
    sd = gpt.state_dict()
    assert [k for k in sd if not k.endswith(".att.mask")] == \
        [n for n, _ in model.named_parameters()]
    msd = model.state_dict()
    assert all(k in msd and msd[k].shape == v.shape for k, v in sd.items())  # masks where it has
    assert ("out_head.weight" in sd) != bool(keys.get("tie_weights"))
    assert ("pos_emb.weight" in sd) == (keys.get("pos_emb", "learned") == "learned")
    text = "First Citizen: before we"
    ids = torch.from_numpy(gpt.encode(text))[None]
    with torch.no_grad():
        logits = model(ids)
    assert np.abs(gpt.forward(ids.numpy()) - logits.numpy()).max() <= 1e-4 * logits.abs().max()
    targets = torch.from_numpy(gpt.encode(text[1:] + " "))[None]
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
    assert abs(gpt.loss(ids.numpy(), targets.numpy()) - ref) <= 1e-5 * abs(ref)
    assert len(gpt.generate("First", 20, seed=3)) == 25


def test_book_keys_are_the_books_model():
    cfg = {"vocab_size": 13, "context_length": 8, "emb_dim": 12, "n_heads": 3, "n_layers": 2,
           "drop_rate": 0.0, "qkv_bias": True}
    explicit = {**cfg, **variants.BOOK, "n_kv_heads": 3}
    assert variants.variant(explicit) == {}
    assert type(variants.gpt_model(explicit)) is book.GPTModel
    torch.manual_seed(5)
    a = book.GPTModel(cfg).eval()
    torch.manual_seed(5)
    b = variants.GPTModel(cfg).eval()
    ids = torch.randint(0, 13, (2, 6))
    assert list(a.state_dict()) == list(b.state_dict())
    assert torch.equal(a(ids), b(ids))


def test_attention_reference_is_the_books_math_without_variants():
    """variants.Attention with no attention key gives the book's
    MultiHeadAttention's numbers on the same weights."""
    cfg = {"emb_dim": 12, "n_heads": 3, "context_length": 8, "drop_rate": 0.0, "qkv_bias": True}
    torch.manual_seed(3)
    ref = book.MultiHeadAttention(12, 12, 8, 0.0, 3, qkv_bias=True).eval()
    torch.manual_seed(3)
    mine = variants.Attention(cfg).eval()
    x = torch.randn(2, 7, 12)
    assert torch.allclose(ref(x), mine(x), atol=1e-6)
    assert variants.alibi_slopes(8).tolist()[0] == 0.5
    assert variants.alibi_slopes(6).tolist() == pytest.approx(
        [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])
