#!/usr/bin/python3
"""Write the .npy / safetensors fixtures used by tests/test_npy.c and
tests/test_safetensors.c into tests/fixtures/io/ (committed).

Run with Debian's /usr/bin/python3 (numpy). The safetensors files are made
with a tiny json+struct writer that follows the format's spec (the
`safetensors` Python package is not needed): u64 LE header length, JSON
header, contiguous little-endian data.
"""
import json
import os
import struct
import sys

import numpy as np
import numpy.lib.format as fmt

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "io")


def save(name, arr):
    np.save(os.path.join(OUT, name), arr, allow_pickle=False)


def save_version(name, arr, version):
    with open(os.path.join(OUT, name), "wb") as f:
        fmt.write_array(f, arr, version=version, allow_pickle=False)


def st_write(name, tensors, metadata=None, pad=True):
    """tensors: list of (name, np.ndarray) written in the given order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs, off = [], 0
    dtypes = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64", np.dtype("<i8"): "I64",
              np.dtype("<i4"): "I32", np.dtype("u1"): "U8"}
    for tname, arr in tensors:
        b = np.ascontiguousarray(arr).tobytes()
        header[tname] = {"dtype": dtypes[arr.dtype], "shape": list(arr.shape),
                         "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    os.makedirs(OUT, exist_ok=True)
    a23 = (np.arange(6, dtype=np.float32) - 2.5).reshape(2, 3)
    save("f32_2x3.npy", a23)
    save("f32_2x3x4.npy", (np.arange(24, dtype=np.float32) * 0.25).reshape(2, 3, 4))
    save("f32_vec5.npy", np.array([1.5, -2.0, 0.0, 3.25, 1e-3], dtype=np.float32))
    save("f32_scalar.npy", np.array(7.5, dtype=np.float32))
    save("f32_empty_0x3.npy", np.zeros((0, 3), dtype=np.float32))
    save("f32_8d.npy", np.arange(2 ** 8, dtype=np.float32).reshape((2,) * 8))
    ids = np.array([[0, 1, 2, 63, 64], [5, 4, 3, 2, 1]])
    save("i32_ids_2x5.npy", ids.astype(np.int32))
    save("i64_ids_2x5.npy", ids.astype(np.int64))
    save("i64_big.npy", np.array([1, 2**40], dtype=np.int64))
    # Inputs the reader must refuse.
    save("f64_2x3.npy", a23.astype(np.float64))
    save("f32_bigendian_2x3.npy", a23.astype(">f4"))
    save("f32_fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    save("u8_4.npy", np.arange(4, dtype=np.uint8))
    # Other header versions numpy can write.
    save_version("f32_2x3_v2.npy", a23, (2, 0))
    save_version("f32_2x3_v3.npy", a23, (3, 0))

    # safetensors with PyTorch state_dict names and layouts (Linear weight (out, in)).
    wq = (np.arange(6, dtype=np.float32) / 8).reshape(2, 3)
    bq = np.array([0.5, -0.5], dtype=np.float32)
    wo = (np.arange(4, dtype=np.float32) - 1.75).reshape(2, 2)
    tensors = [("W_query.weight", wq), ("W_query.bias", bq), ("out_proj.weight", wo)]
    st_write("params.safetensors", tensors, {"format": "pt", "note": "gen_io_fixtures"})
    st_write("params_unpadded.safetensors", tensors, None, pad=False)
    st_write("params_f64.safetensors",
             [("W_query.weight", wq.astype(np.float64)), ("W_query.bias", bq),
              ("out_proj.weight", wo)])
    print("wrote fixtures to", os.path.normpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
