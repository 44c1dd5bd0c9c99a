#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes an MNIST folder (the four uncompressed IDX files torch::data::datasets::MNIST reads) holding the first
# TRAIN and TEST samples of Debian's Fashion-MNIST (the same format), so that the ported programs train in seconds.
#   make_mnist.py SOURCE_DIR OUT_DIR TRAIN TEST
import gzip
import struct
import sys
from pathlib import Path

source, out, counts = Path(sys.argv[1]), Path(sys.argv[2]), {"train": int(sys.argv[3]), "t10k": int(sys.argv[4])}
out.mkdir(parents=True, exist_ok=True)
for split, count in counts.items():
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        data = gzip.open(source / f"{split}-{kind}.gz").read()
        magic, total = struct.unpack(">II", data[:8])
        dims = magic & 0xFF
        shape = struct.unpack(f">{dims - 1}I", data[8:4 * (dims + 1)]) if dims > 1 else ()
        record = 1
        for size in shape:
            record *= size
        if count > total:
            sys.exit(f"{source}/{split}-{kind}.gz holds {total} samples, fewer than {count}")
        header = struct.pack(">II", magic, count) + data[8:4 * (dims + 1)]
        body = data[4 * (dims + 1):4 * (dims + 1) + count * record]
        (out / f"{split}-{kind}").write_bytes(header + body)
