"""attn.torch against the book's chapter-4 code, written out here (not imported
from attn): swap_attention on the book's GPTModel (every block replaced,
outputs within 1e-6, the same dropout masks in training), and the bonus
classes (ch04/03's KV cache, ch04/04's GroupedQueryAttention, ch04/06's
MultiHeadAttentionWithSWA): same weights after torch.manual_seed, same
state_dict keys, outputs within 1e-5 and the same greedy tokens, cached and
not, on a tiny GPT."""
import copy
import warnings

import pytest
import torch
import torch.nn as nn

import attn.torch as at

# The book, chapter 4: tests/python/book_ch4.py (written out, not attn's).
from book_ch4 import GELU, FeedForward, GPTModel, LayerNorm, MultiHeadAttention, TransformerBlock  # noqa: F401
# ch04/03 (the KV cache): the same file.
from book_ch4 import GPTModelKV, MultiHeadAttentionKV, generate_text_simple_cached


def _positions_mask(self, num_tokens_Q, num_tokens_K, use_cache, window=None):
    """The bonus classes' mask from positions (True: masked)."""
    if use_cache:
        q_pos = torch.arange(self.ptr_current_pos, self.ptr_current_pos + num_tokens_Q)
        self.ptr_current_pos += num_tokens_Q
    else:
        q_pos = torch.arange(num_tokens_Q)
    first_k = int(q_pos[-1]) + 1 - num_tokens_K
    k_pos = torch.arange(first_k, first_k + num_tokens_K)
    mask = q_pos.unsqueeze(-1) < k_pos.unsqueeze(0)
    if window is not None:
        mask = mask | (q_pos.unsqueeze(-1) - k_pos.unsqueeze(0) >= window)
    return mask


class GroupedQueryAttention(nn.Module):
    """ch04/04."""

    def __init__(self, d_in, d_out, num_heads, num_kv_groups, dtype=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        assert num_heads % num_kv_groups == 0, "num_heads must be divisible by num_kv_groups"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.W_query = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim)
        keys_new = self.W_key(x).view(b, num_tokens, self.num_kv_groups, self.head_dim)
        values_new = self.W_value(x).view(b, num_tokens, self.num_kv_groups, self.head_dim)
        queries, keys_new, values_new = (t.transpose(1, 2) for t in (queries, keys_new,
                                                                     values_new))
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys_base, values_base = self.cache_k, self.cache_v
        else:
            keys_base, values_base = keys_new, values_new
            self.reset_cache()
        keys = keys_base.repeat_interleave(self.group_size, dim=1)
        values = values_base.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        mask = _positions_mask(self, queries.shape[-2], keys.shape[-2], use_cache)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0


