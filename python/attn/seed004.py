"""Seed 004's own attention modules in the numpy layer, built from its config
dict as the seed builds them (see attn.modules for what every module offers):

    config = {"embedding_dim": 768, "heads_num": 12, "head_size": 64,
              "context_size": 256, "dropout_rate": 0.1, "use_bias": False}
    head = attn.seed004.AttentionHead(config, seed=1)      # (B, T, 768) -> (B, T, 64)
    mha = attn.seed004.MultiHeadAttention(config, seed=1)  # (B, T, 768) -> (B, T, 768)

Parameters are named as the seed's state_dict: Q_weights.weight, ...;
heads.<i>.Q_weights.weight, ..., linear.weight, linear.bias."""
from ._lib import Error
from .modules import Module

_KEYS = ("embedding_dim", "context_size", "dropout_rate", "use_bias")


def _get(config, key, what):
    try:
        return config[key]
    except (KeyError, TypeError):
        raise Error(f"{what}: config needs the key '{key}'", "not found") from None


class AttentionHead(Module):
    """AttentionHead(config): Q/K/V_weights = Linear(embedding_dim, head_size,
    use_bias), causal softmax scaled after masking, dropout on the weights."""
    _kind, _mask_buffer = "attention-head", "casual_attention_mask"

    def __init__(self, config, *, seed=None, stream="torch-cpu"):
        what = "AttentionHead"
        e, ctx, p, bias = (_get(config, k, what) for k in _KEYS)
        hs = _get(config, "head_size", what)
        self._args = f"config={dict(config)!r}"
        self._setup(e, hs, 1, ctx, p, bias, seed, stream, tril=True)


class MultiHeadAttention(Module):
    """MultiHeadAttention(config): heads_num AttentionHeads of head_size =
    embedding_dim / heads_num, concatenated, then linear = Linear(E, E) and
    dropout on the output."""
    _kind, _mask_buffer = "seed004-mha", "casual_attention_mask"

    def __init__(self, config, *, seed=None, stream="torch-cpu"):
        what = "MultiHeadAttention"
        e, ctx, p, bias = (_get(config, k, what) for k in _KEYS)
        heads = _get(config, "heads_num", what)
        hs = config.get("head_size") if hasattr(config, "get") else None
        if hs is not None and isinstance(heads, int) and hs * heads != e:
            raise Error(f"{what}: head_size ({hs}) x heads_num ({heads}) must equal "
                        f"embedding_dim ({e})")
        self._args = f"config={dict(config)!r}"
        self._setup(e, e, heads, ctx, p, bias, seed, stream,
                    heads_buffers=heads if isinstance(heads, int) and heads > 0 else 0, tril=True)
