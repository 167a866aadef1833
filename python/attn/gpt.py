"""The GPT: a trained checkpoint (attn.GPT; char or GPT-2 tokenizer) and the
trainer (attn.train), over the library's GPT, generator and training loop."""
import codecs
import collections
import ctypes
import json
import os
import sys
import tempfile
import weakref

import numpy as np

from . import _lib
from ._lib import Error, lib
from .modules import _c_array, _index, as_array, ptr

# generate's precisions (attn/engine.h's attn_precision)
_GEN_PRECISIONS = {"fp32": 0, "bf16": 1}


class GPT:
    """A checkpoint of `attn train` loaded for inference (eval mode, fp32):

        gpt = attn.GPT.load("runs/tiny")
        gpt.forward(ids)                 # (B, T) ids -> (B, T, vocab_size) logits
        gpt.loss(ids, targets)           # mean cross-entropy
        gpt.generate("ROMEO:", 100)      # as `attn generate` (same seed, same text)
        gpt.attention("ROMEO:")          # (n_layers, n_heads, T, T) weights
        gpt.to_torch()                   # the book's GPTModel with these weights

    config (the book's keys), tokenizer ("char" or "gpt2": GPT-2's BPE,
    which the checkpoint carries), vocabulary (char: the characters in id
    order; gpt2: None), step and n_params describe it; close() (or `with`,
    or collection) frees it. A gpt2 model's tokens are bytes: decoding and
    generation give str with invalid UTF-8 (a character cut by
    max_new_tokens) as U+FFFD (errors="replace")."""

    def __init__(self, handle, source):
        # Every C call holds the handle: close() in another thread waits for it.
        self._handle = _lib.Handle(handle, lib.attn_h_gpt_free, "GPT")
        self._finalizer = weakref.finalize(self, self._handle.close)
        info = json.loads(_lib.take_string(lib.attn_h_gpt_info_json(handle)))
        self.source = source
        self.config = info["config"]
        self.tokenizer = info.get("tokenizer", "char")
        self.vocabulary = info.get("vocabulary")
        self.step = int(info["step"])
        self.n_params = int(info["n_params"])
        # "lm", or a fine-tuned run's "classify" / "instruct" (attn train --task)
        self.task = info.get("task", "lm")
        self.n_classes = info.get("n_classes")
        self.finetune = {k: info[k] for k in ("max_len", "lora_rank", "lora_alpha", "trainable")
                         if k in info}
        self._ids = {c: i for i, c in enumerate(self.vocabulary or "")}
        self._params = _lib.params(lib.attn_h_gpt_params(handle))

    @classmethod
    def load(cls, path, n_heads=None):
        """A model from any weights file attn reads: a run folder of `attn
        train` (its live checkpoint), its best/ folder or a model
        .safetensors file, with the tokenizer it carries; or GPT-2 weights of
        other programs, paired with GPT-2's tokenizer (its vocabulary files,
        found as attn.tokenizer.gpt2_dir() finds them): Hugging Face GPT2LMHeadModel
        safetensors, llm.c's gpt2_124M.bin, the book's torch.save
        `model.pth` (read without torch: nothing in it is executed).

        n_heads: for weights that do not say (a .pth, an HF file without
        config.json) and whose width is not GPT-2's (768, 1024, 1280, 1600);
        None: as the file says. The whole model runs in C (float32)."""
        heads = 0 if n_heads is None else _lib.cint("GPT.load: n_heads", n_heads, lo=1)
        h = ctypes.c_void_p()
        _lib.call(lib.attn_h_gpt_load_weights, _lib.path(path, "GPT.load: path"), heads,
                  ctypes.byref(h))
        return cls(h.value, os.fspath(path))

    # -- state -----------------------------------------------------------------

    def _live(self):
        """The handle, for a `with` block that holds the model (attn.Error once closed)."""
        if self._handle.closed:
            raise Error("GPT is closed", "state")
        return self._handle

    def close(self):
        """Free the C model (waits for calls in flight); later calls raise
        attn.Error."""
        self._handle.close()
        self._finalizer.detach()

    @property
    def closed(self):
        """Whether close() has freed the model."""
        return self._handle.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        c = self.config
        return (f"attn.GPT({self.source!r}: step {self.step}, {self.n_params} parameters, "
                f"vocab {c['vocab_size']}, ctx {c['context_length']}, emb {c['emb_dim']}, "
                f"{c['n_heads']} heads, {c['n_layers']} layers)")

    # -- text ------------------------------------------------------------------

    def encode(self, text, allowed_special=False):
        """The ids of text (int64): one per character (char), or GPT-2's BPE
        tokens (gpt2; allowed_special: <|endoftext|> is the one token 50256,
        else plain text)."""
        if not isinstance(text, str):
            raise Error(f"encode: text must be a str, got {type(text).__name__}")
        if self.tokenizer != "char":
            data = _lib.text(text, "encode: text")
            ids = np.empty(len(data) + 1, np.int64)
            n = ctypes.c_size_t()
            with self._live() as h:
                _lib.call(lib.attn_h_gpt_encode, h, data, len(data), int(bool(allowed_special)),
                          ptr(ids), len(ids), ctypes.byref(n))
            return ids[:n.value].copy()
        ids = np.empty(len(text), np.int64)
        for i, ch in enumerate(text):
            if ch not in self._ids:
                raise Error(f"character {ch!r} at position {i} is not in the model's vocabulary "
                            f"({len(self.vocabulary)} characters)")
            ids[i] = self._ids[ch]
        return ids

    def decode_bytes(self, ids):
        """The bytes of ids (a gpt2 token may hold part of a character)."""
        ids = np.ascontiguousarray(as_array(ids, "decode: ids", np.int64, "iu").reshape(-1))
        n = ctypes.c_size_t()
        with self._live() as h:
            _lib.call(lib.attn_h_gpt_decode, h, ptr(ids), ids.size, None, 0, ctypes.byref(n))
            out = ctypes.create_string_buffer(n.value + 1)
            _lib.call(lib.attn_h_gpt_decode, h, ptr(ids), ids.size, out, n.value + 1,
                      ctypes.byref(n))
        return out.raw[:n.value]

    def decode(self, ids, errors="replace"):
        """The text of ids: the characters (char), or the bytes as UTF-8 with
        invalid sequences replaced (gpt2; errors as bytes.decode)."""
        if self.tokenizer != "char":
            return self.decode_bytes(ids).decode("utf-8", errors)
        ids = as_array(ids, "decode: ids", np.int64, "iu")
        v = len(self.vocabulary)
        bad = ids[(ids < 0) | (ids >= v)]
        if bad.size:
            raise Error(f"decode: id {int(bad[0])} is outside [0, {v})")
        return "".join(self.vocabulary[i] for i in ids.reshape(-1))

    # -- classifying -------------------------------------------------------------

    def classify(self, texts):
        """A classifier run's (attn train --task classify; gpt.task ==
        "classify") predictions as `attn classify RUN TEXT...` prints them:
        for each text (a str, or a list of them) (label, probabilities),
        the argmax and the softmax of the last position's logits, the text
        cut and padded to the run's length as the book's classify_review.
        A str gives one pair, a list a list. Another model raises
        attn.Error."""
        one = isinstance(texts, str)
        items = [texts] if one else texts
        if not isinstance(items, (list, tuple)):
            raise Error(f"classify: texts must be a str or a list of str, got "
                        f"{type(texts).__name__}")
        if self.task != "classify":
            raise Error(f"classify: {self.source} is not a classifier (task {self.task}): "
                        "attn.train(task=\"classify\", ...) makes one")
        out = []
        probs = np.empty(self.n_classes, np.float64)
        label = ctypes.c_int()
        for i, t in enumerate(items):
            data = _lib.text(t, f"classify: texts[{i}]")
            with self._live() as h:
                _lib.call(lib.attn_h_gpt_classify, h, data, len(data), ctypes.byref(label),
                          ptr(probs), self.n_classes)
            out.append((int(label.value), [float(p) for p in probs]))
        return out[0] if one else out

    # -- computing -------------------------------------------------------------

    def _batch(self, ids, what):
        a = as_array(ids, what, np.int64, "iu")
        if a.ndim not in (1, 2) or a.size == 0:
            raise Error(f"{what} must be (B, T) or (T,) token ids, got {tuple(a.shape)}", "shape")
        return a, (a[None, :] if a.ndim == 1 else a)

    def forward(self, ids):
        """Logits (B, T, vocab_size) for ids (B, T); (T, vocab_size) for (T,)."""
        self._live()
        a, b = self._batch(ids, "GPT.forward: ids")
        B, T = b.shape
        _lib.check_budget("GPT.forward: the logits", B * T * self.config["vocab_size"] * 4)
        logits = np.empty((B, T, self.config["vocab_size"]), np.float32)
        with self._handle.exclusive() as h:  # the GPT's activation buffers
            _lib.call(lib.attn_h_gpt_forward, h, ptr(b), None, B, T, ptr(logits), None)
        return logits[0] if a.ndim == 1 else logits

    __call__ = forward

    def loss(self, ids, targets):
        """Mean cross-entropy of the next-token predictions (as the trainer's)."""
        self._live()
        a, b = self._batch(ids, "GPT.loss: ids")
        _, t = self._batch(targets, "GPT.loss: targets")
        if t.shape != b.shape:
            raise Error(f"GPT.loss: targets must be shaped as ids {tuple(a.shape)}, got "
                        f"{tuple(np.shape(targets))}", "shape")
        out = ctypes.c_float()
        with self._handle.exclusive() as h:
            _lib.call(lib.attn_h_gpt_forward, h, ptr(b), ptr(t), b.shape[0], b.shape[1], None,
                      ctypes.byref(out))
        return float(out.value)

    def attention(self, prompt):
        """The attention weights on prompt (a str, or token ids): an array
        (n_layers, n_heads, T, T); [l, h, i, j] is the weight query i puts on
        key j (causal softmax before dropout, 0 for j > i)."""
        self._live()
        ids = self.encode(prompt) if isinstance(prompt, str) else \
            self._batch(prompt, "GPT.attention: prompt")[0]
        if ids.ndim != 1:
            raise Error("GPT.attention: one sequence (a str or (T,) ids)", "shape")
        c, T = self.config, ids.shape[0]
        _lib.check_budget("GPT.attention: the weights", c["n_layers"] * c["n_heads"] * T * T * 4)
        w = np.empty((c["n_layers"], c["n_heads"], T, T), np.float32)
        with self._handle.exclusive() as h:
            _lib.call(lib.attn_h_gpt_attention, h, ptr(ids), T, ptr(w))
        return w

    def generate_iter(self, prompt="\n", max_new_tokens=500, temperature=0.8, top_k=200,
                      top_p=1.0, seed=1337, stop=None, window=None, precision="fp32"):
        """The sampled text piece by piece as it comes (the prompt is not
        repeated): a character per token for a char model; for gpt2 a
        token's text, a cut character held back until the next token
        completes it; same sampler, seed and window as `attn generate`.
        precision "bf16": bf16 weights with fp32 sums (`attn generate
        --precision bf16`), on any CPU."""
        self._live()
        n = _index(max_new_tokens, "generate: max_new_tokens", 0, _lib.INT64_MAX)
        p = _lib.text(prompt, "generate: prompt")
        stop = _lib.text(stop, "generate: stop")
        temperature = _lib.cfloat("generate: temperature", temperature)
        top_p = _lib.cfloat("generate: top_p", top_p)
        top_k = _index(top_k, "generate: top_k")
        seed = _index(seed, "generate: seed", -2**63, 2**64 - 1) % 2**64
        window = _index(0 if window is None else window, "generate: window")
        if not isinstance(precision, str) or precision not in _GEN_PRECISIONS:
            raise Error(f"generate: precision must be 'fp32' or 'bf16', not {precision!r}")
        return self._generate(n, p, temperature, top_k, top_p, seed, stop, window,
                              _GEN_PRECISIONS[precision])

    def _generate(self, n, p, temperature, top_k, top_p, seed, stop, window, precision):
        # The generator reads the model: each C call holds it, never across a
        # yield (the caller may close the model between two characters).
        g = ctypes.c_void_p()
        with self._handle as h:
            _lib.call(lib.attn_h_generator_create_precision, h, temperature, top_k, top_p, seed,
                      stop, window, precision, ctypes.byref(g))
        try:
            with self._handle:
                _lib.call(lib.attn_generator_prompt, g, p, len(p))
            # gpt2 tokens may cut a character: held back until completed, and
            # invalid bytes as U+FFFD (as `attn generate` shows them).
            utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
            buf = ctypes.create_string_buffer(4096)
            k = ctypes.c_size_t()
            for _ in range(n):
                with self._handle:  # attn.Error once closed between two characters
                    if lib.attn_h_generator_stopped(g):
                        break
                    _lib.call(lib.attn_h_generator_next, g, None, buf, len(buf), ctypes.byref(k))
                piece = utf8.decode(buf.raw[:k.value])
                if piece:
                    yield piece
            rest = utf8.decode(b"", final=True)
            if rest:
                yield rest
        finally:
            lib.attn_h_generator_free(g)

    def generate(self, prompt="\n", max_new_tokens=500, temperature=0.8, top_k=200, top_p=1.0,
                 seed=1337, stop=None, window=None, precision="fp32"):
        """prompt followed by up to max_new_tokens sampled characters: what
        `attn generate` prints with the same options (without its final newline).
        temperature 0 is greedy; top_k 0 and top_p 1 are off; stop ends the
        text once it ends with that string; window (default context_length/2)
        is how many characters the model re-reads once the context is full;
        precision "bf16" runs bf16 weights with fp32 sums (`attn generate
        --precision bf16`) on any CPU."""
        return prompt + "".join(self.generate_iter(prompt, max_new_tokens, temperature, top_k,
                                                   top_p, seed, stop, window, precision))

    # -- weights ---------------------------------------------------------------

    def state_dict(self):
        """name -> array (copies) under the book's GPTModel state_dict names,
        in its order, with the trf_blocks.N.att.mask buffers (float32
        (context_length, context_length), 1 above the diagonal) the book's
        MultiHeadAttention registers, so that the book's
        GPTModel.load_state_dict(..., strict=True) takes it (with
        torch.from_numpy on each). Models of other attention keys (window,
        n_kv_heads, rope, ...) have no mask buffer."""
        with self._live():
            out = collections.OrderedDict()
            mask = self._mask() if _book_attention(self.config) else None
            for p in self._params:
                block = p.name.split(".att.")[0] if ".att." in p.name else None
                if mask is not None and block and block + ".att.mask" not in out:
                    out[block + ".att.mask"] = mask.copy()
                out[p.name] = _c_array(p.data, p.shape).copy()
            return out

    def _mask(self):
        T = self.config["context_length"]
        return np.triu(np.ones((T, T), np.float32), k=1)

    def save(self, path):
        """Write the model to path, a .safetensors file that attn.GPT.load
        and `attn generate --checkpoint` read: the weights (F32, the book's
        names) and the metadata attn's trainer writes (format, config,
        vocabulary, step). path is checked as every output of attn is
        (attn_output_check: never into a run folder, never onto the file the
        model came from); a folder is refused. Returns path."""
        with self._live() as h:
            out = _lib.path(path, "GPT.save: path")
            if os.path.isdir(out):
                raise Error(f"GPT.save: {os.fsdecode(out)} is a folder; name a .safetensors file")
            src = self.source if os.path.exists(self.source) else None
            if src is not None:
                _lib.call(lib.attn_ckpt_output_check, _lib.path(src), out, None, 0, None, 0)
            else:
                _lib.call(lib.attn_output_check, out, None, 0, None, 0)
            meta = _meta(self.config, None, self.step)  # and the tokenizer's, by the C side
            _lib.call(lib.attn_h_gpt_write, h, out, meta, len(meta))
        return path

    @classmethod
    def from_torch(cls, model, tokenizer):
        """An attn.GPT (C, fp32, eval mode) holding the weights of a PyTorch
        GPTModel of the book's (chapter 4's, or with attn.torch's attention
        swapped in): its config is read from the modules (vocab_size,
        context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias), its
        weights from model.state_dict() (the att.mask buffers are left out).
        tokenizer: GPT-2's ("gpt2", attn.tokenizer.get_encoding("gpt2") or
        tiktoken's gpt2 Encoding; the model's vocab_size must be 50257), or
        a character vocabulary in id order: a str of distinct characters, a
        list of them, a {character: id} dict, or an object with a
        .vocabulary (another attn.GPT) or a .stoi / .str_to_int dict.
        save() then writes it as a checkpoint that carries its tokenizer."""
        cfg = _book_config(model)
        vocab = _gpt2_tokenizer(tokenizer, cfg["vocab_size"])
        if vocab is None:
            vocab = _vocabulary(tokenizer, cfg["vocab_size"])
        sd = model.state_dict()
        fd, tmp = tempfile.mkstemp(prefix="attn-from-torch-", suffix=".safetensors")
        os.close(fd)
        try:
            _write_model(tmp, sd, cfg, vocab)
            gpt = cls.load(tmp)
        finally:
            os.unlink(tmp)
        gpt.source = f"<from_torch {type(model).__name__}>"
        return gpt

    def to_torch(self):
        """The book's GPTModel (attn.book) holding these weights, in eval
        mode: the same logits as forward() to float rounding. A model of
        other variant keys (norm, act, tie_weights, pos_emb) is
        attn.variants.GPTModel, which is the book's with those parts swapped."""
        import torch
        from .variants import gpt_model
        model = gpt_model(dict(self.config))
        sd = {k: torch.from_numpy(v) for k, v in self.state_dict().items()}
        missing, unexpected = model.load_state_dict(sd, strict=False)
        tied = model.out_head.weight is model.tok_emb.weight  # loaded as tok_emb.weight
        if unexpected or any(not k.endswith(".att.mask") and not (tied and k == "out_head.weight")
                             for k in missing):
            raise Error(f"to_torch: names differ: missing {missing}, unexpected {unexpected}")
        return model.eval()


