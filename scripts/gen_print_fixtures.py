#!/usr/bin/python3
"""Write tests/fixtures/print_cases.json: how PyTorch 1.13.1 prints tensors.

Run with Debian's /usr/bin/python3 (python3-torch). Each case holds a float32
tensor (shape + the exact bits of its values, 8 hex digits each, row-major),
optional repr suffixes, and repr(tensor) as PyTorch prints it with the default
print options. The output is committed; tests/test_print.c formats the same
values with attn_tensor_repr and compares the text exactly.
"""
import json
import math
import os
import struct

import torch

cases = []


def add(name, t, suffixes=()):
    """Record t (float32) and its repr; suffixes are added via autograd."""
    t = t.detach().to(torch.float32).contiguous()
    flat = t.reshape(-1).tolist()
    bits = "".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0] for v in flat)
    shown = t
    if "requires_grad=True" in suffixes:
        shown = t.clone().requires_grad_(True)
    elif suffixes:
        # A leaf times one: grad_fn=<MulBackward0>, the same numbers.
        shown = t.clone().requires_grad_(True) * 1.0
    cases.append(
        {
            "name": name,
            "shape": list(t.shape),
            "bits": bits,
            "suffixes": list(suffixes),
            "repr": repr(shown),
        }
    )


torch.manual_seed(2024)
inf, nan = math.inf, math.nan

