#!/usr/bin/python3
"""Run the book's chapter-5 training (gpt_train.py) and record it as attn's reference.

"Build a Large Language Model (From Scratch)", rasbt/LLMs-from-scratch,
ch05/01_main-chapter-code/gpt_train.py: GPT_CONFIG_124M with context_length 256, AdamW
lr 5e-4, weight decay 0.1, 10 epochs, batch size 2, eval_freq 5, eval_iter 1, seed 123,
on the-verdict.txt. This script imports the book's own gpt_train.py and previous_chapters.py
(fetched into a scratch folder outside this repo, see tests/fixtures/book_ch05/README.md)
and calls its main() with the config and settings read from gpt_train.py's own __main__
block, so the book's code runs unchanged and in the same order. The only differences:

  * `the-verdict.txt` is copied from --data into the run's working folder, so main() takes
    its "file exists" branch instead of downloading it (no network here);
  * `tiktoken` is scripts/book_ch05/tiktoken_shim.py (npm tiktoken through Node.js), since
    Python's tiktoken cannot be installed here;
  * `matplotlib` is a stub module (not installed; main() never plots).

Recording is done by wrapping functions without touching torch's global generator: the
wrappers read tensors, call torch.get_rng_state() (no draw) and replay draws on a private
torch.Generator cloned from that state. Printed lines are captured by teeing sys.stdout.

Run with Debian's /usr/bin/python3 (python3-torch 1.13) on CPU:

  nice -n 19 /usr/bin/python3 scripts/gen_book_ch05_fixtures.py \
      --book-dir /work/scratch-book --node-modules /work/scratch-node/node_modules \
      --data /work/shared/data/the-verdict.txt --out tests/fixtures/book_ch05/ch05_run.json
"""
import argparse
import ast
import hashlib
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import types