def _book_attention(config):
    """Whether config's attention is the book's MultiHeadAttention (which has
    the mask buffer): no attention keys of attn.variants set."""
    c = config
    return (c.get("pos_emb", "learned") == "learned" and not c.get("window")
            and not c.get("qk_norm") and not c.get("softcap")
            and c.get("n_kv_heads") in (None, 0, c["n_heads"]))


def _meta(config, vocabulary, step):
    """The metadata attn's trainer writes into model.safetensors; vocabulary:
    the characters (str), or GPT-2's two files' text (a tuple)."""
    if vocabulary is None:  # the caller's C side adds the tokenizer's
        tok = []
    elif isinstance(vocabulary, tuple):  # attn/checkpoint.h's gpt2 keys
        tok = [("tokenizer", "gpt2"), ("gpt2_encoder_json", vocabulary[0]),
               ("gpt2_vocab_bpe", vocabulary[1])]
    else:
        tok = [("vocabulary", vocabulary)]
    pairs = [("format", "attn-gpt"), ("config", json.dumps(config)), *tok,
             ("step", str(int(step)))]
    meta = (_lib.StKv * len(pairs))()
    for i, (k, v) in enumerate(pairs):
        meta[i].key, meta[i].value = k.encode(), _lib.text(v, f"metadata {k}")
    return meta


