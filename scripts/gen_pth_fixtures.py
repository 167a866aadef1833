#!/usr/bin/python3
"""Write the PyTorch state_dict fixtures of tests/test_pth.c into
tests/fixtures/pth/ (committed). Run with Debian's /usr/bin/python3 (torch 1.13).

Good files, each with <name>.expected.safetensors beside it: the same tensors,
in the same order, with the bytes torch holds (written by a tiny json+struct
safetensors writer, as scripts/gen_io_fixtures.py does):
  basic.pth   every storage type, a tied pair sharing one storage, a view at
              an offset into another tensor's storage, a 0-dim and an empty
              tensor, a bool mask
  gpt.pth     the book's GPTModel (tiny config) state_dict, its float `mask`
              buffers included (the persistent buffers the book registers)
Bad files (attn_pth_read must say ATTN_ERR_FORMAT):
  bad_global.pth       data.pkl calls os.system (never run: refused by name)
  bad_compressed.pth   basic.pth with its entries deflated
  bad_byteorder.pth    basic.pth saying its storages are big-endian
  bad_storage_size.pth a storage entry one element short
  bad_noncontig.pth    a transposed (non-contiguous) tensor
  bad_overrun.pth      a tensor whose offset runs past its storage's end
"""
import io
import json
import os
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "pth")
sys.path.insert(0, HERE)
from book_attention import GPTModel  # noqa: E402

ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
             torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
             torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: same bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def st_write(path, sd):
    header, blobs, off = {}, [], 0
    for name, t in sd.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def save_good(name, sd):
    torch.save(sd, os.path.join(OUT, name + ".pth"))
    st_write(os.path.join(OUT, name + ".expected.safetensors"), sd)


def basic():
    torch.manual_seed(123)
    sd = OrderedDict()
    w = torch.randn(3, 4)
    sd["tok_emb.weight"] = w
    sd["out_head.weight"] = w  # tied: one storage
    base = torch.arange(10, dtype=torch.float32) / 4
    sd["base"] = base
    sd["tail"] = base[4:]  # a view: offset 4 into base's storage
    sd["mask"] = torch.triu(torch.ones(4, 4), diagonal=1).bool()
    sd["ids"] = torch.tensor([[1, -2, 3], [2**40, -(2**35), 0]], dtype=torch.int64)
    sd["half"] = torch.tensor([1.5, -0.25, 65504.0, 6e-8], dtype=torch.float16)
    sd["bf16"] = torch.tensor([1.0, -3.5, 1e30], dtype=torch.bfloat16)
    sd["f64"] = torch.tensor([[1.0 / 3, -2.5]], dtype=torch.float64)
    sd["i32"] = torch.tensor([7, -8, 2**31 - 1], dtype=torch.int32)
    sd["i16"] = torch.tensor([-300, 300], dtype=torch.int16)
    sd["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 255, 9], dtype=torch.uint8)
    sd["scalar"] = torch.tensor(2.75)
    sd["empty"] = torch.zeros(0, 3)
    save_good("basic", sd)


def gpt():
    torch.manual_seed(0)
    cfg = {"vocab_size": 11, "context_length": 4, "emb_dim": 8, "n_heads": 2, "n_layers": 1,
           "drop_rate": 0.0, "qkv_bias": False}
    save_good("gpt", GPTModel(cfg).state_dict())


def rezip(src, dst, replace=None, compression=zipfile.ZIP_STORED, add=None):
    """Copy a .pth zip (a path or a file object), entries (name suffix -> bytes)
    replaced, entries (name -> bytes) added; fixed dates, so the bytes are too."""
    def put(zo, name, data):
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = compression
        zo.writestr(info, data)

    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", compression) as zo:
        for info in zi.infolist():
            data = zi.read(info.filename)
            for suffix, new in (replace or {}).items():
                if info.filename.endswith(suffix):
                    data = new
            put(zo, info.filename, data)
        for name, data in (add or {}).items():
            put(zo, name, data)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo attn ran the pickle",))


def bad():
    good = os.path.join(OUT, "basic.pth")
    rezip(good, os.path.join(OUT, "bad_global.pth"),
          {"/data.pkl": pickle.dumps(OrderedDict(x=Evil()), protocol=2)})
    rezip(good, os.path.join(OUT, "bad_compressed.pth"), compression=zipfile.ZIP_DEFLATED)
    rezip(good, os.path.join(OUT, "bad_byteorder.pth"), add={"basic/byteorder": b"big"})
    with zipfile.ZipFile(good) as z:
        short = z.read("basic/data/0")[:-4]
    rezip(good, os.path.join(OUT, "bad_storage_size.pth"), {"/data/0": short})
    torch.save(OrderedDict(w=torch.arange(6.0).reshape(2, 3).t()),
               os.path.join(OUT, "bad_noncontig.pth"))
    buf = io.BytesIO()
    torch.save(OrderedDict(w=torch.arange(6.0).reshape(2, 3)), buf)
    with zipfile.ZipFile(buf) as z:
        pkl = z.read("archive/data.pkl")
    assert pkl.count(b"QK\x00") == 1  # BINPERSID, then the offset 0 as BININT1
    rezip(buf, os.path.join(OUT, "bad_overrun.pth"),
          {"/data.pkl": pkl.replace(b"QK\x00", b"QK\x01")})


def main():
    os.makedirs(OUT, exist_ok=True)
    basic()
    gpt()
    bad()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %s (%d bytes)" % (OUT, total))


if __name__ == "__main__":
    main()
