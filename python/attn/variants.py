"""The book's GPTModel with the variant keys of attn's model config (not in
the book): norm (layernorm | rmsnorm), act (gelu | relu2 | swiglu),
tie_weights, pos_emb "none"; the PyTorch reference attn's C code is checked
against (scripts/gpt_parity.py) and what attn.GPT.to_torch() builds for a
variant checkpoint.

With every key at its default, GPTModel(cfg) is the book's: the same modules
built in the same order (so torch.manual_seed gives the same weights), the
same state_dict names and the same numbers. A variant changes only its part:

  norm rmsnorm   RMSNorm(C): x * rsqrt(mean(x^2) + 1e-5) * scale, parameter
                 "scale" (ones), no shift; for norm1, norm2 and final_norm.
  act relu2      FeedForward = Sequential(Linear(C, 4C), ReLU2, Linear(4C, C)).
  act swiglu     Sequential(Linear(C, 2H), SwiGLU, Linear(H, C)), H = 8 ceil(C/3):
                 layers.0's output is [gate | value], silu(gate) * value.
  tie_weights    out_head.weight = tok_emb.weight after the constructor (the
                 head's own draw is dropped); named_parameters() lists the
                 shared matrix once, as tok_emb.weight.
  pos_emb none   no pos_emb table: x = tok_emb(ids) alone.

init gpt2 (and any tied model) draws GPT-2's init instead of the
constructor's (gpt_model, gpt2_init_; attn/gpt.h).

The attention keys (attn/attention.h's formulas; Attention below, used when
any of them is set, else the book's MultiHeadAttention):

  n_kv_heads K   W_key, W_value are Linear(C, K head_dim); query head h reads
                 kv head h // (n_heads / K) (repeat_interleave).
  pos_emb rope   no pos_emb table; q, k rotated per head in GPT-NeoX's half
                 layout, theta 10000 (rope_theta), all dims (rope_fraction).
  pos_emb alibi  no pos_emb table; scores + slope_h (j - i), the paper's slopes.
  window W       query i sees keys i-W+1..i.
  qk_norm        RMSNorm(head_dim) on each head's q and k: att.q_norm.scale,
                 att.k_norm.scale (after out_proj).
  softcap c      scores c tanh(s / c) (after the division by sqrt(head_dim)).

Needs only torch; scripts load this file by path (scripts/book_attention.py,
which registers book.py as the module "attn_book" first)."""
import torch
import torch.nn as nn

try:
    from . import book
except ImportError:  # loaded by path, outside the package
    import attn_book as book

# The variant keys and the book's value of each (n_kv_heads None: n_heads).
BOOK = {"pos_emb": "learned", "n_kv_heads": None, "window": 0, "norm": "layernorm",
        "act": "gelu", "qk_norm": False, "softcap": 0, "tie_weights": False}


def variant(cfg):
    """The variant keys of cfg that are not the book's, {key: value}."""
    out = {}
    for k, book_value in BOOK.items():
        v = cfg.get(k, book_value)
        if k == "n_kv_heads" and v == cfg["n_heads"]:
            continue
        if v != book_value:
            out[k] = v
    return out


class RMSNorm(nn.Module):
    """RMSNorm(emb_dim, eps=1e-5): x / rms(x) * scale (the norm="rmsnorm"
    variant)."""
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(emb_dim))

    def forward(self, x):
        """x (..., emb_dim) normalised by its root mean square."""
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.scale


class ReLU2(nn.Module):
    """relu(x)^2 (the act="relu2" variant)."""
    def forward(self, x):
        """relu(x) squared, elementwise."""
        return torch.square(torch.relu(x))


class SwiGLU(nn.Module):
    """silu(gate) * value over the two halves of the last dimension
    (act="swiglu")."""
    def forward(self, x):
        """x (..., 2H) -> (..., H)."""
        gate, value = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * value


