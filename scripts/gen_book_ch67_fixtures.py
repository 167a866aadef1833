#!/usr/bin/python3
"""Run the book's chapter-6, appendix-E and chapter-7 fine-tuning code and record it as
attn's reference (issue 49: "number for number with the book's scripts").

"Build a Large Language Model (From Scratch)", rasbt/LLMs-from-scratch:
  ch06/01_main-chapter-code/gpt_class_finetune.py       (classifier; --test_mode and 124M)
  appendix-E/01_main-chapter-code/appendix-E.ipynb      (LoRA on chapter 6's classifier)
  ch07/01_main-chapter-code/gpt_instruction_finetuning.py (instruction SFT; --test_mode, 124M)
each with its own folder's previous_chapters.py. The book's files are read from a git
directory at a pinned commit (--book-git, --book-commit) or a checkout (--book-dir); nothing
of them is copied into this repository. Each run is a child process of this script, in a
scratch folder, so the book's modules (three different previous_chapters.py) never mix.

How the book's code runs (what tests/fixtures/book_ch67/README.md lists per run):
  * scripts: the file is loaded as a module and its `if __name__ == "__main__":` block is
    then executed in that module's namespace with sys.argv set, so every line runs as with
    `python FILE [--test_mode]`; the notebook: its code cells in order in one namespace.
  * data: the files the code looks for are put in its working folder first, so it takes
    its "already exists" branches: chapter 6's sms_spam_collection/SMSSpamCollection.tsv
    and chapter 7's instruction-data.json (the book's own file). The SMS Spam Collection
    cannot be downloaded here, so its file is made from the shared texts in its layout
    (`label<TAB>text`, no header; make_spam_tsv): "spam" = every <=160-character chunk
    of consecutive sentences of the-verdict.txt (193), "ham" = the first 1000 such chunks
    of tinyshakespeare.txt's speeches (speaker lines dropped), ham rows first. The book's
    own code then balances (193 + 193), shuffles, splits 70/10/20 and writes train.csv,
    validation.csv and test.csv (270 / 38 / 78 rows), which the fixtures keep.
  * weights: `gpt_download` (needs TensorFlow and the network) is replaced by a module
    whose download_and_load_gpt2 returns GPT-2's parameter layout filled from the book's
    own GPTModel(config) built after torch.manual_seed(123), under torch.random.fork_rng
    so the book's random stream is untouched; the book's load_weights_into_gpt then loads
    it unchanged (so out_head gets wte's values, as with OpenAI's weights).
  * tiktoken: scripts/book_ch05/tiktoken_shim.py (npm tiktoken through Node.js);
    importlib.metadata.version (the printed package versions) answers for the shim and
    for tensorflow, which is not installed, instead of raising.
  * a few source substitutions per run (RUNS[...]["patches"]), each matched exactly once.

Outputs (one JSON per run, and chapter 6's CSVs) hold results only, so a rerun on the
same machine writes the same bytes: floats as Python's repr (full precision), the
printed "Training completed in X minutes." as "N", no wall times (those go to stderr).
--save-init DIR also writes each run's model at the start of training (RUN_train_start.pth,
the book's torch.save(state_dict), head and LoRA A/B included) and the seeded "pretrained"
init, for a replay that starts from the same weights; they are too big to commit.

Recording wraps the book's functions (calc_loss_batch, calc_loss_loader,
calc_accuracy_loader, train_classifier_simple / train_model_simple, generate,
generate_text_simple, load_weights_into_gpt) and DataLoader / RandomSampler iteration; the
wrappers only read tensors and torch.get_rng_state(), so the book's random stream and call
order are unchanged. Values are the functions' return values (full precision).

  # the three small runs (~25 s); "--runs fixtures" adds the 124M ones (~12 min here)
  nice -n 19 /usr/bin/python3 scripts/gen_book_ch67_fixtures.py \
      --node-modules /work/scratch-node/node_modules --out-dir tests/fixtures/book_ch67
  # re-run the small ones and compare (tests/book_ch67_fixtures.sh)
  /usr/bin/python3 scripts/gen_book_ch67_fixtures.py --node-modules ... --check
"""
import argparse
import ast
import csv
import hashlib
import io
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_book_ch05_fixtures import Tee, blas_info, cpu_model  # noqa: E402

BOOK_COMMIT = "28c65cdfbc3338e2e040016eea4b7fdf556e4d57"
BOOK_GIT = "/work/.mirror/rasbt+LLMs-from-scratch/repo"
CH06 = "ch06/01_main-chapter-code"
CH07 = "ch07/01_main-chapter-code"
APPE = "appendix-E/01_main-chapter-code"
BOOK_FILES = {CH06: ("gpt_class_finetune.py", "previous_chapters.py"),
              CH07: ("gpt_instruction_finetuning.py", "previous_chapters.py"),
              APPE: ("appendix-E.ipynb", "previous_chapters.py")}