def _book_config(model):
    """The book's config dict of a GPTModel, read from its modules."""
    try:
        blocks = list(model.trf_blocks)
        att = blocks[0].att
        cfg = {"vocab_size": int(model.tok_emb.num_embeddings),
               "context_length": int(model.pos_emb.num_embeddings),
               "emb_dim": int(model.tok_emb.embedding_dim), "n_heads": int(att.num_heads),
               "n_layers": len(blocks), "drop_rate": float(model.drop_emb.p),
               "qkv_bias": att.W_query.bias is not None}
    except (AttributeError, IndexError, TypeError) as e:
        raise Error(f"GPT.from_torch: not the book's GPTModel (tok_emb, pos_emb, drop_emb, "
                    f"trf_blocks[i].att with num_heads and W_query): {e}") from None
    if getattr(att, "num_kv_groups", None) or getattr(att, "sliding_window_size", None):
        raise Error("GPT.from_torch: the book's GPTModel with MultiHeadAttention only "
                    f"(got {type(att).__name__})")
    return cfg


def _gpt2_tokenizer(tokenizer, vocab_size):
    """(encoder.json text, vocab.bpe text) when tokenizer is GPT-2's, else
    None."""
    if isinstance(tokenizer, str):
        if tokenizer not in ("gpt2", "r50k_base") or vocab_size == len(tokenizer):
            return None  # characters (a 4-token model's "gpt2" is its 4 characters)
    elif getattr(tokenizer, "name", None) not in ("gpt2", "r50k_base"):
        return None
    if vocab_size != 50257:
        raise Error(f"GPT.from_torch: GPT-2's tokenizer has 50257 tokens, the model's "
                    f"vocab_size is {vocab_size}")
    from .tokenizer import gpt2_dir
    d = gpt2_dir()
    files = getattr(tokenizer, "files", None) or (os.path.join(d, "encoder.json"),
                                                  os.path.join(d, "vocab.bpe"))
    out = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            out.append(fh.read())
    return tuple(out)