class MultiHeadAttentionWithSWA(nn.Module):
    """ch04/06: query i sees keys i - sliding_window_size + 1 .. i."""

    def __init__(self, d_in, d_out, dropout, num_heads, qkv_bias=False, sliding_window_size=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.sliding_window_size = sliding_window_size
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape
        shape = (b, num_tokens, self.num_heads, self.head_dim)
        queries = self.W_query(x).view(shape).transpose(1, 2)
        keys = self.W_key(x).view(shape)
        values = self.W_value(x).view(shape)
        if use_cache:  # the cache is (b, S, num_heads, head_dim), trimmed to the window
            if self.cache_k is not None:
                keys = torch.cat([self.cache_k, keys], dim=1)
                values = torch.cat([self.cache_v, values], dim=1)
            w = self.sliding_window_size or keys.shape[1]
            self.cache_k, self.cache_v = keys[:, -w:], values[:, -w:]
        else:
            self.ptr_current_pos = 0
        keys, values = keys.transpose(1, 2), values.transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask = _positions_mask(self, num_tokens, keys.shape[-2], use_cache,
                               self.sliding_window_size)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0


def generate_text_simple(model, idx, max_new_tokens, context_size):
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(idx[:, -context_size:])
        idx = torch.cat((idx, logits[:, -1, :].argmax(dim=-1, keepdim=True)), dim=1)
    return idx


# ----------------------------------------------------------------- tests

CFG = {"vocab_size": 50, "context_length": 32, "emb_dim": 24, "n_heads": 4, "n_layers": 2,
       "drop_rate": 0.1, "qkv_bias": True}


def err(a, b):
    return float((a.detach().double() - b.detach().double()).abs().max()
                 / max(1.0, float(b.detach().abs().max())))


def test_swap_attention_on_the_books_gpt():
    torch.manual_seed(123)
    ref = GPTModel(CFG)
    ours = copy.deepcopy(ref)
    state = torch.get_rng_state()
    assert at.swap_attention(ours) == CFG["n_layers"]
    assert torch.equal(state, torch.get_rng_state()), "the generator is left alone"
    assert all(isinstance(b.att, at.MultiHeadAttention) for b in ours.trf_blocks)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert ours.trf_blocks[0].att.W_query is not ref.trf_blocks[0].att.W_query  # deepcopy
    ids = torch.randint(0, CFG["vocab_size"], (3, 20), generator=torch.Generator().manual_seed(1))
    ours.eval(), ref.eval()
    with torch.no_grad():
        assert err(ours(ids), ref(ids)) <= 1e-6
    ours.train(), ref.train()
    torch.manual_seed(9)
    ya = ours(ids)
    torch.manual_seed(9)
    yb = ref(ids)
    assert err(ya, yb) <= 1e-6, "the same dropout masks in training"
    ya.square().mean().backward()
    yb.square().mean().backward()
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert err(p.grad, q.grad) <= 1e-5, n


def test_swap_attention_shares_the_weights_and_warns_on_none():
    torch.manual_seed(1)
    model = GPTModel(CFG)
    before = model.trf_blocks[1].att.W_key.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert at.swap_attention(model) == 2
    assert model.trf_blocks[1].att.W_key.weight is before  # shared, not copied
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    opt.step()  # the optimizer made before the swap still trains it
    assert before.grad is not None
    with pytest.warns(RuntimeWarning, match="nothing replaced"):
        assert at.swap_attention(model) == 0  # already attn's
    with pytest.warns(RuntimeWarning, match="nothing replaced"):
        assert at.swap_attention(nn.Sequential(nn.Linear(2, 2))) == 0


def _variant_pair(make_ref, make_ours, seed=5, cfg=CFG):
    torch.manual_seed(seed)
    ref = GPTModelKV(cfg, make_ref)
    torch.manual_seed(seed)
    ours = GPTModelKV(cfg, make_ours)
    # ch04/03's mask is not persistent; attn's MultiHeadAttention keeps
    # chapter 3's (persistent) and loads state_dicts without it.
    mine = {k: v for k, v in ours.state_dict().items() if not k.endswith(".mask")}
    assert list(mine) == list(ref.state_dict())
    for (n, p), (_, q) in zip(mine.items(), ref.state_dict().items()):
        assert torch.equal(p, q), f"{n}: the book's weights after manual_seed"
    ours.load_state_dict(ref.state_dict(), strict=True)
    swapped = copy.deepcopy(ref)
    assert at.swap_attention(swapped) == cfg["n_layers"]
    assert list(swapped.state_dict()) == list(ref.state_dict())
    return ref.eval(), ours.eval(), swapped.eval()


def mha_kv(lib):
    return lambda c: lib(c["emb_dim"], c["emb_dim"], c["context_length"], c["drop_rate"],
                         c["n_heads"], c["qkv_bias"])


def gqa(lib):
    return lambda c: lib(c["emb_dim"], c["emb_dim"], c["n_heads"], 2)


def swa(lib, window=5):
    return lambda c: lib(c["emb_dim"], c["emb_dim"], c["drop_rate"], c["n_heads"],
                         c["qkv_bias"], window)


VARIANTS = [
    ("kv-cache", mha_kv(MultiHeadAttentionKV), mha_kv(at.MultiHeadAttention)),
    ("gqa", gqa(GroupedQueryAttention), gqa(at.GroupedQueryAttention)),
    ("swa", swa(MultiHeadAttentionWithSWA), swa(at.MultiHeadAttentionWithSWA)),
]


@pytest.mark.parametrize("name, make_ref, make_ours", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_bonus_classes_generate_the_books_tokens(name, make_ref, make_ours):
    ref, ours, swapped = _variant_pair(make_ref, make_ours)
    idx = torch.randint(0, CFG["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert err(ours(idx), ref(idx)) <= 1e-5
    want = generate_text_simple(ref, idx, 20, CFG["context_length"])
    assert torch.equal(generate_text_simple(ours, idx, 20, CFG["context_length"]), want)
    for m in (ref, ours, swapped):
        assert torch.equal(generate_text_simple_cached(m, idx, 20), want), type(m.trf_blocks[0].att)
    cache = ref.trf_blocks[1].att.cache_k
    for m in (ours, swapped):  # the book's cache layout and length
        assert m.trf_blocks[1].att.cache_k.shape == cache.shape
        assert err(m.trf_blocks[1].att.cache_k, cache) <= 1e-5
    assert ours.trf_blocks[0].att.ptr_current_pos == 26
    ours.reset_kv_cache()
    assert ours.trf_blocks[0].att.cache_k is None and ours.trf_blocks[0].att.ptr_current_pos == 0


@pytest.mark.parametrize("name, make_ref, make_ours", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_bonus_classes_train_like_the_books(name, make_ref, make_ours):
    ref, ours, _ = _variant_pair(make_ref, make_ours, seed=8)
    ref.train(), ours.train()
    ids = torch.randint(0, CFG["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(4))
    torch.manual_seed(2)
    ya = ours(ids)
    torch.manual_seed(2)
    yb = ref(ids)
    assert err(ya, yb) <= 1e-5
    ya.sum().backward()
    yb.sum().backward()
    for (n, p), (_, q) in zip(ours.named_parameters(), ref.named_parameters()):
        assert err(p.grad, q.grad) <= 1e-5, n


def test_kv_cache_state_dicts_load_both_ways():
    torch.manual_seed(0)
    ref = MultiHeadAttentionKV(8, 8, 10, 0.0, 2)  # no mask in its state_dict
    ours = at.MultiHeadAttention(8, 8, 10, 0.0, 2)
    ours.load_state_dict(ref.state_dict(), strict=True)
    sd = {k: v for k, v in ours.state_dict().items() if k != "mask"}
    ref.load_state_dict(sd, strict=True)
    x = torch.rand(2, 7, 8)
    with torch.no_grad():
        assert err(ours(x), ref(x)) <= 1e-6
        # chunked prefill: the cache's positions continue
        ya = torch.cat([ours(x[:, :3], use_cache=True), ours(x[:, 3:], use_cache=True)], 1)
        yb = torch.cat([ref(x[:, :3], use_cache=True), ref(x[:, 3:], use_cache=True)], 1)
    assert err(ya, yb) <= 1e-6
    with pytest.raises(Exception, match="exceed context_length"):
        ours(x, use_cache=True)  # 7 + 7 > 10


def test_gqa_in_other_dtypes():
    torch.manual_seed(0)
    ref = GroupedQueryAttention(16, 16, 4, 2, dtype=torch.float64)
    torch.manual_seed(0)
    ours = at.GroupedQueryAttention(16, 16, 4, 2, dtype=torch.float64)
    x = torch.rand(2, 9, 16, dtype=torch.float64)
    y = ours(x)
    assert y.dtype == torch.float64 and err(y, ref(x)) <= 1e-12  # float64 runs in float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yb = ours.to(torch.bfloat16)(x.bfloat16())
    assert yb.dtype == torch.bfloat16 and err(yb, ref(x)) <= 3e-2


def test_swap_attention_leaves_other_attentions_alone():
    class RopeGQA(GroupedQueryAttention):  # a Llama-style forward: more than x
        def forward(self, x, mask, cos, sin):
            return super().forward(x)

    class WithTables(MultiHeadAttention):  # more parts than the book's
        def __init__(self, *args):
            super().__init__(*args)
            self.register_buffer("cos", torch.ones(4))

    model = nn.Sequential(RopeGQA(8, 8, 2, 1), WithTables(8, 8, 4, 0.0, 2),
                          nn.ModuleList([book_wrapper(8, 4, 4, 0.0, 2)]))
    assert at.swap_attention(model) == 1  # the wrapper, counted once
    assert type(model[0]) is RopeGQA and type(model[1]) is WithTables
    assert isinstance(model[2][0], at.MultiHeadAttentionWrapper)
    assert all(isinstance(h, at.CausalAttention) for h in model[2][0].heads)


def book_wrapper(d_in, d_out, context_length, dropout, num_heads):
    """Chapter 3's MultiHeadAttentionWrapper, its CausalAttention heads."""
    class CausalAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_query = nn.Linear(d_in, d_out, bias=False)
            self.W_key = nn.Linear(d_in, d_out, bias=False)
            self.W_value = nn.Linear(d_in, d_out, bias=False)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                    diagonal=1))

        def forward(self, x):
            raise NotImplementedError  # only the structure matters here

    class MultiHeadAttentionWrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleList([CausalAttention() for _ in range(num_heads)])

        def forward(self, x):
            return torch.cat([head(x) for head in self.heads], dim=-1)

    return MultiHeadAttentionWrapper()


def test_swap_attention_on_chapter_3s_classes():
    import attn.book as book
    torch.manual_seed(4)
    ref = nn.Sequential(book.CausalAttention(6, 4, 10, 0.2), nn.Linear(4, 6),
                        book.MultiHeadAttentionWrapper(6, 3, 10, 0.2, 2))
    ours = copy.deepcopy(ref)
    assert at.swap_attention(ours) == 2
    assert isinstance(ours[0], at.CausalAttention)
    assert isinstance(ours[2], at.MultiHeadAttentionWrapper)
    x = torch.rand(2, 9, 6)
    torch.manual_seed(1)
    ya = ours(x)
    torch.manual_seed(1)
    assert err(ya, ref(x)) <= 1e-6  # training mode: the same dropout masks
