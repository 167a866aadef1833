"""attn.torch: the book's attention classes as torch.nn.Module drop-ins run by
attn's C code, swap_attention for the book's own models, and
scaled_dot_product_attention with PyTorch 2's signature.

    import torch, attn.torch as at
    torch.manual_seed(123)
    mha = at.MultiHeadAttention(d_in, d_out, context_length, 0.1, num_heads=2)
    at.swap_attention(book_gpt_model)      # -> how many modules it replaced

Chapter 3: SelfAttention_v1, SelfAttention_v2, CausalAttention,
MultiHeadAttentionWrapper and MultiHeadAttention take the book's constructor
arguments and create the book's parameters and buffers in the book's order,
so torch.manual_seed gives the book's weights and state_dicts load both ways.
Their forward and backward go through a torch.autograd.Function into the
library on the parameters' own storage (bound, not copied, as GPTModel's:
attn._torch_bind; the C module keeps the activations its backward needs; a backward whose forward is no longer the
module's last one recomputes it first). In training mode with dropout the
masks are drawn from PyTorch's default generator exactly as the book's
nn.Dropout draws them (one bernoulli_(1 - p) per dropped tensor, in the same
order), so after the same torch.manual_seed the outputs are equal on any
PyTorch build; they cost one byte per element of the dropped (B, [H,] T, T)
weights.

Chapter 4's bonus classes: the KV cache of ch04/03 on MultiHeadAttention
(forward(x, use_cache=True), reset_cache(), ptr_current_pos),
GroupedQueryAttention (ch04/04) and MultiHeadAttentionWithSWA (ch04/06):
projections in torch, attention by scaled_dot_product_attention (fused in C
where it is causal and unmasked).

Chapter 4's GPTModel(cfg): the whole network (embeddings, blocks, final
norm, head; forward(idx) -> logits, forward(idx, targets=...) -> the loss by
the fused head) in attn's C model on the parameters' own storage;
swap_model(book_model) runs the book's model so, sharing its parameters.
AdamW: torch.optim.AdamW with its update in one C pass per tensor.

dtypes: CPU tensors; float32 runs in C as it is; a dtype attn has no kernel
for is computed in float32 and cast back, with one RuntimeWarning per class
and dtype (bfloat16 attention runs attn's bf16 kernel on AVX512-BF16 CPUs);
the input must have the parameters' dtype. Failures raise attn.Error.

The classes live in attn._torch_modules (attention), attn._torch_gpt (the
whole model) and attn._torch_optim (AdamW); this module is their one public
name space."""
try:
    import torch  # noqa: F401 (named first: a missing PyTorch says so)
except ImportError as e:  # name the package, not only the import that failed
    raise ImportError(f"attn.torch needs PyTorch ({e}): pip install torch, or on Debian "
                      "apt-get install python3-torch", name="torch") from e

from ._torch_gpt import GPTModel, swap_model
from ._torch_modules import (CausalAttention, GroupedQueryAttention, MultiHeadAttention,
                             MultiHeadAttentionWithSWA, MultiHeadAttentionWrapper,
                             SelfAttention_v1, SelfAttention_v2, swap_attention)
from ._torch_optim import AdamW
from ._torch_sdpa import scaled_dot_product_attention

__all__ = ["SelfAttention_v1", "SelfAttention_v2", "CausalAttention",
           "MultiHeadAttentionWrapper", "MultiHeadAttention", "GroupedQueryAttention",
           "MultiHeadAttentionWithSWA", "scaled_dot_product_attention", "swap_attention",
           "GPTModel", "swap_model", "AdamW"]

# Pickles and reprs name them as users import them.
for _cls in (SelfAttention_v1, SelfAttention_v2, CausalAttention, MultiHeadAttentionWrapper,
             MultiHeadAttention, GroupedQueryAttention, MultiHeadAttentionWithSWA, GPTModel,
             AdamW):
    _cls.__module__ = __name__