def _vocabulary(tokenizer, vocab_size):
    """The characters of a character-level tokenizer in id order, as one str."""
    t = tokenizer
    t = getattr(t, "vocabulary", None) or getattr(t, "stoi", None) or \
        getattr(t, "str_to_int", None) or t
    if isinstance(t, dict):
        order = sorted(t.items(), key=lambda kv: kv[1])
        if [i for _, i in order] != list(range(len(order))):
            raise Error("GPT.from_torch: the tokenizer's ids must be 0..n-1")
        t = [c for c, _ in order]
    if not isinstance(t, str):
        try:
            t = list(t)
        except TypeError:
            raise Error("GPT.from_torch: tokenizer must be a character vocabulary (a str, "
                        f"a list or a dict of characters), got {type(tokenizer).__name__}; "
                        "attn.GPT's checkpoints are character-level") from None
        if not all(isinstance(c, str) and len(c) == 1 for c in t):
            raise Error("GPT.from_torch: the tokenizer's tokens must be single characters "
                        "(attn.GPT's checkpoints are character-level)")
        t = "".join(t)
    if len(t) != vocab_size or len(set(t)) != len(t):
        raise Error(f"GPT.from_torch: the vocabulary has {len(t)} characters "
                    f"({len(set(t))} distinct) but the model's vocab_size is {vocab_size}")
    return t


