"""attn.train(task="classify" | "instruct") and attn.GPT.classify against the
attn program on the same runs (tests/finetune_classify.sh's and
tests/finetune_instruct.sh's commands, the book's chapter-6 CSVs in
tests/fixtures/book_ch67): every loss and accuracy RUN/log.csv holds, the
lines printed, the run folder's bytes, each text's label and
probabilities as `attn classify` prints them; bad input raises attn.Error
and writes nothing."""
import csv
import json
import os
import subprocess

import pytest

import attn

from conftest import ATTN_BIN, SRC

FIX = os.path.join(SRC, "tests", "fixtures", "book_ch67")
GPT2 = os.path.join(SRC, "data", "gpt2")
BOOK_DATA = [os.path.join(SRC, "data", "book", "instruction-data.json"),
             os.path.join(SRC, "..", "shared", "data", "book", "instruction-data.json")]
# chapter 6's --test_mode model (gpt_class_finetune.py): GPTModel after manual_seed(123)
CFG = {"vocab_size": 50257, "context_length": 120, "drop_rate": 0.0, "qkv_bias": False,
       "emb_dim": 12, "n_layers": 1, "n_heads": 2}
SETS = dict(data=os.path.join(FIX, "train.csv"), val=os.path.join(FIX, "validation.csv"))


