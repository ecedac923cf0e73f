# tests/safetensors_ref.py: an independent safetensors reader/writer (struct + json only) for state_file_spec.
#   read PATH   -> prints {"tensors": {name: {"dtype", "shape", "values"}}, "metadata": {...}} as JSON
#   write PATH  -> writes a hand-made file with one tensor of every dtype ds reads, and metadata
import json, struct, sys

FMT = {"F32": "f", "F64": "d", "I64": "q", "I32": "i", "U8": "B", "BOOL": "?"}

def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    buf = data[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        fmt = FMT[e["dtype"]]
        count = (end - b) // struct.calcsize(fmt)
        vals = list(struct.unpack("<%d%s" % (count, fmt), buf[b:end]))
        out[name] = {"dtype": e["dtype"], "shape": e["shape"], "values": vals}
    print(json.dumps({"tensors": out, "metadata": meta}))

def write(path):
    tensors = [  # name, dtype, shape, values (row-major)
        ("w.f32", "F32", [2, 2], [1.5, -2.25, 3.0, 1e-3]),
        ("w.f64", "F64", [3], [0.1, -1e300, 2.5]),
        ("i.i64", "I64", [2], [-(2 ** 40) - 3, 2 ** 53 + 1]),
        ("i.i32", "I32", [1, 3], [-7, 0, 2 ** 31 - 1]),
        ("u", "U8", [4], [0, 1, 128, 255]),
        ("mask", "BOOL", [2], [True, False]),
        ("scalar", "F32", [], [42.0]),
        ("empty", "F32", [0, 3], []),
    ]
    header, chunks, off = {"__metadata__": {"made": "by hand"}}, [], 0
    for name, dt, shape, vals in tensors:
        raw = struct.pack("<%d%s" % (len(vals), FMT[dt]), *vals)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))

if __name__ == "__main__":
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2])
