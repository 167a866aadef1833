"""The book's KV-cache API on the whole model (issue 47, item 5): ch04/03's
forward(idx, use_cache=True), reset_kv_cache() and current_pos on
attn.torch.swap_model(ch04/03's GPTModel) and attn.torch.GPTModel, running
on attn's C KV cache, against ch04/03's model written out in book_ch4.py
(the book's repository is not at hand when the tests run: its structure is
written there, as the book writes it). And bf16 errors raised from Python
name Python's spelling (item 6)."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import attn
import attn.torch as at
from book_ch4 import GPTModelKV, generate_text_simple_cached

CFG = {"vocab_size": 60, "context_length": 24, "emb_dim": 32, "n_heads": 4, "n_layers": 2,
       "drop_rate": 0.1, "qkv_bias": False}


def err(a, b):
    return float((a.double() - b.double()).abs().max() / max(1.0, float(b.abs().max())))


def book_and_swapped(cfg=CFG, seed=3):
    torch.manual_seed(seed)
    book = GPTModelKV(cfg).eval()
    return book, at.swap_model(book)


def ids(B, T, seed=0, V=CFG["vocab_size"]):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def count_c_calls(model):
    """Counts the cached forward's C calls of model (a list that grows)."""
    bridge = model._bridge()
    calls, run = [], bridge.kv_forward

    def counted(*args):
        calls.append(1)
        return run(*args)
    bridge.kv_forward = counted
    return calls


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("B", [1, 3])
def test_generate_text_simple_cached_gives_the_books_tokens(qkv_bias, B):
    cfg = dict(CFG, qkv_bias=qkv_bias)
    book, ours = book_and_swapped(cfg)
    calls = count_c_calls(ours)
    prompt = ids(B, 4, seed=B, V=cfg["vocab_size"])
    want = generate_text_simple_cached(book, prompt, 20)
    got = generate_text_simple_cached(ours, prompt, 20)
    assert torch.equal(got, want)
    assert len(calls) == 21, "the prompt, then one C call per token"
    assert ours.current_pos == book.current_pos == 24
    # attn.torch.GPTModel of the same seed has ch04/03's weights: the same tokens
    torch.manual_seed(3)
    own = at.GPTModel(cfg)
    assert torch.equal(generate_text_simple_cached(own, prompt, 20), want)
    # and the uncached path of the same generator
    assert torch.equal(generate_text_simple_cached(ours, prompt, 20, use_cache=False), want)


def test_use_cache_across_calls_of_different_T():
    """Each call continues at current_pos: the logits of every position
    equal the book's (within 1e-5), as the uncached forward of the whole
    sequence does; the plain forward leaves the cache alone."""
    for swap in (True, False):
        book, ours = book_and_swapped()
        if not swap:
            torch.manual_seed(3)
            ours = at.GPTModel(CFG).eval()
        seq = ids(2, 15, seed=7)
        at_pos, parts = 0, []
        with torch.no_grad():
            for T in (5, 1, 3, 2, 1, 3):
                x = seq[:, at_pos:at_pos + T]
                got = ours(x, use_cache=True)
                want = book(x, use_cache=True)
                assert got.shape == (2, T, CFG["vocab_size"]) and got.dtype == torch.float32
                assert err(got, want) <= 1e-5, T
                at_pos += T
                assert ours.current_pos == book.current_pos == at_pos
                parts.append(got)
            whole = ours(seq)  # use_cache=False: the plain forward
            assert ours.current_pos == at_pos, "the plain forward leaves the cache alone"
            assert err(whole, book(seq)) <= 1e-5
            assert err(torch.cat(parts, dim=1), whole) <= 1e-5
            # the book's positional forward(in_idx, use_cache)
            more = ours(seq[:, :2], True)
            assert err(more, book(seq[:, :2], True)) <= 1e-5
            assert ours.current_pos == at_pos + 2