def _cli(*args):
    return subprocess.run([ATTN_BIN, *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The book's tiny GPT-2-vocabulary model as a .pth."""
    if not os.path.exists(os.path.join(GPT2, "vocab.bpe")):
        pytest.skip("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)")
    torch = pytest.importorskip("torch")
    import attn.book as book
    os.environ.setdefault("ATTN_GPT2_DIR", GPT2)
    d = tmp_path_factory.mktemp("ft")
    torch.manual_seed(123)
    torch.save(book.GPTModel(CFG).state_dict(), d / "ch06.pth")
    return d


def _log_rows(run):
    with open(os.path.join(run, "log.csv")) as f:
        return [r for r in csv.reader(f)][1:]


def _both(base, capfd, name, cli_args, **kw):
    """The CLI's run and attn.train's of the same request: (cli stdout, py stdout, result)."""
    cli = _cli("train", "--init-from", base / "ch06.pth", "--n-heads", 2, "--out",
               base / f"{name}_cli", *cli_args)
    assert cli.returncode == 0, cli.stderr
    capfd.readouterr()
    r = attn.train(init_from=base / "ch06.pth", n_heads=2, out=base / f"{name}_py", **kw)
    return cli.stdout, capfd.readouterr().out, r


def _book_lines(text):
    return [l for l in text.splitlines() if l.startswith(("Ep ", "Training accuracy",
                                                          "Below is"))]


def _tree(run):
    """{relative path: ("link", target) | ("file", bytes)} of every entry under run."""
    out = {}
    for d, dirs, files in os.walk(run):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, run)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


@pytest.mark.parametrize("lora", [False, True])
def test_classify_train_equals_the_cli(base, capfd, lora):
    extra = dict(lora_rank=16, lora_alpha=16, learning_rate=8e-4, epochs=2) if lora else {}
    flags = ["--lora-rank", 16, "--lora-alpha", 16, "--lr", 8e-4, "--epochs", 2] if lora else []
    name = "lora" if lora else "ch06"
    out_cli, out_py, r = _both(base, capfd, name,
                               ["--task", "classify", "--data", SETS["data"], "--val",
                                SETS["val"], *flags],
                               task="classify", **SETS, **extra)
    assert _book_lines(out_py) == _book_lines(out_cli) and _book_lines(out_py)
    rows = _log_rows(base / f"{name}_cli")
    want_l = [(int(a[1]), int(a[2]), float(a[3]), float(a[4])) for a in rows if a[0] == "loss"]
    want_a = [(int(a[1]), float(a[3]), float(a[4])) for a in rows if a[0] == "accuracy"]
    final = [(float(a[3]), float(a[4])) for a in rows if a[0] == "final_accuracy"]
    assert r.evals == want_l and r.accuracies == want_a and [r.final] == final
    assert r.steps == int([a for a in rows if a[0] == "final_accuracy"][0][2])
    assert len(r.history) == r.steps and r.history[0][0] == 0 and r.history[-1][0] == r.steps - 1
    assert r.out == os.path.abspath(base / f"{name}_py") and r.initial is None
    for f in ("log.csv", "model.safetensors"):  # the same run folder, byte for byte
        assert (base / f"{name}_py" / f).read_bytes() == (base / f"{name}_cli" / f).read_bytes()
    gpt = attn.GPT.load(r.out)
    assert gpt.task == "classify" and gpt.n_classes == 2
    assert gpt.finetune["lora_rank"] == (16 if lora else 0)
    assert gpt.finetune["trainable"] == ("adapters" if lora else "last-block")


def _killed_cli_run(base, out, args, straight="resume_full"):
    """The CLI's run held (tests/shim/fault_inject.c) at half its file operations in out,
    killed -9: a checkpoint there, the run not finished. Returns the straight run's folder
    (base / straight) and stdout."""
    shim = os.path.join(os.path.dirname(ATTN_BIN), "libattn_fault.so")
    if not os.path.exists(shim):
        pytest.skip("no fault shim (libattn_fault.so) next to the attn program")
    env = dict(os.environ, OMP_NUM_THREADS="1", LD_PRELOAD=shim,
               ASAN_OPTIONS="verify_asan_link_order=0")
    ops = base / f"{straight}.ops"
    full = base / straight
    run = subprocess.run([ATTN_BIN, *map(str, args), "--out", str(full)], capture_output=True,
                         text=True, env=dict(env, ATTN_FAULT_DIR=f"{full}/",
                                             ATTN_FAULT_LOG=str(ops)))
    assert run.returncode == 0, run.stderr
    k = len(ops.read_text().splitlines()) // 2
    p = subprocess.Popen([ATTN_BIN, *map(str, args), "--out", str(out)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(env, ATTN_FAULT_DIR=f"{out}/", ATTN_FAULT_AT=str(k),
                                  ATTN_FAULT_MODE="stop"))
    while p.poll() is None:
        with open(f"/proc/{p.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                break
    p.kill()
    p.wait()
    assert (out / "latest").is_symlink() and not (out / "log.csv").exists()
    return full, run.stdout


def test_resume_a_killed_run(base, capfd):
    """attn.train(resume=True) continues a run the program started (and was killed in) bit for
    bit: the straight run's model and log.csv; resuming it again trains nothing; a resume of
    other settings or of no run raises, the folder as it was."""
    args = ["train", "--task", "classify", "--n-heads", 2, "--init-from", base / "ch06.pth",
            "--data", SETS["data"], "--val", SETS["val"], "--epochs", 3, "--eval-interval", 4]
    out = base / "resume_killed"
    full, _ = _killed_cli_run(base, out, args)
    kw = dict(task="classify", init_from=base / "ch06.pth", n_heads=2, out=out, epochs=3,
              eval_interval=4, **SETS)
    capfd.readouterr()
    r = attn.train(resume=True, **kw)
    printed = capfd.readouterr().out
    for f in ("log.csv", "model.safetensors"):
        assert (out / f).read_bytes() == (full / f).read_bytes()
    rows = _log_rows(full)
    assert r.steps == int([a for a in rows if a[0] == "final_accuracy"][0][2])
    assert len(_book_lines(printed)) == len([a for a in rows if a[0] in ("loss", "accuracy")])
    before = {f: (out / f).read_bytes() for f in ("log.csv", "model.safetensors")}
    again = attn.train(resume=True, **kw)  # finished: nothing trained, the same lines
    assert again.evals == r.evals and again.final == r.final and not again.history
    with pytest.raises(attn.Error, match="seed"):
        attn.train(resume=True, **dict(kw, seed=7))
    assert {f: (out / f).read_bytes() for f in before} == before
    with pytest.raises(attn.Error, match="holds no checkpoint"):
        attn.train(resume=True, **dict(kw, out=base / "resume_none"))
    assert not (base / "resume_none").exists()


def test_resume_an_instruct_run_prints_its_samples(base, capfd):
    """attn.train(task="instruct", resume=True) of a run killed after epoch 1's sample (and the
    checkpoint that keeps it): the straight run's printed lines, both epochs' samples among
    them at their place, and its files."""
    data = next((p for p in BOOK_DATA if os.path.exists(p)), None)
    if data is None:
        pytest.skip("no instruction-data.json (scripts/get-data.sh book)")
    args = ["train", "--task", "instruct", "--n-heads", 2, "--init-from", base / "ch06.pth",
            "--data", data, "--limit", 10, "--eval-interval", 1]
    out = base / "iresume_killed"
    full, straight = _killed_cli_run(base, out, args, "iresume_full")
    assert b'"samples":{"dtype":"U8"' in (out / "latest" / "train_state.safetensors").read_bytes()
    capfd.readouterr()
    r = attn.train(task="instruct", resume=True, init_from=base / "ch06.pth", n_heads=2, out=out,
                   data=data, limit=10, eval_interval=1)
    printed = capfd.readouterr().out
    want = [l for l in straight.splitlines() if l.startswith("Below is")]
    assert len(want) == 2 and [t for _, t in r.samples] == want
    assert [e for e, _ in r.samples] == [1, 2]
    assert _book_lines(printed) == _book_lines(straight)  # attn.train prints no initial losses
    assert [r.initial] == [(float(a[3]), float(a[4])) for a in _log_rows(full)
                           if a[0] == "initial_loss"]
    for f in ("log.csv", "model.safetensors", "responses.json"):
        assert (out / f).read_bytes() == (full / f).read_bytes()


def test_classify_equals_the_cli(base, capfd):
    run = base / "ch06_cli"
    if not run.exists():
        _both(base, capfd, "ch06", ["--task", "classify", "--data", SETS["data"], "--val",
                                    SETS["val"]], task="classify", **SETS)
    with open(os.path.join(FIX, "test.csv")) as f:
        texts = [r["Text"] for r in csv.DictReader(f)][:6] + ["", "x" * 2000]
    cli = _cli("classify", run, *texts)
    assert cli.returncode == 0, cli.stderr
    with attn.GPT.load(run) as gpt:
        got = gpt.classify(texts)
        assert gpt.classify(texts[0]) == got[0]
    for line, (label, probs), t in zip(cli.stdout.splitlines(), got, texts):
        want_label, want_probs, text = line.split("\t", 2)
        assert text == t and label == int(want_label)
        assert " ".join(f"{p:.6f}" for p in probs) == want_probs
        assert abs(sum(probs) - 1) < 1e-12 and max(probs) == probs[label]


def test_bad_input_raises(base, tmp_path):
    run = base / "ch06_cli"
    pth = base / "ch06.pth"
    out = tmp_path / "new"
    cases = [
        (dict(data=tmp_path / "missing.csv"), "missing.csv"),
        (dict(data=SETS["data"], lora_rank=0), "lora_rank"),
        (dict(data=SETS["data"], lora_rank=4, trainable="all"), "trainable"),
        (dict(data=SETS["data"], trainable="middle"), "trainable"),
        (dict(data=SETS["data"], mask_prompt=1), "mask_prompt"),
        (dict(data=SETS["data"], warmup_steps=3), "warmup_steps"),
        (dict(data=SETS["data"], epochs=1.5), "epochs"),
        (dict(data=SETS["data"], preset="tiny"), "preset"),
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text("Label,Text\n1,fine\nspam,not a number\n")
    cases.append((dict(data=bad), "bad.csv:3: the label"))
    for kw, needle in cases:
        with pytest.raises(attn.Error, match=needle):
            attn.train(task="classify", init_from=pth, n_heads=2, out=out, **kw)
        assert not out.exists(), kw  # nothing written
    with pytest.raises(attn.Error, match="task"):
        attn.train(task="regress", init_from=pth, data=SETS["data"], out=out)
    if run.exists():
        with pytest.raises(attn.Error, match="task classify"):  # a classifier is no base
            attn.train(task="classify", init_from=run, data=SETS["data"], out=out)
        with pytest.raises(attn.Error, match="not an empty folder"):  # nothing overwritten
            attn.train(task="classify", init_from=pth, n_heads=2, data=SETS["data"], out=run)
        with attn.GPT.load(run) as gpt:
            with pytest.raises(attn.Error, match="no language head"):
                gpt.forward([[1, 2, 3]])
            with pytest.raises(attn.Error, match="no language head"):
                gpt.generate("x", 3)
            with pytest.raises(attn.Error, match="texts"):
                gpt.classify(3)
    with attn.GPT.load(pth, n_heads=2) as lm:
        assert lm.task == "lm"
        with pytest.raises(attn.Error, match="not a classifier"):
            lm.classify(["hello"])


def test_instruct_train_equals_the_cli(base, capfd):
    data = next((p for p in BOOK_DATA if os.path.exists(p)), None)
    if data is None:
        pytest.skip("no instruction-data.json (scripts/get-data.sh book)")
    out_cli, out_py, r = _both(base, capfd, "sft",
                               ["--task", "instruct", "--data", data, "--limit", 10, "--epochs",
                                1],
                               task="instruct", data=data, limit=10, epochs=1)
    assert _book_lines(out_py) == _book_lines(out_cli) and _book_lines(out_py)
    rows = _log_rows(base / "sft_cli")
    assert [r.initial] == [(float(a[3]), float(a[4])) for a in rows if a[0] == "initial_loss"]
    assert r.evals == [(int(a[1]), int(a[2]), float(a[3]), float(a[4])) for a in rows
                       if a[0] == "loss"]
    assert r.accuracies == [] and r.final is None
    # the script's per-epoch sample, printed by both, and returned
    assert [l for l in out_py.splitlines() if l.startswith("Below is")] == [t for _, t in r.samples]
    assert [e for e, _ in r.samples] == [1] and r.samples[0][1].startswith("Below is")
    # the run folders, file by file: checkpoints, links, log.csv, responses.json
    cli, py = _tree(base / "sft_cli"), _tree(base / "sft_py")
    assert sorted(py) == sorted(cli) and "responses.json" in py and "log.csv" in py
    for f in cli:
        assert py[f] == cli[f], f
    responses = json.loads(cli["responses.json"][1])
    assert len(responses) == 10 and all("model_response" in e for e in responses)
    with attn.GPT.load(r.out) as gpt:
        assert gpt.task == "instruct" and gpt.n_classes is None
        with pytest.raises(attn.Error, match="not a classifier"):
            gpt.classify("hello")
    with pytest.raises(attn.Error, match="val"):
        attn.train(task="instruct", init_from=base / "ch06.pth", n_heads=2, data=data,
                   val=data, out=base / "sft_bad")