def ff_hidden(emb_dim, act):
    """The feed-forward's hidden width: 4C, or 8 ceil(C / 3) for swiglu."""
    return 8 * -(-emb_dim // 3) if act == "swiglu" else 4 * emb_dim


class FeedForward(nn.Module):
    """The feed-forward of cfg's act (gelu, relu2, swiglu): Linear, activation,
    Linear."""
    def __init__(self, cfg):
        super().__init__()
        C, act = cfg["emb_dim"], cfg.get("act", "gelu")
        H = ff_hidden(C, act)
        layer, width = {"gelu": (book.GELU, H), "relu2": (ReLU2, H), "swiglu": (SwiGLU, 2 * H)}[act]
        self.layers = nn.Sequential(nn.Linear(C, width), layer(), nn.Linear(H, C))

    def forward(self, x):
        """x (..., emb_dim) -> (..., emb_dim)."""
        return self.layers(x)


def make_norm(cfg):
    """The norm of cfg: RMSNorm for norm="rmsnorm", else the book's LayerNorm."""
    C = cfg["emb_dim"]
    return RMSNorm(C) if cfg.get("norm", "layernorm") == "rmsnorm" else book.LayerNorm(C)


ATTENTION_KEYS = ("n_kv_heads", "window", "qk_norm", "softcap")


def attention_variant(cfg):
    """1 when cfg's attention is not the book's MultiHeadAttention."""
    v = variant(cfg)
    return any(k in v for k in ATTENTION_KEYS) or v.get("pos_emb") in ("rope", "alibi")


def alibi_slopes(n):
    """ALiBi's slopes for n heads (Press et al.): a power of two m <= n, then
    every other slope of 2m for the rest."""
    m = 1
    while 2 * m <= n:
        m *= 2
    slopes = [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]
    slopes += [2.0 ** (-8.0 * (2 * k + 1) / (2 * m)) for k in range(n - m)]
    return torch.tensor(slopes, dtype=torch.float64).float()


def rope_tables(T, rot, theta=10000.0, pos0=0):
    """cos, sin (T, rot / 2): angle pos * theta^(-2d / rot), in float32 steps."""
    inv = torch.tensor([1.0 / theta ** (2.0 * d / rot) for d in range(rot // 2)],
                       dtype=torch.float64).float()
    pos = torch.arange(pos0, pos0 + T, dtype=torch.float32)
    ang = pos[:, None] * inv[None, :]
    return ang.double().cos().float(), ang.double().sin().float()


def rope(x, cos, sin, rot):
    """x (..., T, head_dim): the first rot dims rotated, pairs (d, d + rot/2)."""
    half = rot // 2
    x1, x2 = x[..., :half], x[..., half:rot]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., rot:]], dim=-1)