GPT2_124M = {"vocab_size": 50257, "context_length": 1024, "drop_rate": 0.0, "qkv_bias": True,
             "emb_dim": 768, "n_layers": 12, "n_heads": 12}
# Appendix E has no test mode: chapter 6's test-mode sizes, with GPT-2's biases so the
# book's load_weights_into_gpt can load it.
TINY_GPT2 = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": True,
             "emb_dim": 12, "n_layers": 1, "n_heads": 2}

SPAM_LOADERS = ["train", "val", "test"]
# Where the book's code seeds torch's global generator (each a torch.manual_seed(123)); the
# "pretrained" init is seeded apart (see download_and_load_gpt2) and touches none of these.
CH06_SEEDS = ["before the DataLoaders (test mode: GPTModel(config) draws from this stream "
              "right after them; the 124M path loads weights; the train loader's draws come "
              "at each iter())",
              "before model.out_head = torch.nn.Linear(emb_dim, 2)",
              "before torch.optim.AdamW and train_classifier_simple"]
APPE_SEEDS = ["cell 12: before the DataLoaders", "cell 23: before model.out_head = "
              "torch.nn.Linear(768, 2)", "cell 26: before the accuracies before LoRA (their "
              "train-loader pass draws; then cell 38's replace_linear_with_lora(model, rank=16, "
              "alpha=16) draws each A by kaiming_uniform_(a=sqrt(5)) in module order, B zeros)",
              "cell 42: before the accuracies after LoRA",
              "cell 44: before torch.optim.AdamW and train_classifier_simple"]
CH07_SEEDS = ["before the DataLoaders (test mode: GPTModel(config) draws from this stream "
              "right after them)", "before train_model_simple"]
RUNS = {
    "ch06_test_mode": {
        "folder": CH06, "file": "gpt_class_finetune.py", "argv": ["--test_mode"],
        "data": "spam", "loaders": SPAM_LOADERS, "pretrained": None, "patches": [],
        "seeds": CH06_SEEDS},
    "ch06_124m": {
        "folder": CH06, "file": "gpt_class_finetune.py", "argv": [],
        "data": "spam", "loaders": SPAM_LOADERS, "pretrained": GPT2_124M, "patches": [],
        "seeds": CH06_SEEDS},
    "appE_tiny": {
        "folder": APPE, "file": "appendix-E.ipynb", "argv": [],
        "data": "spam", "loaders": SPAM_LOADERS, "pretrained": TINY_GPT2, "seeds": APPE_SEEDS,
        "patches": [
            (19, 'BASE_CONFIG.update(model_configs[CHOOSE_MODEL])',
             'BASE_CONFIG.update(model_configs[CHOOSE_MODEL])\n'
             'BASE_CONFIG.update({"emb_dim": 12, "n_layers": 1, "n_heads": 2, '
             '"context_length": 120})',
             "a tiny model for a fast exact test (the notebook has no test mode)"),
            (23, 'in_features=768', 'in_features=BASE_CONFIG["emb_dim"]',
             "the head's width follows the tiny model")]},
    "appE_124m": {
        "folder": APPE, "file": "appendix-E.ipynb", "argv": [],
        "data": "spam", "loaders": SPAM_LOADERS, "pretrained": GPT2_124M, "patches": [],
        "seeds": APPE_SEEDS},
    "ch07_test_mode": {
        "folder": CH07, "file": "gpt_instruction_finetuning.py", "argv": ["--test_mode"],
        "data": "instruction", "loaders": ["train", "val"], "pretrained": None,
        "patches": [], "seeds": CH07_SEEDS},
    "ch07_124m": {
        "folder": CH07, "file": "gpt_instruction_finetuning.py", "argv": [],
        "data": "instruction", "loaders": ["train", "val"], "pretrained": GPT2_124M,
        "responses_limit": 1, "seeds": CH07_SEEDS, "patches": [
            ("source", 'CHOOSE_MODEL = "gpt2-medium (355M)"',
             'CHOOSE_MODEL = "gpt2-small (124M)"',
             "GPT-2 124M, as the issue asks (the script's chapter model is 355M)"),
            ("source", "main(args.test_mode)", "main(True)",
             "time: main's own test_mode argument takes the 10/10/10-entry subsets; the "
             "model is chosen by the global args.test_mode (False here): the chapter's "
             "model path, 124M")]},
}
TEST_MODE_RUNS = ["ch06_test_mode", "appE_tiny", "ch07_test_mode"]
# What tests/fixtures/book_ch67/ holds; appE_124m (~15 min here) runs only when named.
FIXTURE_RUNS = TEST_MODE_RUNS + ["ch06_124m", "ch07_124m"]
CSV_NAMES = ("train.csv", "validation.csv", "test.csv")
# The one wall-clock value the book prints; recorded as "N" so a fixture is a pure result.
WALL_LINE = re.compile(r"(Training completed in )[0-9.]+( minutes\.)")