def test_reset_kv_cache():
    book, ours = book_and_swapped()
    x = ids(1, 6, seed=2)
    with torch.no_grad():
        first = ours(x, use_cache=True)
        ours(x[:, :3], use_cache=True)
        ours.reset_kv_cache()
        assert ours.current_pos == 0
        assert torch.equal(ours(x, use_cache=True), first), "from position 0 again, bit for bit"
        ours.reset_kv_cache()
        # an empty cache takes another batch size; a filled one refuses it (the book's torch.cat
        # fails there too)
        two = ours(ids(2, 3, seed=4), use_cache=True)
        book.reset_kv_cache()
        assert err(two, book(ids(2, 3, seed=4), use_cache=True)) <= 1e-5
        with pytest.raises(attn.Error, match="sequences"):
            ours(ids(1, 1), use_cache=True)
        assert ours.current_pos == 3
    with pytest.raises(AttributeError, match="current_pos"):
        ours.current_pos = 0  # reset_kv_cache() does it


def test_a_cache_past_context_length_raises():
    """The book's pos_emb has no position context_length (IndexError); attn
    raises attn.Error before anything is fed, the cache unchanged."""
    book, ours = book_and_swapped()
    S = CFG["context_length"]
    x = ids(1, S, seed=5)
    with torch.no_grad():
        ours(x[:, :S - 2], use_cache=True)
        calls = count_c_calls(ours)
        with pytest.raises(attn.Error, match=f"context_length {S}"):
            ours(x[:, :3], use_cache=True)
        assert ours.current_pos == S - 2 and not calls
        last = ours(x[:, S - 2:], use_cache=True)  # exactly full: the book's too
        book(x[:, :S - 2], use_cache=True)
        assert err(last, book(x[:, S - 2:], use_cache=True)) <= 1e-5
        with pytest.raises(attn.Error, match="reset_kv_cache"):
            ours(x[:, :1], use_cache=True)
        with pytest.raises(IndexError):
            book(x[:, :1], use_cache=True)
        ours.reset_kv_cache()
        with pytest.raises(attn.Error, match="context_length"):
            ours(ids(1, S + 1), use_cache=True)
        assert ours.current_pos == 0
        assert ours(x, use_cache=True).shape == (1, S, CFG["vocab_size"])


def test_grad_and_mode_semantics():
    """As the book's: the cached forward runs with or without no_grad
    (requires_grad as the book's logits); attn's steps keep no activations,
    so a backward through them raises attn.Error. inference_mode runs. A
    model in training mode with dropout raises (ch04/03's generator calls
    eval()); without dropout it runs."""
    book, ours = book_and_swapped()
    x = ids(1, 5, seed=6)
    got = ours(x, use_cache=True)
    want = book(x, use_cache=True)
    assert got.requires_grad == want.requires_grad is True
    assert err(got.detach(), want.detach()) <= 1e-5
    with pytest.raises(attn.Error, match="no backward"):
        got.sum().backward()
    with torch.inference_mode():
        nxt = ours(x[:, :1], use_cache=True)
    assert err(nxt, book(x[:, :1], use_cache=True).detach()) <= 1e-5
    with torch.no_grad():
        assert not ours(x[:, :1], use_cache=True).requires_grad
    ours.train()
    with pytest.raises(attn.Error, match=r"model\.eval\(\)"):
        ours(x, use_cache=True)
    with pytest.raises(attn.Error, match="no targets"):
        ours.eval()(x, targets=x, use_cache=True)
    book, ours = book_and_swapped(dict(CFG, drop_rate=0.0))
    ours.train(), book.train()
    assert err(ours(x, use_cache=True).detach(), book(x, use_cache=True).detach()) <= 1e-5


def test_the_cached_forward_leaves_the_weights_as_they_are():
    """The cached forward asks the kernel to put the weights (here 4 MiB
    each: whole 2 MiB pages inside) on huge pages: the same values at the
    same addresses, the book's model sharing them unchanged."""
    cfg = dict(CFG, vocab_size=8192, emb_dim=128, n_layers=1)
    book, ours = book_and_swapped(cfg)
    before = {n: (p.data_ptr(), p.detach().clone()) for n, p in book.named_parameters()}
    x = ids(1, 6, seed=9, V=cfg["vocab_size"])
    with torch.no_grad():
        got = ours(x, use_cache=True)
        for n, p in book.named_parameters():
            assert p.data_ptr() == before[n][0] and torch.equal(p, before[n][1]), n
        assert err(got, book(x, use_cache=True)) <= 1e-5


