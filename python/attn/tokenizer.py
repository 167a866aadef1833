"""GPT-2's tokenizer with tiktoken's calls, run by attn's C tokenizer
(include/attn/bpe.h): byte-level BPE, equal to tiktoken's "gpt2" encoding.

    import attn.tokenizer
    enc = attn.tokenizer.get_encoding("gpt2")
    ids = enc.encode("Hello, do you like tea? <|endoftext|>", allowed_special={"<|endoftext|>"})
    enc.decode(ids), enc.n_vocab, enc.eot_token          # 50257, 50256

The vocabulary is OpenAI's encoder.json + vocab.bpe. get_encoding finds them
by the library's one rule (attn_tokenizer_gpt2_find, attn/tokenizer.h):
$ATTN_GPT2_DIR when set, else the copy `make install` or `pip install .`
installed beside libattn, else the source tree's data/gpt2
(scripts/get-data.sh gpt2), else ./data/gpt2; Encoding.from_files takes any
two paths."""
import ctypes
import os
import weakref

from ._lib import Handle, call, check, cint, error, lib, path


_EOT = "<|endoftext|>"
_HERE = os.path.dirname(os.path.realpath(__file__))


def gpt2_dir():
    """The folder holding GPT-2's encoder.json and vocab.bpe, found by the
    library's rule (the module's docstring); attn.Error naming where it
    looked when none does."""
    out = ctypes.create_string_buffer(4096)
    call(lib.attn_tokenizer_gpt2_find, None, out, len(out))
    return os.fsdecode(out.value)


class Encoding:
    """A byte-level BPE encoding with tiktoken.Encoding's calls: encode,
    encode_ordinary, decode, decode_bytes, n_vocab, eot_token, name. Encoding
    and decoding run in C; ids are Python lists of ints."""

    def __init__(self, handle, name):
        # Every C call holds the handle: close() in another thread waits for it.
        self._handle = Handle(handle, lib.attn_bpe_free, "Encoding")
        self._finalizer = weakref.finalize(self, self._handle.close)
        self.name = name
        self.n_vocab = lib.attn_bpe_n_vocab(handle)
        self.eot_token = lib.attn_bpe_eot(handle)
        self.special_tokens_set = {_EOT} if self.eot_token >= 0 else set()

    @classmethod
    def from_files(cls, encoder_json, vocab_bpe, name="gpt2"):
        """Load OpenAI's encoder.json and vocab.bpe (checked whole: a
        truncated or mismatched pair raises attn.Error naming why)."""
        h = ctypes.c_void_p()
        err = error()
        check(lib.attn_bpe_load(ctypes.byref(h), path(encoder_json), path(vocab_bpe),
                                ctypes.byref(err)), err)
        enc = cls(h.value, name)
        enc.files = (os.fspath(encoder_json), os.fspath(vocab_bpe))  # what a checkpoint carries
        return enc

    def close(self):
        """Free the C tables now (later calls raise attn.Error)."""
        self._handle.close()
        self._finalizer.detach()

    def __repr__(self):
        return f"<attn.tokenizer.Encoding {self.name!r} n_vocab={self.n_vocab}>"

    def _encode(self, text, special):
        if not isinstance(text, str):
            raise TypeError(f"encode: text must be str, not {type(text).__name__}")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            # tiktoken's own fix-up: a surrogate pair becomes its character,
            # each lone surrogate U+FFFD ("a\ud800b" -> [64, 4210, 65])
            data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace") \
                .encode("utf-8")
        ids = (ctypes.c_int32 * (len(data) + 1))()
        n = ctypes.c_size_t()
        err = error()
        with self._handle as h:
            check(lib.attn_bpe_encode(h, data, len(data), int(special), ids, len(data) + 1,
                                      ctypes.byref(n), ctypes.byref(err)), err)
        return ids[:n.value]

    def encode(self, text, *, allowed_special=set(), disallowed_special="all"):
        """Token ids of text, as tiktoken: <|endoftext|> is one token only when
        allowed_special has it (or is "all"); when disallowed_special has it
        (the default "all") and the text contains it, ValueError; with
        disallowed_special=() it is plain text."""
        allowed = self.special_tokens_set if allowed_special == "all" else set(allowed_special)
        disallowed = (self.special_tokens_set - allowed if disallowed_special == "all"
                      else set(disallowed_special))
        for tok in disallowed:
            if tok in text:
                raise ValueError(
                    f"Encountered text corresponding to disallowed special token {tok!r}.\n"
                    f"Pass allowed_special={{{tok!r}}} to encode it as a special token, or "
                    f"disallowed_special=() to encode it as normal text.")
        return self._encode(text, _EOT in allowed)

    def encode_ordinary(self, text):
        """Token ids of text with nothing special (<|endoftext|> is plain text)."""
        return self._encode(text, False)

    def decode_bytes(self, tokens):
        """The bytes of a token sequence (a character split over tokens is
        whole once its tokens are joined)."""
        tokens = list(tokens)
        arr = (ctypes.c_int32 * max(len(tokens), 1))()
        for i, t in enumerate(tokens):
            arr[i] = cint(f"decode: token at {i}", t, 0, self.n_vocab - 1)
        need = ctypes.c_size_t()
        err = error()
        with self._handle as h:
            lib.attn_bpe_decode(h, arr, len(tokens), None, 0, ctypes.byref(need), None)
            out = ctypes.create_string_buffer(need.value + 1)
            check(lib.attn_bpe_decode(h, arr, len(tokens), out, need.value + 1,
                                      ctypes.byref(need), ctypes.byref(err)), err)
        return out.raw[:need.value]

    def decode(self, tokens, errors="replace"):
        """The text of a token sequence; bytes that are not UTF-8 (a token
        sequence cut inside a character) become U+FFFD, as tiktoken."""
        return self.decode_bytes(tokens).decode("utf-8", errors)


_cache = {}


def get_encoding(name):
    """tiktoken.get_encoding: "gpt2" (also "r50k_base", the same vocabulary)."""
    if name not in ("gpt2", "r50k_base"):
        raise ValueError(f"unknown encoding {name!r}: attn has gpt2 (r50k_base)")
    if name not in _cache:
        d = gpt2_dir()
        _cache[name] = Encoding.from_files(os.path.join(d, "encoder.json"),
                                           os.path.join(d, "vocab.bpe"), name)
    return _cache[name]


__all__ = ["Encoding", "get_encoding", "gpt2_dir"]