def _write_model(path, state_dict, cfg, vocabulary):
    """A model .safetensors file of state_dict's parameters (F32)."""
    arrays = []
    for name, t in state_dict.items():
        if name.endswith(".att.mask") or not hasattr(t, "detach"):
            continue
        a = np.ascontiguousarray(t.detach().cpu().float().numpy(), np.float32)
        arrays.append((name.encode(), a, (_lib.c_int64 * max(a.ndim, 1))(*a.shape)))
    entries = (_lib.StEntry * len(arrays))()
    for e, (name, a, shape) in zip(entries, arrays):
        e.name, e.dtype, e.ndim, e.shape = name, b"F32", a.ndim, shape
        e.data, e.nbytes = a.ctypes.data, a.nbytes
    meta = _meta(cfg, vocabulary, 0)
    _lib.call(lib.attn_safetensors_write, _lib.path(path), entries, len(arrays), meta, len(meta))


# ------------------------------------------------------------------ training

TrainResult = collections.namedtuple("TrainResult", "out step stopped history evals")
TrainResult.__doc__ = """What attn.train did: out (the run folder, absolute),
step (reached), stopped (a callback or Ctrl-C stopped it; it was saved),
history [(step, loss, lr)] and evals [(step, train_loss, val_loss)] of this call."""