# The chapter's own tensors.
inputs = torch.tensor(
    [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
     [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
)
add("inputs", inputs)
add("scores_x2", inputs @ inputs[1])
add("scores_6x6", inputs @ inputs.T)
add("softmax_6x6", torch.softmax(inputs @ inputs.T, dim=-1))
add("omega22_0dim", (inputs[1] @ inputs[1]))
add("sum_1_0000", torch.tensor(0.99999994))
add("sum_1", torch.tensor(1.0))
add("batch_3d", torch.stack([inputs, inputs]))
add("masked_inf", (inputs @ inputs.T).masked_fill(torch.triu(torch.ones(6, 6), 1).bool(), -inf))
add("tril_ones", torch.tril(torch.ones(6, 6)))
add("dropout_twos", torch.tensor([[2.0, 0.0, 2.0], [0.0, 0.0, 2.0]]))
add("zeros_1d", torch.zeros(3))
add("sci_empty_like", torch.tensor([3.6812e-04, 1.0019e-42, 0.0, 0.0, 0.0, 0.0]))
add("neg_mixed", torch.tensor([[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257]]))
add("with_grad_fn", torch.softmax(inputs @ inputs.T, dim=-1), ("grad_fn=<MulBackward0>",))
add("with_grad_fn_short", inputs[:2, :2], ("grad_fn=<MulBackward0>",))
add("requires_grad", inputs[:2], ("requires_grad=True",))
add("fourd_bmm", torch.rand(1, 2, 3, 3) * 2)
add("fourd_batched", torch.randn(2, 3, 2, 4))
add("fived", torch.randn(2, 1, 2, 2, 3))

# Scalars.
for i, v in enumerate([0.0, -0.0, 1.8524, -3.25, 7.0, 1e-5, 12345678.0, 1e9, inf, -inf, nan]):
    add("scalar_%d" % i, torch.tensor(v))

# Integer-valued (int mode) and its sci switch.
add("ints_small", torch.tensor([1.0, 2.0, -3.0, 0.0]))
add("ints_wide", torch.tensor([1.0, 200.0, -30.0, 0.0]))
add("ints_ratio_sci", torch.tensor([1.0, 2000.0]))
add("ints_big_sci", torch.tensor([1e8, 2e8, 3e8]))
add("ints_exactly_1e8", torch.tensor([1e8, 5e7]))
add("ints_with_inf", torch.tensor([1.0, inf, -inf, nan, 0.0]))
add("ints_negzero", torch.tensor([-0.0, 1.0, 2.0]))
add("ints_2d", torch.randint(-50, 50, (4, 5)).float())

# Non-finite only / zeros only.
add("only_inf", torch.tensor([inf, -inf]))
add("only_nan", torch.tensor([nan, nan]))
add("nan_zero", torch.tensor([[nan, 0.0], [-inf, 0.0]]))
add("all_zero_2d", torch.zeros(2, 3))
add("neg_zero_fixed", torch.tensor([-0.0, 0.5, 0.25]))

# Fixed vs sci decisions at the edges.
add("fixed_min_1e-4", torch.tensor([1e-4, 0.05]))
add("sci_min_below_1e-4", torch.tensor([9.9e-5, 0.05]))
add("sci_ratio", torch.tensor([0.001, 1.5]))
add("fixed_ratio_1000", torch.tensor([0.002, 2.0]))
add("sci_big", torch.tensor([1.5e8, 3.25]))
add("fixed_large", torch.tensor([12345.678, -9876.5, 100.25]))
add("fixed_neg", torch.tensor([-1.5, 0.25, -0.125]))
add("sci_neg_small", torch.tensor([-3e-7, 2e-6, 5e-3]))
add("sci_with_inf_nan", torch.tensor([1e-6, inf, nan, -inf, 0.5]))
add("fixed_with_inf_nan", torch.tensor([[0.5, -inf], [nan, 0.25]]))
add("huge", torch.tensor([3.0e38, -1.0e-38, 1.0]))
add("denormal", torch.tensor([1e-45, 1.0]))
add("round_half", torch.tensor([0.00005, 0.00015, 0.12345, 0.99995]))
add("rounds_to_int", torch.tensor([0.99999, 2.00001]))

# Random spreads, every rank, varying magnitudes.
for rank in range(1, 5):
    for k, scale in enumerate([1.0, 100.0, 1e-3, 1e5]):
        shape = [2 + (j + k) % 3 for j in range(rank)]
        add("randn_r%d_s%d" % (rank, k), torch.randn(*shape) * scale)
for k in range(6):
    add("uniform_2d_%d" % k, torch.rand(3 + k, 2 + k) - 0.5)

# Long rows wrap at 80 characters (1-D and inside 2-D/3-D).
add("wrap_1d_20", torch.rand(20))
add("wrap_1d_50_neg", torch.randn(50))
add("wrap_1d_sci", torch.randn(30) * 1e-6)
add("wrap_1d_ints", torch.arange(40).float())
add("wrap_2d", torch.randn(3, 15))
add("wrap_3d", torch.randn(2, 2, 12))
add("wrap_4d", torch.randn(1, 2, 2, 14) * 10)

# Summarisation (numel > 1000).
add("summ_1d_1001", torch.rand(1001))
add("summ_1d_exact_1000", torch.rand(1000))
add("summ_1d_neg", torch.randn(2000))
add("summ_2d_rows", torch.randn(500, 3))
add("summ_2d_cols", torch.randn(3, 500))
add("summ_2d_both", torch.randn(40, 40))
add("summ_3d_mha768", torch.randn(2, 6, 768) * 0.2)
add("summ_3d_long", torch.randn(20, 10, 10))
add("summ_4d", torch.randn(2, 12, 6, 6))
add("summ_4d_big", torch.randn(8, 8, 4, 5))
add("summ_hidden_outlier", torch.cat([torch.rand(600), torch.tensor([1e-9]), torch.rand(600)]))
add("summ_shown_outlier", torch.cat([torch.tensor([1e-9]), torch.rand(1200)]))
add("summ_ints", torch.arange(1200).float().reshape(30, 40))
add("summ_with_grad_fn", torch.randn(2, 6, 768), ("grad_fn=<MulBackward0>",))

# Empty tensors.
add("empty_1d", torch.zeros(0))
add("empty_2d", torch.zeros(0, 3))
add("empty_3d", torch.zeros(2, 0, 4))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "print_cases.json")
with open(out, "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=0)
    f.write("\n")
print("wrote %d cases to %s" % (len(cases), os.path.normpath(out)))
