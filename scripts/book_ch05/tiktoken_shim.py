"""A stand-in for Python's `tiktoken` module, for running the book's ch05 code here.

PyPI is out of reach on this machine, so `tiktoken` (Python) cannot be installed. This
module gives the part of its API that the book's gpt_train.py / previous_chapters.py use,
`get_encoding("gpt2")` with `.encode(text, allowed_special=..., disallowed_special=...)`
and `.decode(ids)`, by calling the npm package `tiktoken` (the same Rust core compiled to
WASM) through Node.js. It is a fixture generator's helper, not attn's tokenizer.

Node finds the package through NODE_PATH (a node_modules folder holding `tiktoken`);
gen_book_ch05_fixtures.py sets it from --node-modules.
"""
import json
import subprocess

_JS = r"""
const { get_encoding } = require("tiktoken");
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { buf += d; });
process.stdin.on("end", () => {
  const req = JSON.parse(buf);
  const enc = get_encoding(req.encoding);
  let out;
  try {
    if (req.op === "encode") {
      out = { ids: Array.from(enc.encode(req.text, req.allowed, req.disallowed)) };
    } else {
      out = { bytes: Array.from(enc.decode(Uint32Array.from(req.ids))) };
    }
  } catch (e) {
    out = { error: String(e) };
  }
  enc.free();
  process.stdout.write(JSON.stringify(out));
});
"""


def _call(req):
    p = subprocess.run(["node", "-e", _JS], input=json.dumps(req).encode("utf-8"),
                       stdout=subprocess.PIPE, check=True)
    out = json.loads(p.stdout)
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