def _lora(m):
    m.trf_blocks[0].att.W_query = nn.Sequential(m.trf_blocks[0].att.W_query)


def _hook(m):
    m.trf_blocks[1].ff.register_forward_hook(lambda *a: None)


@pytest.mark.parametrize("change, match", [
    (lambda m: setattr(m, "out_head", nn.Linear(32, 2)), "out_head changed while the KV"),
    (_lora, r"trf_blocks\.0\.att\.W_query"),
    (_hook, r"trf_blocks\.1\.ff has a hook"),
    (lambda m: setattr(m.trf_blocks[0], "adapter", nn.Linear(32, 32)), "adapter"),
    (lambda m: setattr(m, "trf_blocks", nn.Sequential(*m.trf_blocks)), "trf_blocks"),
    (lambda m: setattr(m.final_norm, "eps", 1e-6), "final_norm"),
])
@pytest.mark.parametrize("swap", [True, False], ids=["swap_model", "GPTModel"])
def test_the_structure_checks_run_on_every_cached_call(change, match, swap):
    """docs/python.md, "What the drop-ins check": the tree and parameters
    are checked before any C runs, on every call, cached or not."""
    _, ours = book_and_swapped()
    if not swap:
        ours = at.GPTModel(CFG).eval()
        if match == "trf_blocks":  # attn's own is an nn.Sequential: ch04/03's ModuleList raises
            change = lambda m: setattr(m, "trf_blocks", nn.ModuleList(m.trf_blocks))  # noqa
    x = ids(1, 4)
    with torch.no_grad():
        ours(x, use_cache=True)  # a cache in use
        change(ours)
        calls = count_c_calls(ours)
        with pytest.raises(attn.Error, match=match):
            ours(x[:, :1], use_cache=True)
        assert not calls and ours.current_pos == 4


def test_other_dtypes_run_cached():
    """Parameters in bfloat16 or float64 run the cached steps in float32 on
    float32 copies, the logits cast back: the book's float32 model on the
    same values."""
    import copy
    import warnings
    for dtype, tol in ((torch.bfloat16, 8e-3), (torch.float64, 1e-5)):
        book, ours = book_and_swapped()
        book.to(dtype)
        ref = copy.deepcopy(book).float()
        x = ids(1, 5, seed=8)
        with torch.no_grad(), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = ours(x, use_cache=True)
        assert got.dtype == dtype
        if dtype == torch.bfloat16:  # (float64's warning is said once per process)
            assert not seen, [str(w.message) for w in seen]
        with torch.no_grad():
            assert err(got.float(), ref(x, use_cache=True).to(dtype).float()) <= tol


BF16_CODE = """
import attn, attn.torch as at, torch
from book_ch4 import GPTModelKV
cfg = {"vocab_size": 60, "context_length": 8, "emb_dim": 16, "n_heads": 2, "n_layers": 1,
       "drop_rate": 0.0, "qkv_bias": False}
for make in (lambda: at.GPTModel(cfg, precision="bf16"),
             lambda: at.swap_model(GPTModelKV(cfg), precision="bf16")):
    try:
        make()
        print("ran")
    except attn.Error as e:
        print("Error:", e)
"""


def test_bf16_errors_name_pythons_spelling():
    """Issue 47, item 6: on a CPU without AVX512-BF16 (ATTN_SIMD=avx2 turns
    it off on one that has it) bf16 raises attn.Error naming
    precision="fp32", the Python spelling, not the CLI's --precision."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, ATTN_SIMD="avx2",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", BF16_CODE], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    for line in lines:
        assert line.startswith("Error: bf16 needs") and 'precision="fp32"' in line, line
        assert "--precision" not in line, line
