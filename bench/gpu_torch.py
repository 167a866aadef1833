"""PyTorch GPU peer for `attn train --device cuda` (issue 13).

The book's chapter-4 GPTModel (same parameter names and shapes as attn's
gpt.h), with attention through F.scaled_dot_product_attention (is_causal,
dropout_p in training). Times a training step (forward, backward, clip 1.0,
AdamW) on random batches of Tiny Shakespeare windows:
  fp32 (TF32 off), bf16 autocast eager, bf16 autocast + torch.compile;
and batch-1 generation with a KV cache (eval, bf16 off).

  python3 bench/gpu_torch.py --data data/tinyshakespeare.txt [--batch 64]
Prints one line per mode: tokens/s, ms/step, and the model FLOPs/token used
for MFU (6 N + 6 L T C causal-halved attention, as attn's bench notes).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x, cache=None):
        b, t, _ = x.shape
        q, k, v = self.split(self.W_query(x)), self.split(self.W_key(x)), self.split(self.W_value(x))
        if cache is not None:  # (k, v, length) buffers for generation
            kc, vc, n = cache
            kc[:, :, n:n + t] = k
            vc[:, :, n:n + t] = v
            k, v = kc[:, :, :n + t], vc[:, :, :n + t]
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=(n == 0 and t > 1))
        else:
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                 dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(ctx.transpose(1, 2).reshape(b, t, self.d_out))


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(d))
        self.shift = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.scale, self.shift, self.eps)


class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                    nn.Linear(4 * d, d))

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(cfg["emb_dim"], cfg["emb_dim"], cfg["context_length"],
                                      cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"])
        self.ff = FeedForward(cfg["emb_dim"])
        self.norm1, self.norm2 = LayerNorm(cfg["emb_dim"]), LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x, cache=None):
        x = x + self.drop_shortcut(self.att(self.norm1(x), cache))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, idx, caches=None, start=0):
        t = idx.shape[1]
        pos = torch.arange(start, start + t, device=idx.device)
        x = self.drop_emb(self.tok_emb(idx) + self.pos_emb(pos))
        for i, blk in enumerate(self.trf_blocks):
            x = blk(x, None if caches is None else caches[i])
        return self.out_head(self.final_norm(x))


SEED004 = dict(vocab_size=65, context_length=256, emb_dim=768, n_heads=12, n_layers=10,
               drop_rate=0.1, qkv_bias=False)


def flops_per_token(cfg, n_params):
    # 6 per weight (fwd + bwd) on the non-embedding weights, plus attention
    # QK^T and PV: 6 * L * T * C fwd+bwd with the causal half (12 L T C / 2).
    L, T, C = cfg["n_layers"], cfg["context_length"], cfg["emb_dim"]
    n_matmul = n_params - cfg["vocab_size"] * C - T * C  # embeddings are lookups
    return 6 * n_matmul + 6 * L * T * C


def train_mode(model, data, batch, steps, warmup, amp, compiled):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    fwd = torch.compile(model) if compiled else model
    T = SEED004["context_length"]
    g = torch.Generator(device="cpu").manual_seed(0)

    def batch_xy():
        ix = torch.randint(len(data) - T - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + T] for i in ix]).cuda(non_blocking=True)
        y = torch.stack([data[i + 1:i + T + 1] for i in ix]).cuda(non_blocking=True)
        return x, y

    def step():
        x, y = batch_xy()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = fwd(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    model.train()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    return batch * T / dt, dt * 1e3, loss.item()


@torch.no_grad()
def generate(model, n_new, start_ids):
    model.eval()
    cfg = SEED004
    hd = cfg["emb_dim"] // cfg["n_heads"]
    caches = [[torch.empty(1, cfg["n_heads"], cfg["context_length"], hd, device="cuda"),
               torch.empty(1, cfg["n_heads"], cfg["context_length"], hd, device="cuda"), 0]
              for _ in range(cfg["n_layers"])]
    idx = start_ids
    out = []
    n = 0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n_new):
        if n + idx.shape[1] > cfg["context_length"]:  # same slide as attn: re-prime half
            for c in caches:
                c[2] = 0
            keep = torch.tensor([out[-cfg["context_length"] // 2:]], device="cuda")
            idx, n = keep, 0
        for c in caches:
            c[2] = n
        logits = model(idx, caches, start=n)
        n += idx.shape[1]
        nxt = torch.argmax(logits[:, -1], dim=-1, keepdim=True)
        out.append(int(nxt))  # one host sync per token, as attn's sampler
        idx = nxt
    torch.cuda.synchronize()
    return n_new / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--modes", default="fp32,bf16,bf16-compile,generate")
    a = ap.parse_args()
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for mode in a.modes.split(","):
        torch.manual_seed(123)
        model = GPTModel(SEED004).cuda()
        n_params = sum(p.numel() for p in model.parameters())
        fpt = flops_per_token(SEED004, n_params)
        if mode == "generate":
            tps = generate(model, 500, torch.zeros(1, 1, dtype=torch.long, device="cuda"))
            print(f"torch generate batch 1 KV cache fp32: {tps:.0f} tokens/s")
            continue
        try:
            tok_s, ms, loss = train_mode(model, data, a.batch, a.steps, 5 if "compile" not in mode
                                         else 8, amp=mode.startswith("bf16"),
                                         compiled="compile" in mode)
        except Exception as e:  # torch.compile may be unavailable
            print(f"torch {mode}: failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        print(f"torch {mode} B{a.batch}x256: {tok_s:.0f} tokens/s, {ms:.1f} ms/step, "
              f"loss {loss:.3f}, {n_params} params, {fpt / 1e6:.1f} MFLOP/token, "
              f"{tok_s * fpt / 1e12:.1f} TFLOP/s, MFU {tok_s * fpt / 989e12 * 100:.1f}% of 989")


if __name__ == "__main__":
    main()
