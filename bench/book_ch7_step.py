"""The book's chapter-7 training step (gpt_instruction_finetuning.py's
train_model_simple: the Alpaca prompt template, custom_collate_fn padding
each batch to its own longest entry with 50256 and -100 after the first pad,
the loss over every position, AdamW(lr=5e-5, weight_decay=0.1)) on the
book's PyTorch model, on attn.torch.swap_model of the same model, and on
that with attn.torch.AdamW: the same batches (the first --steps of the
training split, in order), alternating by round, one process. Prints each
one's median step over the batches and the ratios. --bf16: the book's step
under torch.autocast("cpu", torch.bfloat16), attn's with precision="bf16"
(bf16 products, fp32 sums, fp32 weights and optimizer, as autocast).

    PYTHONPATH=python ATTN_LIBRARY=build/libattn.so /usr/bin/python3 \\
        bench/book_ch7_step.py [--emb 768 --layers 12 --heads 12] [--steps 4]"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "python"))
from book_ch4 import GPTModel  # noqa: E402 (the book's model, written out)
from book_ch67 import calc_loss_batch_ch7, custom_collate_fn  # noqa: E402

import attn.tokenizer  # noqa: E402
import attn.torch as at  # noqa: E402


def format_input(entry):  # the book's template
    text = ("Below is an instruction that describes a task. "
            f"Write a response that appropriately completes the request."
            f"\n\n### Instruction:\n{entry['instruction']}")
    return text + (f"\n\n### Input:\n{entry['input']}" if entry["input"] else "")


def batches(path, B, steps):
    data = json.load(open(path))
    train = data[:int(len(data) * 0.85)]
    enc = attn.tokenizer.get_encoding("gpt2")
    ids = [enc.encode(format_input(e) + f"\n\n### Response:\n{e['output']}") for e in train]
    return [custom_collate_fn(ids[i * B:(i + 1) * B], allowed_max_length=1024)
            for i in range(steps)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4, help="batches a round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data", "book",
                                                   "instruction-data.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = {"vocab_size": 50257, "context_length": 1024, "emb_dim": a.emb, "n_heads": a.heads,
           "n_layers": a.layers, "drop_rate": 0.0, "qkv_bias": True}
    torch.manual_seed(123)
    book = GPTModel(cfg)
    data = batches(a.data, a.B, a.steps)
    runs = {}
    for name in ("book", "attn", "attn+AdamW"):
        prec = "bf16" if a.bf16 else "fp32"
        m = book if name == "book" else at.swap_model(copy.deepcopy(book), precision=prec)
        opt_cls = at.AdamW if name == "attn+AdamW" else torch.optim.AdamW
        runs[name] = (m, opt_cls(m.parameters(), lr=5e-5, weight_decay=0.1), [], [])
    for r in range(a.rounds + 1):  # round 0 warms up
        order = list(runs.items())
        for name, (m, opt, times, losses) in (order if r % 2 else order[::-1]):
            for x, y in data:
                t0 = time.perf_counter()
                opt.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16 and m is book):
                    loss = calc_loss_batch_ch7(x, y, m, "cpu")
                loss.backward()
                opt.step()
                if r:
                    times.append(time.perf_counter() - t0)
                    losses.append(loss.item())
    med = {n: statistics.median(v[2]) for n, v in runs.items()}
    T = [int(x.shape[1]) for x, _ in data]
    print(f"cfg emb {a.emb} layers {a.layers} heads {a.heads}, B {a.B}, padded lengths {T}, "
          f"threads {a.threads}, {a.rounds} alternating rounds" + (", bf16" if a.bf16 else ""))
    print(" ".join(f"{n} {t:.4f} s/step" for n, t in med.items()) +
          f": attn {med['book'] / med['attn']:.2f}x, "
          f"attn+AdamW {med['book'] / med['attn+AdamW']:.2f}x")
    for n, v in runs.items():  # every model takes the same steps: the losses agree
        print("losses", n, [f"{x:.6f}" for x in v[3][:a.steps]])


if __name__ == "__main__":
    main()