def _progress_bar(total, initial):
    """A tqdm bar (a notebook widget where ipywidgets is installed), or None
    without tqdm."""
    try:
        if "ipykernel" in sys.modules:
            try:
                import ipywidgets  # noqa: F401
                from tqdm.notebook import tqdm
            except ImportError:
                from tqdm import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)


FinetuneResult = collections.namedtuple("FinetuneResult",
                                        "out steps history evals accuracies initial final samples")
FinetuneResult.__doc__ = """What attn.train(task="classify" | "instruct") did:
out (the run folder, absolute), steps (run), history [(step, loss, lr)],
evals [(epoch, step, train_loss, val_loss)], accuracies [(epoch, train_acc,
val_acc)] (classify, after each epoch), initial (instruct: the "Initial
losses" (train, val), else None) and final (classify: the whole sets'
accuracies (train, val), else None): every number RUN/log.csv holds; and
samples [(epoch, text)] (instruct: the script's sample printed after each
epoch trained)."""


def _finetune(task, init_from, data, val, out, keys, on_step, on_eval, on_epoch):
    """attn.train(task="classify" | "instruct"): attn_h_finetune."""
    for k in keys:
        if not isinstance(keys[k], (int, float, str)):
            raise Error(f"train: {k} must be a number or a string, got {keys[k]!r}")
    r = FinetuneResult(None, 0, [], [], [], [None], [None], [])
    state = {"exc": None, "bar": None}

    def callback(user, event, epoch, step, a, b, text):
        try:
            if event == 0:
                r.history.append((step, a, b))
                if on_step is not None:
                    on_step(step, a, b)
            elif event == 1:
                r.evals.append((epoch, step, a, b))
                print(f"Ep {epoch} (Step {step:06d}): Train loss {a:.3f}, Val loss {b:.3f}")
                if on_eval is not None:
                    on_eval(step, a, b)
            elif event == 2:
                r.accuracies.append((epoch, a, b))
                print(f"Training accuracy: {a * 100:.2f}% | Validation accuracy: {b * 100:.2f}%")
                if on_epoch is not None:
                    on_epoch(epoch, a, b)
            elif event == 3:
                r.initial[0] = (a, b)
            elif event == 4:
                r.final[0] = (a, b)
            elif event == 5:
                import warnings
                warnings.warn(f"train: {int(a)} training and {int(b)} validation texts are longer "
                              f"than {step} tokens; cut to them, as the book's SpamDataset does",
                              stacklevel=4)
            elif event == 6:
                line = text.decode("utf-8", "replace")
                r.samples.append((epoch, line))
                print(line)
        except BaseException as e:  # noqa: B902 - raised after the run
            if state["exc"] is None:
                state["exc"] = e

    cb = _lib.FINETUNE_CALLBACK(callback)
    steps, req = ctypes.c_int64(), ctypes.c_int()
    err = _lib.error()
    st = lib.attn_h_finetune(task.encode(), _lib.path(init_from, "train: init_from"),
                             _lib.path(data, "train: data"), _lib.path(val, "train: val"),
                             _lib.path(out, "train: out"), _lib.text(json.dumps(keys)), cb, None,
                             ctypes.byref(steps), ctypes.byref(req), ctypes.byref(err))
    _lib.check(st, err)
    if state["exc"] is not None:
        raise state["exc"]
    return r._replace(out=os.path.abspath(os.fspath(out)), steps=int(steps.value),
                      initial=r.initial[0], final=r.final[0])