class Attention(nn.Module):
    """Causal multi-head attention with the attention keys (written as math:
    torch 1.13 has no SDPA)."""

    def __init__(self, cfg, rope_theta=10000.0, rope_fraction=1.0, d_in=None):
        super().__init__()
        C, H = cfg["emb_dim"], cfg["n_heads"]
        d_in = d_in or C
        self.H, self.hd = H, C // H
        self.KV = cfg.get("n_kv_heads") or H
        self.pos = cfg.get("pos_emb", "learned")
        self.window = cfg.get("window", 0)
        self.softcap = cfg.get("softcap", 0)
        self.rot = 2 * int(rope_fraction * self.hd / 2) if self.pos == "rope" else 0
        self.theta = rope_theta
        bias = cfg["qkv_bias"]
        self.W_query = nn.Linear(d_in, C, bias=bias)
        self.W_key = nn.Linear(d_in, self.KV * self.hd, bias=bias)
        self.W_value = nn.Linear(d_in, self.KV * self.hd, bias=bias)
        self.out_proj = nn.Linear(C, C)
        self.dropout = nn.Dropout(cfg["drop_rate"])
        if cfg.get("qk_norm", False):
            self.q_norm = RMSNorm(self.hd)
            self.k_norm = RMSNorm(self.hd)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x):
        """x (B, T, d_in) -> (B, T, emb_dim): causal attention with cfg's keys."""
        b, T, _ = x.shape
        q = self.W_query(x).view(b, T, self.H, self.hd)
        k = self.W_key(x).view(b, T, self.KV, self.hd)
        v = self.W_value(x).view(b, T, self.KV, self.hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.rot:
            cos, sin = rope_tables(T, self.rot, self.theta)
            q, k = rope(q, cos, sin, self.rot), rope(k, cos, sin, self.rot)
        if self.KV != self.H:
            k = k.repeat_interleave(self.H // self.KV, dim=1)
            v = v.repeat_interleave(self.H // self.KV, dim=1)
        s = q @ k.transpose(2, 3) / self.hd ** 0.5
        if self.softcap:
            s = torch.tanh(s / self.softcap) * self.softcap
        i = torch.arange(T)[:, None]
        j = torch.arange(T)[None, :]
        if self.pos == "alibi":
            s = s + alibi_slopes(self.H).view(self.H, 1, 1) * (j - i).float()
        mask = j > i
        if self.window:
            mask = mask | (i - j >= self.window)
        w = torch.softmax(s.masked_fill(mask, -torch.inf), dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(b, T, self.H * self.hd)
        return self.out_proj(ctx)


def make_attention(cfg):
    """The attention of cfg: Attention when it has attention keys, else the
    book's MultiHeadAttention."""
    if attention_variant(cfg):
        return Attention(cfg)
    return book.MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"],
                                   context_length=cfg["context_length"],
                                   num_heads=cfg["n_heads"], dropout=cfg["drop_rate"],
                                   qkv_bias=cfg["qkv_bias"])


class TransformerBlock(book.TransformerBlock):
    """The book's block (its forward); the modules made from cfg, in its order."""

    def __init__(self, cfg):
        nn.Module.__init__(self)
        self.att = make_attention(cfg)
        self.ff = FeedForward(cfg)
        self.norm1 = make_norm(cfg)
        self.norm2 = make_norm(cfg)
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])


class GPTModel(nn.Module):
    """The book's GPTModel with the variant keys of cfg (norm, act,
    tie_weights, pos_emb and the attention keys); plain PyTorch."""
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = None
        if cfg.get("pos_emb", "learned") == "learned":
            self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = make_norm(cfg)
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)
        if cfg.get("tie_weights", False):
            self.out_head.weight = self.tok_emb.weight

    def forward(self, in_idx):
        """in_idx (B, T) token ids -> logits (B, T, vocab_size)."""
        batch_size, seq_len = in_idx.shape
        x = self.tok_emb(in_idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        return self.out_head(x)


def init_kind(cfg):
    """How attn draws a fresh model of cfg (its key "init"): "book", or
    "gpt2", which a tied model always is (attn_gpt_config_init_kind)."""
    return "gpt2" if cfg.get("tie_weights", False) else cfg.get("init", "book")


def gpt2_init_(model, n_layers):
    """GPT-2's init as attn draws it (attn/gpt.h): in named_parameters()
    order, each matrix one normal_(0, 0.02), the residual projections
    (att.out_proj, ff.layers.2) normal_(0, 0.02 / sqrt(2 n_layers)); the
    vectors (biases, norms) zeros and ones."""
    resid = 0.02 / (2 * n_layers) ** 0.5
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, resid if name.endswith(("att.out_proj.weight",
                                                       "ff.layers.2.weight")) else 0.02)
            elif name.endswith(".scale"):
                p.fill_(1.0)
            else:
                p.zero_()
    return model


def gpt_model(cfg):
    """The book's GPTModel for the book's config, else this GPTModel;
    after torch.manual_seed(S) its weights are attn's of seed S: the
    constructor's draws (init "book"), or GPT-2's (gpt2_init_) drawn as if
    the constructor had drawn none."""
    gpt2 = init_kind(cfg) == "gpt2"
    with torch.random.fork_rng(devices=[], enabled=gpt2):
        model = GPTModel(cfg) if variant(cfg) else book.GPTModel(cfg)
    return gpt2_init_(model, cfg["n_layers"]) if gpt2 else model