def md5_bytes(b):
    return hashlib.md5(b).hexdigest()


# ----------------------------------------------------------------------------- data

def pack(units, limit=160):
    """Greedy SMS-sized chunks: consecutive units joined by a space while the chunk stays
    within `limit` characters; a unit longer than `limit` is first cut at spaces."""
    out, cur = [], ""
    for unit in units:
        pieces = [unit]
        if len(unit) > limit:
            pieces, piece = [], ""
            for word in unit.split():
                if piece and len(piece) + 1 + len(word) > limit:
                    pieces.append(piece)
                    piece = word
                else:
                    piece = piece + " " + word if piece else word
            pieces.append(piece)
        for p in pieces:
            if cur and len(cur) + 1 + len(p) > limit:
                out.append(cur)
                cur = p
            else:
                cur = cur + " " + p if cur else p
    if cur:
        out.append(cur)
    return out


def make_spam_tsv(verdict_path, shakespeare_path, n_ham=1000):
    """Chapter 6's SMSSpamCollection.tsv layout (`label<TAB>text`, no header, labels
    ham/spam) from the shared texts: "spam" = every chunk of The Verdict (each non-empty
    line split into sentences at [.!?] + space, packed into <=160-character chunks);
    "ham" = the first `n_ham` chunks of Tiny Shakespeare (each speech, the lines after
    its "NAME:" line, packed the same way). Ham rows first, then spam, in text order."""
    with open(verdict_path, encoding="utf-8") as f:
        verdict = f.read()
    with open(shakespeare_path, encoding="utf-8") as f:
        shakespeare = f.read()
    spam = []
    for line in verdict.split("\n"):
        if line.strip():
            spam += pack(re.split(r"(?<=[.!?])\s+", line.strip()))
    ham = []
    for speech in shakespeare.split("\n\n"):
        lines = [x.strip() for x in speech.strip().split("\n")]
        if len(lines) >= 2:
            ham += pack([x for x in lines[1:] if x])
    rows = [("ham", t) for t in ham[:n_ham]] + [("spam", t) for t in spam]
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", quotechar='"', quoting=csv.QUOTE_MINIMAL,
                   lineterminator="\n")
    w.writerows(rows)
    data = buf.getvalue().encode("utf-8")
    # The book reads it with pd.read_csv(sep="\t", header=None): it must read back whole.
    import pandas as pd
    df = pd.read_csv(io.BytesIO(data), sep="\t", header=None, names=["Label", "Text"])
    if list(zip(df["Label"], df["Text"])) != rows:
        sys.exit("make_spam_tsv: pandas does not read the TSV back as written")
    return data, {"rows": len(rows), "ham": n_ham, "spam": len(spam), "chunk_chars": 160}


# ----------------------------------------------------------------------------- book files

def book_files(args, root):
    """Copy the book's files for every run into root/<folder>/; their md5s."""
    md5 = {}
    for folder, names in BOOK_FILES.items():
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        for name in names:
            rel = folder + "/" + name
            if args.book_dir:
                with open(os.path.join(args.book_dir, rel), "rb") as f:
                    data = f.read()
            else:
                data = subprocess.run(["git", "--git-dir", args.book_git, "show",
                                       args.book_commit + ":" + rel],
                                      check=True, stdout=subprocess.PIPE).stdout
            with open(os.path.join(root, rel), "wb") as f:
                f.write(data)
            md5[rel] = md5_bytes(data)
    return md5


def apply_patches(text, patches, where):
    for w, old, new, _why in patches:
        if w != where:
            continue
        if text.count(old) != 1:
            sys.exit(f"patch {old!r} matches {text.count(old)} times in {where}")
        text = text.replace(old, new)
    return text


# ----------------------------------------------------------------------------- child side

