# tests/make_idx_fixtures.py: writes the small gzip IDX files data_spec.lua reads (run from the repo root).
import gzip, struct

def idx(path, type_code, fmt, shape, values):
    head = bytes([0, 0, type_code, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape)
    body = struct.pack(">%d%s" % (len(values), fmt), *values)
    with open(path, "wb") as f:
        f.write(gzip.compress(head + body, mtime=0))

idx("tests/fixtures/tiny-u8-idx3.gz", 0x08, "B", [3, 2, 2], list(range(0, 240, 20)))
idx("tests/fixtures/tiny-i32-idx1.gz", 0x0C, "i", [4], [-1, 0, 70000, 2 ** 31 - 1])
idx("tests/fixtures/tiny-f32-idx2.gz", 0x0D, "f", [2, 3], [0.5, -1.25, 3.0, 1e-3, 0.0, -7.5])
idx("tests/fixtures/tiny-f64-idx1.gz", 0x0E, "d", [2], [0.1, -2.5e300])
