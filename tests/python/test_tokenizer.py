"""attn.tokenizer: tiktoken's calls over the C tokenizer, equal to npm
tiktoken 1.0.22's gpt2 (tests/fixtures/gpt2_tokenizer/): the stress text and
the short cases with and without <|endoftext|> allowed, The Verdict;
tiktoken's ValueError for a disallowed special token; decode of a character
split over tokens; bad arguments."""
import json
import os

import pytest

import attn
import attn.tokenizer

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "gpt2_tokenizer")


@pytest.fixture(scope="module")
def enc():
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    if not any(os.path.exists(os.path.join(d, "gpt2", "vocab.bpe"))
               for d in (os.path.join(src, "data"), os.path.join(src, "..", "shared", "data"))):
        pytest.skip("no GPT-2 vocabulary in data/gpt2 (scripts/get-data.sh gpt2)")
    return attn.tokenizer.get_encoding("gpt2")  # any other failure fails the tests


def test_vocabulary_facts(enc):
    assert enc.n_vocab == 50257 and enc.eot_token == 50256 and enc.name == "gpt2"
    assert attn.tokenizer.get_encoding("gpt2") is enc  # loaded once


def test_stress_text_and_short_cases_equal_tiktoken(enc):
    with open(os.path.join(FIX, "stress.txt"), encoding="utf-8", newline="") as f:
        stress = f.read()
    with open(os.path.join(FIX, "stress_expected.json")) as f:
        want = json.load(f)
    assert enc.encode(stress, allowed_special="all") == want["ids_allowed_special"]
    assert enc.encode(stress, disallowed_special=()) == want["ids_ordinary"]
    assert enc.encode_ordinary(stress) == want["ids_ordinary"]
    assert enc.decode(enc.encode_ordinary(stress)) == stress
    with open(os.path.join(FIX, "short_cases.json")) as f:
        cases = json.load(f)
    for c in cases:
        text = bytes.fromhex(c["utf8_hex"]).decode("utf-8")
        assert enc.encode(text, allowed_special={"<|endoftext|>"}) == c["ids_allowed_special"]
        assert enc.encode(text, disallowed_special=()) == c["ids"], repr(text)
        if c["default_encode_throws"]:
            with pytest.raises(ValueError, match="disallowed special token"):
                enc.encode(text)
        else:
            assert enc.encode(text) == c["ids"]


def test_the_verdict_equals_tiktoken(enc):
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    for p in (os.path.join(src, "data", "the-verdict.txt"),
              os.path.join(src, "..", "shared", "data", "the-verdict.txt")):
        if os.path.exists(p):
            break
    else:
        pytest.skip("no the-verdict.txt (scripts/get-data.sh the-verdict)")
    with open(p, encoding="utf-8", newline="") as f:
        text = f.read()
    with open(os.path.join(FIX, "the_verdict.u16.bin"), "rb") as f:
        raw = f.read()
    want = [raw[i] | raw[i + 1] << 8 for i in range(0, len(raw), 2)]
    assert enc.encode(text) == want
    assert len(want) == 5145


def test_decode_joins_split_characters(enc):
    ids = enc.encode("🙂")
    assert len(ids) == 2  # f09f + 9982
    assert enc.decode_bytes(ids[:1]) == b"\xf0\x9f"
    assert enc.decode(ids[:1]) == "\ufffd"  # cut inside a character: U+FFFD, as tiktoken
    assert enc.decode(ids) == "🙂"


def test_bad_arguments(enc):
    with pytest.raises(TypeError):
        enc.encode(b"bytes")
    with pytest.raises(ValueError, match="50257"):
        enc.decode([50257])
    with pytest.raises(ValueError):
        attn.tokenizer.get_encoding("cl100k_base")
    with pytest.raises(attn.Error, match="vocab.bpe"):
        src = os.path.join(os.path.dirname(__file__), "..", "..")
        d = next(d for d in (os.path.join(src, "data", "gpt2"),
                             os.path.join(src, "..", "shared", "data", "gpt2"))
                 if os.path.exists(os.path.join(d, "encoder.json")))  # where enc found it
        attn.tokenizer.Encoding.from_files(os.path.join(d, "encoder.json"),
                                           os.path.join(FIX, "stress.txt"))


SURROGATES = ["a\ud800b", "\ud800", "x\udc00", "\ud800\ud800b", "\udc00\ud800", "a\ud83d",
              "\ud83d\ude00 pair", "\ude00\ud83d", "ok \ud83d\ude00\ud800 mix", "é\udfff€"]


def test_lone_surrogates_become_u_fffd_as_in_tiktoken(enc):
    # tiktoken's Python gives these (its encode: a str that is not UTF-8 is
    # fixed up as text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    assert enc.encode("a\ud800b") == [64, 4210, 65]
    assert enc.encode_ordinary("a\ud800b") == [64, 4210, 65]
    assert enc.encode("\ud83d\ude00") == enc.encode("😀")  # a pair is its character
    assert enc.encode("\ud800\ud800b") == enc.encode("\ufffd\ufffdb")  # one U+FFFD each
    for s in SURROGATES:
        assert enc.decode(enc.encode(s)) == s.encode("utf-16", "surrogatepass").decode(
            "utf-16", "replace"), repr(s)


def test_lone_surrogates_are_the_bytes_tiktoken_npm_is_given(enc):
    """npm tiktoken (the fixtures' peer) gets a JS string's UTF-8 from
    TextEncoder: the bytes attn encodes must be those."""
    import shutil
    import subprocess
    node = shutil.which("node")
    if not node:
        pytest.skip("no node (the peer for TextEncoder's UTF-8)")
    js = ("const s = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
          "console.log(JSON.stringify(s.map(t => Buffer.from(new TextEncoder().encode(t))"
          ".toString('hex'))));")
    out = subprocess.run([node, "-e", js], input=json.dumps(SURROGATES), capture_output=True,
                         text=True, check=True).stdout
    for s, want in zip(SURROGATES, json.loads(out)):
        assert enc.decode_bytes(enc.encode(s)).hex() == want, repr(s)