def state_sha256(model):
    """sha256 over model.state_dict() in order: each name (utf-8) then its tensor's bytes
    (float32, little-endian, row-major)."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode("utf-8"))
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def model_config(model):
    """The book's GPTModel config, read back from the modules."""
    att = model.trf_blocks[0].att
    return {"vocab_size": model.tok_emb.num_embeddings,
            "context_length": model.pos_emb.num_embeddings,
            "drop_rate": model.drop_emb.p,
            "qkv_bias": att.W_query.bias is not None if hasattr(att.W_query, "bias")
            else att.W_query.linear.bias is not None,
            "emb_dim": model.tok_emb.embedding_dim,
            "n_layers": len(model.trf_blocks), "n_heads": att.num_heads}


def gpt2_params(model):
    """GPT-2's checkpoint layout (what the book's gpt_download returns) from a GPTModel."""
    def t(x):
        return x.detach().numpy().copy()
    import numpy as np
    blocks = []
    for b in model.trf_blocks:
        a = b.att
        blocks.append({
            "attn": {"c_attn": {"w": np.concatenate([t(a.W_query.weight).T, t(a.W_key.weight).T,
                                                     t(a.W_value.weight).T], axis=-1),
                                "b": np.concatenate([t(a.W_query.bias), t(a.W_key.bias),
                                                     t(a.W_value.bias)])},
                     "c_proj": {"w": t(a.out_proj.weight).T, "b": t(a.out_proj.bias)}},
            "mlp": {"c_fc": {"w": t(b.ff.layers[0].weight).T, "b": t(b.ff.layers[0].bias)},
                    "c_proj": {"w": t(b.ff.layers[2].weight).T, "b": t(b.ff.layers[2].bias)}},
            "ln_1": {"g": t(b.norm1.scale), "b": t(b.norm1.shift)},
            "ln_2": {"g": t(b.norm2.scale), "b": t(b.norm2.shift)}})
    return {"wte": t(model.tok_emb.weight), "wpe": t(model.pos_emb.weight), "blocks": blocks,
            "g": t(model.final_norm.scale), "b": t(model.final_norm.shift)}


def install_stubs(spec, rec, save_init):
    """The loading steps: tiktoken, gpt_download, importlib.metadata.version."""
    import importlib.metadata
    import torch
    sys.path.insert(0, os.path.join(HERE, "book_ch05"))
    import tiktoken_shim
    sys.modules["tiktoken"] = tiktoken_shim
    real_version = importlib.metadata.version

    def version(name):
        if name == "tiktoken":
            return "npm tiktoken via scripts/book_ch05/tiktoken_shim.py"
        try:
            return real_version(name)
        except importlib.metadata.PackageNotFoundError:
            try:
                return __import__(name).__version__ + " (Debian, no metadata)"
            except ImportError:
                return "not installed"
    importlib.metadata.version = version

    def download_and_load_gpt2(model_size, models_dir):
        import previous_chapters
        cfg = spec["pretrained"]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(123)
            init = previous_chapters.GPTModel(cfg)
        rec["download_and_load_gpt2"] = {"model_size": model_size, "models_dir": models_dir,
                                         "seeded_init_config": cfg, "seed": 123}
        settings = {"n_vocab": cfg["vocab_size"], "n_ctx": cfg["context_length"],
                    "n_embd": cfg["emb_dim"], "n_head": cfg["n_heads"],
                    "n_layer": cfg["n_layers"]}
        return settings, gpt2_params(init)
    gd = types.ModuleType("gpt_download")
    gd.download_and_load_gpt2 = download_and_load_gpt2
    sys.modules["gpt_download"] = gd


def wrap(modules, name, factory):
    """Replace `name` by factory(original) wherever one of `modules` (module or dict)
    binds it."""
    for m in modules:
        d = m if isinstance(m, dict) else m.__dict__
        if name in d and not getattr(d[name], "_book_ch67_wrapped", False):
            w = factory(d[name])
            w._book_ch67_wrapped = True
            d[name] = w


def install_loader_recorders(spec, rec):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    names, owner = {}, {}
    orig_init, orig_iter, orig_sampler_iter = (DataLoader.__init__, DataLoader.__iter__,
                                               RandomSampler.__iter__)

    def dl_init(self, *a, **k):
        orig_init(self, *a, **k)
        names[id(self)] = spec["loaders"][len(names)]
        owner[id(self.sampler)] = names[id(self)]
        rec["loaders"][names[id(self)]] = {
            "dataset_len": len(self.dataset), "batch_size": self.batch_size,
            "drop_last": self.drop_last, "shuffle": isinstance(self.sampler, RandomSampler),
            "num_batches": len(self)}

    def dl_iter(self):
        state = torch.get_rng_state()  # no draw
        it = orig_iter(self)
        g = torch.Generator()
        g.set_state(state)
        draws = [int(torch.empty((), dtype=torch.int64).random_(generator=g).item())
                 for _ in range(2)]
        entry = {"loader": names.get(id(self)), "after_step": len(rec["train_steps"]),
                 "base_seed": int(it._base_seed),
                 "base_seed_is_first_draw": int(it._base_seed) == draws[0]}
        if isinstance(self.sampler, RandomSampler):
            gp = torch.Generator()
            gp.manual_seed(draws[1])
            entry["predicted"] = torch.randperm(len(self.dataset), generator=gp).tolist()
        rec["loader_iterations"].append(entry)
        return it

    def sampler_iter(self):
        perm = list(orig_sampler_iter(self))
        entry = [e for e in rec["loader_iterations"] if e["loader"] == owner.get(id(self))][-1]
        entry["perm"] = perm
        entry["perm_is_randperm_of_second_draw"] = perm == entry.pop("predicted")
        yield from perm

    DataLoader.__init__, DataLoader.__iter__ = dl_init, dl_iter
    RandomSampler.__iter__ = sampler_iter
    return names


