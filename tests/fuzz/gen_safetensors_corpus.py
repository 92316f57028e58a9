#!/usr/bin/python3
"""Write the seed corpus of fuzz_safetensors: small valid files and a few broken ones.

Usage: /usr/bin/python3 tests/fuzz/gen_safetensors_corpus.py [OUT_DIR]
(default tests/fuzz/corpus/safetensors). Output is deterministic; each file < 4 KiB.
"""
import json
import os
import struct
import sys


def st(header, data=b"", pad=True, raw_len=None):
    """A safetensors file from a header (dict or raw text) and data bytes."""
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    body = text.encode()
    if pad:
        body += b" " * ((8 - (8 + len(body)) % 8) % 8)
    n = len(body) if raw_len is None else raw_len
    return struct.pack("<Q", n) + body + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "safetensors")
    os.makedirs(out, exist_ok=True)
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    mixed = {
        "__metadata__": {"format": "pt"},
        "w": entry("F32", [2, 3], 0, 24),
        "h": entry("F16", [4], 24, 32),
        "b": entry("BF16", [2, 1, 1, 2], 32, 40),
        "s": entry("F32", [], 40, 44),
    }
    seeds = {
        "valid_f32": st({"w": entry("F32", [2, 3], 0, 24)}, f32),
        "valid_mixed_meta": st(mixed, bytes(range(44))),
        "valid_unpadded": st({"a": entry("BF16", [3], 0, 6)}, bytes(6), pad=False),
        "valid_empty": st({}),
        "valid_meta_only": st({"__metadata__": {"a": "b", "c": ""}}),
        "bad_truncated_data": st({"w": entry("F32", [2, 3], 0, 24)}, f32[:20]),
        "bad_len_huge": st({}, raw_len=(1 << 64) - 1),
        "bad_len_zero": st({}, raw_len=0),
        "bad_overlap": st({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, bytes(12)),
        "bad_begin_after_end": st({"a": entry("F32", [2], 8, 0)}, bytes(8)),
        "bad_unsupported_i64": st({"a": entry("I64", [1], 0, 8)}, bytes(8)),
        "bad_five_dims": st({"a": entry("F32", [1, 1, 1, 1, 1], 0, 4)}, bytes(4)),
        "bad_zero_dim": st({"a": entry("F32", [0, 2], 0, 0)}),
        "bad_size_mismatch": st({"a": entry("F16", [3], 0, 8)}, bytes(8)),
        "bad_overflow_shape": st({"a": entry("F32", [1 << 40, 1 << 40], 0, 4)}, bytes(4)),
        "bad_duplicate_key": st('{"a":' + json.dumps(entry("F32", [1], 0, 4)) + ',"a":' + json.dumps(entry("F32", [1], 0, 4)) + "}", bytes(4)),
        "bad_metadata_type": st({"__metadata__": {"k": 1}}),
        "bad_extra_key": st({"a": dict(entry("F32", [1], 0, 4), x=1)}, bytes(4)),
        "bad_json": st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]', bytes(4)),
    }
    for name, blob in sorted(seeds.items()):
        assert len(blob) < 4096, name
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
