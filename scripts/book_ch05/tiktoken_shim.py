"""A stand-in for Python's `tiktoken` module, for running the book's code (ch05-ch07) here.

PyPI is out of reach on this machine, so `tiktoken` (Python) cannot be installed. This
module gives the part of its API that the book's gpt_train.py / previous_chapters.py use,
`get_encoding("gpt2")` with `.encode(text, allowed_special=..., disallowed_special=...)`
and `.decode(ids)`, by calling the npm package `tiktoken` (the same Rust core compiled to
WASM) through Node.js. It is a fixture generator's helper, not attn's tokenizer.

Node finds the package through NODE_PATH (a node_modules folder holding `tiktoken`);
gen_book_ch05_fixtures.py and gen_book_ch67_fixtures.py set it from --node-modules.
"""
import json
import subprocess

_JS = r"""
const { get_encoding } = require("tiktoken");
const readline = require("readline");
const encodings = {};
// One JSON request per line in, one JSON answer per line out (JSON escapes every
// newline inside strings, so a line is always one whole message).
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const req = JSON.parse(line);
  let out;
  try {
    const enc = encodings[req.encoding] || (encodings[req.encoding] = get_encoding(req.encoding));
    if (req.op === "encode") {
      out = { ids: Array.from(enc.encode(req.text, req.allowed, req.disallowed)) };
    } else {
      out = { bytes: Array.from(enc.decode(Uint32Array.from(req.ids))) };
    }
  } catch (e) {
    out = { error: String(e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
"""

_node = None


def _call(req):
    # One Node process for the whole run (starting one per call costs ~0.1 s, and the
    # chapter 6-7 generator encodes thousands of texts).
    global _node
    if _node is None or _node.poll() is not None:
        _node = subprocess.Popen(["node", "-e", _JS], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
    _node.stdin.write(json.dumps(req).encode("utf-8") + b"\n")
    _node.stdin.flush()
    line = _node.stdout.readline()
    if not line:
        raise RuntimeError("the tiktoken shim's node process ended (is NODE_PATH set?)")
    out = json.loads(line)
    if "error" in out:
        raise ValueError(out["error"])
    return out


class Encoding:
    def __init__(self, name):
        self.name = name
        self.eot_token = 50256
        self.special_tokens_set = {"<|endoftext|>"}

    def encode(self, text, *, allowed_special=set(), disallowed_special="all"):
        # Same contract as tiktoken.Encoding.encode: a special token in the text that is
        # neither allowed nor ignored raises ValueError; allowed ones become their id.
        allowed = "all" if allowed_special == "all" else sorted(allowed_special)
        disallowed = "all" if disallowed_special == "all" else sorted(disallowed_special)
        return _call({"encoding": self.name, "op": "encode", "text": text,
                      "allowed": allowed, "disallowed": disallowed})["ids"]

    def encode_ordinary(self, text):
        return self.encode(text, disallowed_special=())

    def decode_bytes(self, tokens):
        return bytes(_call({"encoding": self.name, "op": "decode", "ids": list(tokens)})["bytes"])

    def decode(self, tokens, errors="replace"):
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)


def get_encoding(name):
    if name != "gpt2":
        raise ValueError("this shim only knows the gpt2 encoding")
    return Encoding(name)