def install_recorders(spec, rec, mods, names, save_init, drop_in=""):
    import torch
    swapped = {}

    def run_on(model):
        """The model the book's function gets: with --drop-in swap_model,
        attn.torch.swap_model of the book's (one per model: same
        parameters, so the book's optimizer trains it)."""
        if not drop_in:
            return model
        hit = swapped.get(id(model))
        # (swap_model shares the modules: an attribute the book's code sets on the model
        # itself later, chapter 6's out_head, needs a new swap)
        if hit is None or hit[0] is not model or any(
                hit[1]._modules.get(k) is not v for k, v in model._modules.items()):
            import attn.torch
            hit = swapped[id(model)] = (model, attn.torch.swap_model(model))
        return hit[1]

    def loader_name(dl):
        return names.get(id(dl))

    def f_calc_loss_batch(orig):
        def w(input_batch, target_batch, model, device):
            loss = orig(input_batch, target_batch, model, device)
            if torch.is_grad_enabled():
                rec["train_steps"].append({"loss": loss.item(),
                                           "input_shape": list(input_batch.shape)})
            return loss
        return w

    def f_over_loader(key):
        def factory(orig):
            def w(data_loader, model, device, num_batches=None):
                v = orig(data_loader, run_on(model), device, num_batches=num_batches)
                rec[key].append({"loader": loader_name(data_loader), "num_batches": num_batches,
                                 "after_step": len(rec["train_steps"]), "value": v})
                return v
            return w
        return factory

    def f_train(orig):
        def w(model, train_loader, val_loader, optimizer, device, **kw):
            trainable = [n for n, p in model.named_parameters() if p.requires_grad]
            rec["training"] = {
                "kwargs": {k: v for k, v in kw.items() if k != "tokenizer"},
                "optimizer": dict(type=type(optimizer).__name__, **{
                    k: v for k, v in optimizer.defaults.items()
                    if isinstance(v, (int, float, bool, tuple, type(None)))}),
                "model_config": model_config(model),
                "state_sha256_at_start": state_sha256(model),
                "trainable": trainable,
                "num_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "num_params": sum(p.numel() for p in model.parameters())}
            if save_init:
                # The exact start (head, LoRA A/B included) for a replay of the training.
                path = os.path.join(save_init, f"{spec['run']}_train_start.pth")
                torch.save(model.state_dict(), path)
            out = orig(run_on(model), train_loader, val_loader, optimizer, device, **kw)
            keys = (("train_losses", "val_losses", "train_accs", "val_accs", "examples_seen")
                    if len(out) == 5 else ("train_losses", "val_losses", "tokens_seen"))
            rec["result"] = dict(zip(keys, out))
            return out
        return w

    def f_generate(key):
        def factory(orig):
            def w(model, idx, max_new_tokens, context_size, *a, **k):
                out = orig(run_on(model), idx, max_new_tokens, context_size, *a, **k)
                rec[key].append({"prompt_len": idx.shape[1], "max_new_tokens": max_new_tokens,
                                 "context_size": context_size, "ids": out[0].tolist(),
                                 **{n: v for n, v in k.items() if isinstance(v, (int, float))}})
                return out
            return w
        return factory

    def f_load(orig):
        def w(gpt, params):
            orig(gpt, params)
            rec["loaded_state_sha256"] = state_sha256(gpt)
            if save_init:
                cfg = model_config(gpt)
                tag = "124m" if cfg == GPT2_124M else "tiny"
                path = os.path.join(save_init, f"book_gpt2_{tag}_seed123.pth")
                torch.save(gpt.state_dict(), path)
        return w

    wrap(mods, "calc_loss_batch", f_calc_loss_batch)
    wrap(mods, "calc_loss_loader", f_over_loader("loss_loader_calls"))
    wrap(mods, "calc_accuracy_loader", f_over_loader("accuracy_calls"))
    wrap(mods, "train_classifier_simple", f_train)
    wrap(mods, "train_model_simple", f_train)
    wrap(mods, "generate", f_generate("generate_calls"))
    wrap(mods, "generate_text_simple", f_generate("generate_text_simple_calls"))
    wrap(mods, "load_weights_into_gpt", f_load)


def main_block(src, path):
    """The body of the script's `if __name__ == "__main__":`, compiled at its own lines."""
    for node in ast.parse(src, path).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return compile(ast.Module(body=node.body, type_ignores=[]), path, "exec")
    sys.exit(f"{path}: no __main__ block")


def classifier_epilogue(spec, rec, ns):
    """After a chapter-6 / appendix-E run: the trained classifier's last-token logits and
    predictions on the test set (for `attn classify`), and, for the script, the final
    accuracies on the whole loaders as ch06.ipynb computes them after training (the
    script stops at its plots; the notebook already ends with them)."""
    import torch
    model, device = ns["model"], ns["device"]
    if spec["file"].endswith(".py"):
        rec["final_accuracies"] = {
            name: ns["calc_accuracy_loader"](ns[name + "_loader"], model, device)
            for name in SPAM_LOADERS}
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(input_batch.to(device))[:, -1, :]
                            for input_batch, _ in ns["test_loader"]])
    rec["test_last_token_logits"] = logits.tolist()
    rec["test_predictions"] = torch.argmax(logits, dim=-1).tolist()