def md5_file(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def main_block_dicts(source):
    """GPT_CONFIG_124M and OTHER_SETTINGS as written in gpt_train.py's __main__ block."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("GPT_CONFIG_124M", "OTHER_SETTINGS"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["GPT_CONFIG_124M"], found["OTHER_SETTINGS"]


def blas_info():
    """Which BLAS torch's matmuls reach (Debian's torch links libblas.so.3) and, for
    OpenBLAS, its core-specific kernel and thread count: these decide the last bits."""
    import ctypes
    info = {"libblas.so.3": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_config.restype = ctypes.c_char_p
        lib.openblas_get_corename.restype = ctypes.c_char_p
        info.update(openblas_config=lib.openblas_get_config().decode(),
                    openblas_corename=lib.openblas_get_corename().decode(),
                    openblas_num_threads=lib.openblas_get_num_threads())
    except OSError:
        pass
    return info


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class Tee(io.TextIOBase):
    def __init__(self, a):
        self.a, self.buf = a, io.StringIO()

    def write(self, s):
        self.buf.write(s)
        self.a.write(s)
        self.a.flush()
        return len(s)

    def flush(self):
        self.a.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--book-dir", required=True,
                    help="folder with the book's gpt_train.py and previous_chapters.py")
    ap.add_argument("--node-modules", required=True,
                    help="node_modules folder holding npm's tiktoken")
    ap.add_argument("--data", required=True, help="the-verdict.txt")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--book-commit", default="",
                    help="rasbt/LLMs-from-scratch commit the files came from (recorded)")
    ap.add_argument("--epochs", type=int, default=None,
                    help="override num_epochs (only for determinism checks; the fixture "
                         "uses the book's 10)")
    ap.add_argument("--smoke-config", default="",
                    help="JSON merged into GPT_CONFIG_124M: a small model for a fast exact "
                         "test (ch05_small.json) or to test this script quickly")
    ap.add_argument("--settings", default="",
                    help="JSON merged into OTHER_SETTINGS (e.g. num_epochs, batch_size)")
    args = ap.parse_args()

    book_dir = os.path.abspath(args.book_dir)
    data = os.path.abspath(args.data)
    out_path = os.path.abspath(args.out)
    os.environ["NODE_PATH"] = os.path.abspath(args.node_modules)

    # Module stand-ins, before the book's files import them.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "book_ch05"))
    import tiktoken_shim
    sys.modules["tiktoken"] = tiktoken_shim
    mpl = types.ModuleType("matplotlib")
    mpl.pyplot = types.ModuleType("matplotlib.pyplot")
    sys.modules["matplotlib"] = mpl
    sys.modules["matplotlib.pyplot"] = mpl.pyplot

    sys.path.insert(0, book_dir)
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    import gpt_train

    with open(os.path.join(book_dir, "gpt_train.py"), encoding="utf-8") as f:
        gpt_config, settings = main_block_dicts(f.read())
    if args.epochs is not None:
        settings = dict(settings, num_epochs=args.epochs)
    if args.smoke_config:
        gpt_config = dict(gpt_config, **json.loads(args.smoke_config))
    if args.settings:
        settings = dict(settings, **json.loads(args.settings))

    rec = {
        "generator": "scripts/gen_book_ch05_fixtures.py",
        "torch_version": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "torch_config": torch.__config__.show(),
        "blas": blas_info(),
        "cpu_model": cpu_model(),
        "env_threads": {k: os.environ.get(k) for k in
                        ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "python_version": platform.python_version(),
        "machine": platform.machine(),
        "book_repo": "rasbt/LLMs-from-scratch",
        "book_commit": args.book_commit,
        "book_files_md5": {n: md5_file(os.path.join(book_dir, n))
                           for n in ("gpt_train.py", "previous_chapters.py")},
        "data_md5": md5_file(data),
        "gpt_config": gpt_config,
        "settings": settings,
        "eval_freq": 5,
        "eval_iter": 1,
        "start_context": "Every effort moves you",
        "loader_iterations": [],   # every iter(DataLoader), in order
        "train_steps": [],         # every optimizer step, in order
        "evals": [],               # every evaluate_model call, in order
        "samples": [],             # generate_and_print_sample, one per epoch
    }
    ctx = {"phase": "train", "epoch": 1, "step": -1, "eval": None}  # epoch: 1-based
    index_of = {}  # id(dataset) -> {tuple(input ids): dataset index}

    def sample_indices(dataset, batch):
        table = index_of.get(id(dataset))
        if table is None:
            table = {tuple(t.tolist()): i for i, t in enumerate(dataset.input_ids)}
            assert len(table) == len(dataset.input_ids), "duplicate windows"
            index_of[id(dataset)] = table
        return [table[tuple(row.tolist())] for row in batch[0]]

    # --- DataLoader.__iter__: record the seeds each new iterator draws, and its batches.
    orig_dl_iter = DataLoader.__iter__

    def dl_iter(self):
        state = torch.get_rng_state()  # no draw
        it = orig_dl_iter(self)
        g = torch.Generator()
        g.set_state(state)
        draws = [int(torch.empty((), dtype=torch.int64).random_(generator=g).item())
                 for _ in range(2)]
        shuffled = isinstance(self.sampler, RandomSampler)
        entry = {
            "loader": "train" if shuffled else "val",
            "sampler": type(self.sampler).__name__,
            "purpose": ctx["phase"],
            "epoch": ctx["epoch"],
            "after_step": ctx["step"],
            "base_seed": int(it._base_seed),
            "base_seed_is_first_draw": int(it._base_seed) == draws[0],
            "batches": [],
        }
        if shuffled:
            # RandomSampler.__iter__ draws its seed at the first next(), right after
            # the base seed: the second draw from the state before iter().
            entry["sampler_seed_predicted"] = draws[1]
            gp = torch.Generator()
            gp.manual_seed(draws[1])
            entry["permutation_predicted"] = torch.randperm(
                len(self.dataset), generator=gp).tolist()
        rec["loader_iterations"].append(entry)

        def gen():
            for batch in it:
                entry["batches"].append(sample_indices(self.dataset, batch))
                yield batch
        return gen()

    DataLoader.__iter__ = dl_iter

    # --- calc_loss_batch: the per-step training loss at full precision; first batch ids.
    orig_clb = gpt_train.calc_loss_batch

    def calc_loss_batch(input_batch, target_batch, model, device):
        loss = orig_clb(input_batch, target_batch, model, device)
        if ctx["phase"] == "train":
            ctx["step"] += 1
            rec["train_steps"].append({
                "epoch": ctx["epoch"], "step": ctx["step"],
                "loss": loss.item(),
                "samples": rec["loader_iterations"][ctx["epoch_iter"]]["batches"][-1],
                "tokens": input_batch.numel(),
            })
            if ctx["step"] == 0:
                rec["first_batch"] = {"input_ids": input_batch.tolist(),
                                      "target_ids": target_batch.tolist()}
        else:
            ctx["eval"]["batch_losses"].append(loss.item())
        return loss

    gpt_train.calc_loss_batch = calc_loss_batch

    # --- evaluate_model: the losses before rounding.
    orig_eval = gpt_train.evaluate_model

    def evaluate_model(model, train_loader, val_loader, device, eval_iter):
        ctx["phase"] = "eval"
        ctx["eval"] = {"epoch": ctx["epoch"], "step": ctx["step"], "batch_losses": []}
        tr, va = orig_eval(model, train_loader, val_loader, device, eval_iter)
        ctx["eval"].update(train_loss=tr, val_loss=va)
        rec["evals"].append(ctx["eval"])
        ctx["phase"], ctx["eval"] = "train", None
        return tr, va

    gpt_train.evaluate_model = evaluate_model

    # --- generate_and_print_sample / token_ids_to_text: generated ids and raw text.
    orig_gps = gpt_train.generate_and_print_sample

    def generate_and_print_sample(model, tokenizer, device, start_context):
        ctx["phase"] = "sample"
        orig_gps(model, tokenizer, device, start_context)
        ctx["phase"] = "train"
        ctx["epoch"] += 1

    gpt_train.generate_and_print_sample = generate_and_print_sample
    orig_t2t = gpt_train.token_ids_to_text

    def token_ids_to_text(token_ids, tokenizer):
        text = orig_t2t(token_ids, tokenizer)
        rec["samples"].append({"epoch": ctx["epoch"],
                               "ids": token_ids.squeeze(0).tolist(), "text": text})
        return text

    gpt_train.token_ids_to_text = token_ids_to_text

    # The outer `for ... in train_loader` of each epoch: remember its loader_iterations
    # index (it is created while phase == "train").
    orig_dl_iter2 = DataLoader.__iter__

    def dl_iter2(self):
        if ctx["phase"] == "train":
            ctx["epoch_iter"] = len(rec["loader_iterations"])
        return orig_dl_iter2(self)

    DataLoader.__iter__ = dl_iter2

    # --- train_model_simple: the initial parameters (summaries), loader sizes.
    orig_tms = gpt_train.train_model_simple

    def train_model_simple(model, train_loader, val_loader, optimizer, device, **kw):
        rec["rng_state_md5_before_training"] = hashlib.md5(
            torch.get_rng_state().numpy().tobytes()).hexdigest()
        params = []
        for name, p in model.named_parameters():
            d = p.detach().double()
            params.append({"name": name, "shape": list(p.shape),
                           "sum": d.sum().item(), "sum_sq": (d * d).sum().item(),
                           "first": p.detach().flatten()[:4].tolist(),
                           "last": p.detach().flatten()[-2:].tolist()})
        rec["initial_params"] = params
        rec["num_params"] = sum(p.numel() for p in model.parameters())
        rec["num_train_batches"] = len(train_loader)
        rec["num_val_batches"] = len(val_loader)
        rec["train_dataset_len"] = len(train_loader.dataset)
        rec["val_dataset_len"] = len(val_loader.dataset)
        rec["train_loader"] = {"batch_size": train_loader.batch_size,
                               "drop_last": train_loader.drop_last,
                               "sampler": type(train_loader.sampler).__name__}
        rec["val_loader"] = {"batch_size": val_loader.batch_size,
                             "drop_last": val_loader.drop_last,
                             "sampler": type(val_loader.sampler).__name__}
        return orig_tms(model, train_loader, val_loader, optimizer, device, **kw)

    gpt_train.train_model_simple = train_model_simple

    # --- run in a scratch folder holding the-verdict.txt.
    workdir = tempfile.mkdtemp(prefix="book_ch05_")
    shutil.copyfile(data, os.path.join(workdir, "the-verdict.txt"))
    cwd = os.getcwd()
    os.chdir(workdir)
    tee = Tee(sys.stdout)
    sys.stdout = tee
    t0 = time.time()
    try:
        train_losses, val_losses, tokens_seen, model = gpt_train.main(gpt_config, settings)
    finally:
        sys.stdout = tee.a
        os.chdir(cwd)
        shutil.rmtree(workdir)
    rec["wall_seconds"] = round(time.time() - t0, 1)
    rec["stdout"] = tee.buf.getvalue()
    rec["train_losses"] = train_losses
    rec["val_losses"] = val_losses
    rec["tokens_seen"] = tokens_seen
    rec["eval_steps"] = [e["step"] for e in rec["evals"]]
    rec["final_param_sums"] = {n: p.detach().double().sum().item()
                               for n, p in model.named_parameters()}

    # Token counts of the split (the shim encodes; no torch RNG involved).
    with open(data, encoding="utf-8") as f:
        text = f.read()
    split = int(0.90 * len(text))
    enc = tiktoken_shim.get_encoding("gpt2")
    rec["split_idx_chars"] = split
    rec["train_tokens"] = len(enc.encode(text[:split], allowed_special={"<|endoftext|>"}))
    rec["val_tokens"] = len(enc.encode(text[split:], allowed_special={"<|endoftext|>"}))

    # Self-checks: what the README says about the loaders holds in this run.
    bad = []
    for k, it in enumerate(rec["loader_iterations"]):
        if not it["base_seed_is_first_draw"]:
            bad.append(k)
        if it["loader"] == "train":
            flat = [i for b in it["batches"] for i in b]
            if flat != it["permutation_predicted"][:len(flat)]:
                bad.append(k)
    rec["self_checks"] = ("every iterator's _base_seed equals the first int64 draw of the "
                          "global generator at iter(); every train iterator's batches follow "
                          "randperm(n) under a Generator seeded with the second draw")
    rec["self_checks_failed_iterations"] = bad

    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", out_path, file=sys.stderr)
    if bad:
        sys.exit("self-checks failed for loader iterations %s" % bad)


if __name__ == "__main__":
    main()