def train(preset=None, config=None, data=None, out=None, *, on_step=None, on_eval=None,
          resume=False, force=False, init_from=None, progress=None, task="lm", val=None,
          on_epoch=None, **keys):
    """Train a GPT (char-level or GPT-2's tokenizer) as `attn train` does, in this process.

    task="classify" or "instruct" fine-tunes init_from (any weights file
    attn reads) as `attn train --task classify|instruct` does (chapter 6's
    classifier, chapter 7's instruction fine-tuning, appendix E's LoRA;
    docs/finetuning.md): data (and val, classify) the sets, out a new
    folder, keys those of the program's options (epochs, trainable,
    lora_rank, lora_alpha, batch_size, learning_rate, weight_decay,
    eval_interval, eval_iters, seed, n_heads, precision; instruct: limit,
    mask_prompt). It prints the book's evaluation and accuracy lines (and
    instruct's per-epoch samples), writes the run folder the program writes
    (instruct: RUN/responses.json, the test split's responses, included), calls
    on_step(step, loss, lr), on_eval(step, train_loss, val_loss) and
    on_epoch(epoch, train_acc, val_acc) (their returns are ignored: the run
    cannot stop early; an exception they raise is raised when it ends) and
    returns a FinetuneResult. The run folder is the program's, checkpoints
    included: resume=True continues it as `attn train --task ... --resume`.

    preset, data, out, init_from, resume, force: as attn train's options.
    config: a JSON file of model and training keys, or a dict of them.
    keys: training keys as attn train's options set them (max_steps=200,
    learning_rate=1e-3, batch_size=8, ...; the names of `attn train --help`).
    on_step(step, loss, lr) is called after every step and on_eval(step,
    train_loss, val_loss) after every evaluation (val_loss: the exact one
    over the whole val split when the evaluation took it, as every one of
    eval_mode="exact" and the final one under final_eval do); a true return
    stops the run, which then saves its checkpoint as Ctrl-C does (and so
    does Ctrl-C, or interrupting the kernel: the checkpoint is saved, then
    KeyboardInterrupt is raised). `attn train --out DIR --resume` or attn.train(out=DIR,
    resume=True) continues it. progress: a tqdm progress bar (None: when tqdm
    is installed). Returns a TrainResult; failures raise attn.Error."""
    if task not in ("lm", "classify", "instruct"):
        raise Error(f"train: task must be lm, classify or instruct, got {task!r}")
    if task != "lm":
        given = [n for n, v in (("preset", preset), ("config", config), ("force", force),
                                ("progress", progress)) if v]
        if given:
            raise Error(f"train: {given[0]} does not apply to task {task} (docs/finetuning.md)")
        if resume:
            keys = dict(keys, resume=True)
        return _finetune(task, init_from, data, val, out, keys, on_step, on_eval, on_epoch)
    if val is not None or on_epoch is not None:
        raise Error("train: val and on_epoch are task classify's (the language model's "
                    "validation split is the data's)")
    for k in keys:
        if not isinstance(keys[k], (int, float, str)) or isinstance(keys[k], bool):
            raise Error(f"train: {k} must be a number or a string, got {keys[k]!r}")
    keys_json = json.dumps(keys) if keys else None
    tmp = None
    if isinstance(config, dict):
        fd, tmp = tempfile.mkstemp(prefix="attn-config-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(config, f)
        config = tmp
    history, evals = [], []
    state = {"exc": None, "bar": None}
    want_bar = progress if progress is not None else True

    def callback(user, event, step, max_steps, a, b, c):
        try:
            if want_bar and "made" not in state:
                state["made"] = True
                state["bar"] = _progress_bar(max_steps, step - 1 if event == 0 else step)
            bar = state["bar"]
            if event == 0:
                history.append((step, a, b))
                if bar is not None:
                    bar.set_postfix(loss=f"{a:.4f}", lr=f"{b:.1e}", refresh=False)
                    bar.update(1)
                return 1 if on_step is not None and on_step(step, a, b) else 0
            evals.append((step, a, b))
            if bar is not None:
                bar.write(f"step {step}: train loss {a:.4f}, val loss {b:.4f}")
            return 1 if on_eval is not None and on_eval(step, a, b) else 0
        except BaseException as e:  # noqa: B902 - re-raised after the run saved
            state["exc"] = e
            return 1

    cb = _lib.TRAIN_CALLBACK(callback)
    step, stopped, req = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
    where = ctypes.create_string_buffer(4096)
    err = _lib.error()
    try:
        st = lib.attn_h_train(_lib.text(preset, "train: preset"),
                              _lib.path(config, "train: config"), _lib.path(data, "train: data"),
                              _lib.path(out, "train: out"),
                              _lib.path(init_from, "train: init_from"), _lib.text(keys_json),
                              int(bool(resume)), int(bool(force)), cb, None, ctypes.byref(step),
                              ctypes.byref(stopped), where, ctypes.byref(req), ctypes.byref(err))
    finally:
        if state["bar"] is not None:
            state["bar"].close()
        if tmp:
            os.unlink(tmp)
    _lib.check(st, err)
    if state["exc"] is not None:
        raise state["exc"]
    return TrainResult(os.fsdecode(where.value), int(step.value), bool(stopped.value), history,
                       evals)