def run_child(args):
    spec = dict(RUNS[args.child], run=args.child)
    folder = os.path.join(args.book_root, spec["folder"])
    rec = {"train_steps": [], "loss_loader_calls": [], "accuracy_calls": [],
           "loader_iterations": [], "loaders": {}, "generate_calls": [],
           "generate_text_simple_calls": []}
    install_stubs(spec, rec, args.save_init)
    import torch
    names = install_loader_recorders(spec, rec)
    sys.path.insert(0, folder)
    os.chdir(args.workdir)
    import previous_chapters
    tee = Tee(sys.stdout)
    t0 = time.time()
    if spec["file"].endswith(".py"):
        path = os.path.join(folder, spec["file"])
        with open(path, encoding="utf-8") as f:
            src = apply_patches(f.read(), spec["patches"], "source")
        mod = types.ModuleType(spec["file"][:-3])
        mod.__file__ = path
        sys.modules[mod.__name__] = mod
        exec(compile(src, path, "exec"), mod.__dict__)
        install_recorders(spec, rec, [previous_chapters, mod], names, args.save_init,
                          args.drop_in)
        if "responses_limit" in spec:
            mod.tqdm = lambda it, total=None, **k: itertools.islice(it, spec["responses_limit"])
        code = main_block(src, path)
        sys.argv = [spec["file"]] + spec["argv"]
        sys.stdout = tee
        try:
            exec(code, mod.__dict__)
        finally:
            sys.stdout = tee.a
        ns = mod.__dict__
    else:
        install_recorders(spec, rec, [previous_chapters], names, args.save_init, args.drop_in)
        with open(os.path.join(folder, spec["file"]), encoding="utf-8") as f:
            nb = json.load(f)
        ns = {"__name__": "__main__"}
        sys.stdout = tee
        try:
            for i, cell in enumerate(nb["cells"]):
                if cell["cell_type"] == "code":
                    src = apply_patches("".join(cell["source"]), spec["patches"], i)
                    exec(compile(src, f"{spec['file']}[cell {i}]", "exec"), ns)
        finally:
            sys.stdout = tee.a
    rec["stdout"] = WALL_LINE.sub(r"\1N\2", tee.buf.getvalue())
    if spec["data"] == "spam":
        classifier_epilogue(spec, rec, ns)
    print(f"== {args.child}: {time.time() - t0:.1f} s", file=sys.stderr)
    rec["run_info"] = {"torch_version": torch.__version__,
                       "torch_num_threads": torch.get_num_threads(),
                       "blas": blas_info(), "cpu_model": cpu_model(),
                       "python_version": platform.python_version()}
    if spec["data"] == "instruction":
        with open("instruction-data-with-response-standalone.json", encoding="utf-8") as f:
            rec["responses"] = [e["model_response"] for e in json.load(f)
                                if "model_response" in e]
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(rec, f, ensure_ascii=False)


# ----------------------------------------------------------------------------- parent side

