"""attn.torch.AdamW: torch.optim.AdamW whose update runs in attn's C kernel."""
import ctypes
import math

import torch

from ._lib import AdamwConfig, AdamwTensor, Error, call, lib


_Tensor, _Config = AdamwTensor, AdamwConfig  # attn/optim.h

_REFUSED = {"amsgrad": False, "maximize": False, "capturable": False, "differentiable": False,
            "fused": None}


def _in_c(p, g):
    """Whether attn's kernel can update p in place: contiguous float32 CPU
    tensors, a dense gradient."""
    return (p.dtype == torch.float32 and p.device.type == "cpu" and p.is_contiguous()
            and g.dtype == torch.float32 and not g.is_sparse and g.device.type == "cpu")


class AdamW(torch.optim.Optimizer):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2) with the update in C: one pass over each parameter,
    its gradient and its two moments (PyTorch 1.13's single-tensor path
    makes about nine), on attn's threads (attn.set_num_threads).

    The same arguments, defaults, parameter groups, state (per parameter:
    "step" as a float tensor, "exp_avg", "exp_avg_sq") and state_dict as
    torch.optim.AdamW, so the two load each other's state_dicts. The update
    is the same arithmetic in float32 with the scalars in double (results
    equal torch's within float rounding; attn's trainer uses the same
    kernel). Contiguous float32 CPU parameters run in C; any other (a
    float64 or bfloat16 parameter, a non-contiguous view) runs the same
    formulas in torch ops. amsgrad, maximize, capturable, differentiable
    and fused are not supported (a clear error). Sparse gradients are
    refused, as torch's AdamW refuses them."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise Error(f"AdamW: invalid learning rate {lr}")
        if not 0.0 <= eps:
            raise Error(f"AdamW: invalid epsilon value {eps}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise Error(f"AdamW: invalid betas {betas} (each in [0, 1))")
        if not 0.0 <= weight_decay:
            raise Error(f"AdamW: invalid weight_decay value {weight_decay}")
        given = {"amsgrad": amsgrad, "maximize": maximize, "capturable": capturable,
                 "differentiable": differentiable, "fused": fused}
        for k, v in given.items():
            if v != _REFUSED[k]:
                raise Error(f"AdamW: {k}={v!r} is not supported by attn.torch.AdamW "
                            "(use torch.optim.AdamW)")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=False,
                        maximize=False, foreach=foreach, capturable=False)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)

    @staticmethod
    def _torch_update(p, g, st, lr, b1, b2, eps, wd, step):
        """The same update in torch ops (a tensor attn's kernel does not take)."""
        p.mul_(1 - lr * wd)
        st["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
        st["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (st["exp_avg_sq"].sqrt() / math.sqrt(1 - b2 ** step)).add_(eps)
        p.addcdiv_(st["exp_avg"], denom, value=-lr / (1 - b1 ** step))

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s
        loss when a closure is given (evaluated with gradients enabled)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            by_step = {}  # the C call takes one step number: tensors grouped by theirs
            keep = []  # contiguous copies of gradients, alive until the call
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise Error("AdamW does not support sparse gradients")
                st = self.state[p]
                if not st:
                    st["step"] = torch.tensor(0.0)
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                st["step"] += 1
                step = st["step"].item()
                g = p.grad
                if not (_in_c(p, g) and st["exp_avg"].is_contiguous() and
                        st["exp_avg_sq"].is_contiguous()):
                    self._torch_update(p, g, st, lr, b1, b2, eps, wd, step)
                    continue
                g = g.contiguous()
                keep.append(g)
                by_step.setdefault(step, []).append(_Tensor(
                    p.data_ptr(), g.data_ptr(), st["exp_avg"].data_ptr(),
                    st["exp_avg_sq"].data_ptr(), p.numel()))
            cfg = _Config(b1, b2, eps, wd)
            for step, ts in by_step.items():
                arr = (_Tensor * len(ts))(*ts)
                call(lib.attn_adamw_step_tensors, arr, len(ts), ctypes.byref(cfg), float(lr),
                     int(step))
            del keep
        return loss
