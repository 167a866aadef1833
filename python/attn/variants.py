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

The attention keys (pos_emb rope/alibi, n_kv_heads, window, qk_norm,
softcap) are refused until attn's attention core computes them; the
attention module of a block is made by make_attention(cfg).

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


def check_built(cfg):
    """Raises NotImplementedError for an attention variant (not built yet)."""
    for k, v in variant(cfg).items():
        if k in ("norm", "act", "tie_weights") or (k == "pos_emb" and v == "none"):
            continue
        shown = f"'{v}'" if isinstance(v, str) else str(v).lower()
        raise NotImplementedError(f"{k} {shown} needs the attention core (not built yet)")


class RMSNorm(nn.Module):
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(emb_dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.scale


class ReLU2(nn.Module):
    def forward(self, x):
        return torch.square(torch.relu(x))


class SwiGLU(nn.Module):
    def forward(self, x):
        gate, value = x.chunk(2, dim=-1)
        return nn.functional.silu(gate) * value


def ff_hidden(emb_dim, act):
    """The feed-forward's hidden width: 4C, or 8 ceil(C / 3) for swiglu."""
    return 8 * -(-emb_dim // 3) if act == "swiglu" else 4 * emb_dim


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, act = cfg["emb_dim"], cfg.get("act", "gelu")
        H = ff_hidden(C, act)
        layer, width = {"gelu": (book.GELU, H), "relu2": (ReLU2, H), "swiglu": (SwiGLU, 2 * H)}[act]
        self.layers = nn.Sequential(nn.Linear(C, width), layer(), nn.Linear(H, C))

    def forward(self, x):
        return self.layers(x)


def make_norm(cfg):
    C = cfg["emb_dim"]
    return RMSNorm(C) if cfg.get("norm", "layernorm") == "rmsnorm" else book.LayerNorm(C)


def make_attention(cfg):
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
    def __init__(self, cfg):
        super().__init__()
        check_built(cfg)
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
        batch_size, seq_len = in_idx.shape
        x = self.tok_emb(in_idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        return self.out_head(x)


def gpt_model(cfg):
    """The book's GPTModel for the book's config, else this GPTModel."""
    return GPTModel(cfg) if variant(cfg) else book.GPTModel(cfg)