def describe(name, spec, files_md5, data_info, args):
    return {
        "run": name,
        "book": {"repo": "rasbt/LLMs-from-scratch", "commit": args.book_commit,
                 "file": spec["folder"] + "/" + spec["file"],
                 "files_md5": {k: v for k, v in files_md5.items()
                               if k.startswith(spec["folder"] + "/")}},
        "argv": [spec["file"]] + spec["argv"],
        "patches": [{"where": "source" if w == "source" else f"cell {w}", "from": o, "to": n,
                     "why": why} for w, o, n, why in spec["patches"]],
        "pretrained": None if spec["pretrained"] is None else {
            "what": "gpt_download.download_and_load_gpt2 replaced: GPT-2's parameter layout "
                    "filled from the book's GPTModel(config) after torch.manual_seed(123) "
                    "(under fork_rng); the book's load_weights_into_gpt loads it unchanged",
            "config": spec["pretrained"]},
        "responses_limit": spec.get("responses_limit"),
        "seeds": {"torch.manual_seed(123)": spec["seeds"],
                  "pretrained_init": None if spec["pretrained"] is None else 123},
        "data": data_info[spec["data"]],
        "data_subset": data_subset(spec, data_info),
    }


def data_subset(spec, data_info):
    """Which data rows each split holds, as the book's code chooses them."""
    if spec["data"] == "spam":
        return {"train": "train.csv (all rows)", "val": "validation.csv (all rows)",
                "test": "test.csv (all rows)"}
    n = data_info["instruction"]["entries"]
    train, test = int(n * 0.85), int(n * 0.1)
    keep = 10 if spec["argv"] == ["--test_mode"] or spec.get("responses_limit") else None
    split = {"train": (0, train), "test": (train, train + test), "val": (train + test, n)}
    out = {k: [a, min(b, a + keep) if keep else b] for k, (a, b) in split.items()}
    out["what"] = ("[first, end) entry indices of instruction-data.json: the script's "
                   "85% / 10% / rest split" + (", each cut to its first 10 (main(test_mode))"
                                                if keep else ""))
    if spec.get("responses_limit"):
        out["responses_for"] = [out["test"][0], out["test"][0] + spec["responses_limit"]]
    return out


