#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads a safetensors file by the format's specification, independently of Spur's reader, and checks what the
`safetensors` library checks: 8-byte little-endian header length, a JSON header, 8-byte aligned data start,
offsets that tile the data exactly. Prints {"metadata": ..., "tensors": {name: [dtype, shape, sum]}}.
(The `safetensors` package itself is not in Debian; this follows its published format.)"""
import json
import struct
import sys

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def main(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert (8 + n) % 8 == 0, "data does not start on an 8-byte boundary"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in metadata.values()), "metadata values must be strings"
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    end = 0
    out = {}
    for name, info in entries:
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: offsets leave a gap or overlap"
        dtype = DTYPES[info["dtype"]]
        numel = 1
        for d in info["shape"]:
            numel *= d
        itemsize = torch.tensor([], dtype=dtype).element_size()
        assert stop - begin == numel * itemsize, f"{name}: size mismatch"
        assert begin % itemsize == 0, f"{name}: misaligned"
        raw = bytearray(data[begin:stop])
        t = torch.frombuffer(raw, dtype=dtype) if numel else torch.empty(0, dtype=dtype)
        t = t.reshape(info["shape"])
        out[name] = [info["dtype"], list(info["shape"]), float(t.to(torch.float64).sum())]
        end = stop
    assert end == len(data), "offsets do not cover the data exactly"
    print(json.dumps({"metadata": metadata, "tensors": out}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