def run_all(args, names, out_dir):
    scratch = tempfile.mkdtemp(prefix="book_ch67_")
    try:
        root = os.path.join(scratch, "book")
        files_md5 = book_files(args, root)
        tsv, tsv_info = make_spam_tsv(os.path.join(args.data_dir, "the-verdict.txt"),
                                      os.path.join(args.data_dir, "tinyshakespeare.txt"))
        instr = os.path.join(args.data_dir, "book", "instruction-data.json")
        with open(instr, "rb") as f:
            instr_bytes = f.read()
        data_info = {
            "spam": dict(file="sms_spam_collection/SMSSpamCollection.tsv", md5=md5_bytes(tsv),
                         made_by="make_spam_tsv in scripts/gen_book_ch67_fixtures.py",
                         **tsv_info),
            "instruction": {"file": "instruction-data.json", "md5": md5_bytes(instr_bytes),
                            "entries": len(json.loads(instr_bytes))}}
        csvs = None
        for name in names:
            spec = RUNS[name]
            wd = os.path.join(scratch, name)
            if spec["data"] == "spam":
                os.makedirs(os.path.join(wd, "sms_spam_collection"))
                with open(os.path.join(wd, data_info["spam"]["file"]), "wb") as f:
                    f.write(tsv)
            else:
                os.makedirs(wd)
                shutil.copyfile(instr, os.path.join(wd, "instruction-data.json"))
            res = os.path.join(scratch, name + ".json")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", name,
                   "--book-root", root, "--workdir", wd, "--result", res,
                   "--node-modules", args.node_modules]
            if args.save_init:
                cmd += ["--save-init", os.path.abspath(args.save_init)]
            if args.drop_in:
                cmd += ["--drop-in", args.drop_in]
            env = dict(os.environ, MPLBACKEND="Agg", NODE_PATH=args.node_modules)
            print(f"== {name}", file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, env=env)
            with open(res, encoding="utf-8") as f:
                rec = describe(name, spec, files_md5, data_info, args) | json.load(f)
            if spec["data"] == "spam":
                got = {n: open(os.path.join(wd, n), "rb").read() for n in CSV_NAMES}
                if csvs is not None and got != csvs:
                    sys.exit(f"{name}: the book's code wrote other CSVs than the previous run")
                csvs = got
                rec["csv_md5"] = {n: md5_bytes(b) for n, b in got.items()}
            with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as f:
                json.dump(rec, f, indent=1, ensure_ascii=False)
                f.write("\n")
            shutil.rmtree(wd)
        if csvs is not None:
            for n, b in csvs.items():
                with open(os.path.join(out_dir, n), "wb") as f:
                    f.write(b)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compare(a, b, path, bad, tol):
    """Differences between a fixture (a) and a fresh run (b): floats beyond tol, anything
    else unequal. run_info and the wall-clock line are skipped."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k != "run_info":
                compare(a.get(k), b.get(k), f"{path}.{k}", bad, tol)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", bad, tol)
    elif isinstance(a, float) and isinstance(b, float):
        if abs(a - b) > tol:
            bad.append(f"{path}: {a!r} vs {b!r}")
    elif isinstance(a, str) and isinstance(b, str) and path.endswith(".stdout"):
        if a != b:
            bad.append(f"{path}: differs")
    elif a != b:
        bad.append(f"{path}: {str(a)[:80]!r} vs {str(b)[:80]!r}")


def check(args):
    """Re-run the small runs into a scratch folder; compare with the fixtures (floats within
    --tol, all else exact; byte-identical is reported) and check that the saved training
    starts (the weights a replay needs, not committed) hash to state_sha256_at_start."""
    import torch
    tmp = tempfile.mkdtemp(prefix="book_ch67_check_")
    bad, same = [], []
    try:
        args.save_init = args.save_init or os.path.join(tmp, "init")
        os.makedirs(args.save_init, exist_ok=True)
        run_all(args, TEST_MODE_RUNS, tmp)
        for n in CSV_NAMES + tuple(name + ".json" for name in TEST_MODE_RUNS):
            with open(os.path.join(args.out_dir, n), "rb") as f:
                want = f.read()
            with open(os.path.join(tmp, n), "rb") as f:
                got = f.read()
            if want == got:
                same.append(n)
            elif n.endswith(".csv"):
                bad.append(n + ": differs")
            else:
                compare(json.loads(want), json.loads(got), n[:-5], bad, args.tol)
        for name in TEST_MODE_RUNS:
            with open(os.path.join(args.out_dir, name + ".json"), encoding="utf-8") as f:
                want = json.load(f)["training"]["state_sha256_at_start"]
            sd = torch.load(os.path.join(args.save_init, name + "_train_start.pth"))
            got = state_sha256(types.SimpleNamespace(state_dict=lambda: sd))
            if got != want:
                bad.append(f"{name}_train_start.pth: sha256 {got} vs {want}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for line in bad[:40]:
        print(line)
    print(f"--check: {len(bad)} difference(s) in {', '.join(TEST_MODE_RUNS)} and the CSVs "
          f"(float tolerance {args.tol}); byte-identical: {', '.join(same) or 'none'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book-git", default=BOOK_GIT,
                    help="git directory of rasbt/LLMs-from-scratch (read with git show)")
    ap.add_argument("--book-commit", default=BOOK_COMMIT)
    ap.add_argument("--book-dir", default="",
                    help="a checkout of LLMs-from-scratch instead of --book-git")
    ap.add_argument("--node-modules", required=True,
                    help="node_modules folder holding npm's tiktoken")
    ap.add_argument("--data-dir", default="/work/shared/data",
                    help="holds the-verdict.txt, tinyshakespeare.txt, book/instruction-data.json")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "..", "tests", "fixtures",
                                                      "book_ch67"))
    ap.add_argument("--runs", default=",".join(TEST_MODE_RUNS),
                    help="comma-separated subset of: " + ", ".join(RUNS) + "; 'fixtures': "
                    "what tests/fixtures/book_ch67/ holds (adds the 124M runs, ~15 min here)")
    ap.add_argument("--check", action="store_true",
                    help="re-run the test-mode runs and compare with --out-dir's fixtures")
    ap.add_argument("--tol", type=float, default=1e-6, help="--check's float tolerance")
    ap.add_argument("--save-init", default="",
                    help="folder to write the seeded 'pretrained' models as the book's .pth")
    ap.add_argument("--drop-in", default="", choices=["", "swap_model"],
                    help="run the book's training, evaluation and generation functions on "
                    "attn.torch.swap_model(model) (with --check --tol 1e-5: attn's drop-in "
                    "against the fixtures)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--book-root", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_child(args)
    args.node_modules = os.path.abspath(args.node_modules)
    if args.check:
        return check(args)
    names = FIXTURE_RUNS if args.runs == "fixtures" else [n for n in args.runs.split(",") if n]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        ap.error(f"unknown run(s): {', '.join(unknown)}")
    os.makedirs(args.out_dir, exist_ok=True)
    if args.save_init:
        os.makedirs(args.save_init, exist_ok=True)
    run_all(args, names, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
