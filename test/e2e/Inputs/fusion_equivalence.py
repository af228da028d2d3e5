"""Compares a fused run of kiln with an unfused one (fusion_equivalence.test).

  fusion_equivalence.py metrics FUSED.jsonl UNFUSED.jsonl RTOL
      every step's loss and grad_norm agree within relative RTOL
  fusion_equivalence.py tensors FUSED.safetensors UNFUSED.safetensors RTOL [--noise SUFFIX...]
      same tensor names and shapes; per tensor max|a - b| <= RTOL * max|b|
      (relative to the tensor's scale: a near-zero element has no meaningful
      relative error of its own). Tensors whose names end in a --noise
      suffix are only checked for shape: parameters whose exact gradient is
      zero, so that training fills them with rounding noise (which Adam
      scales up to the learning rate) and any other summation order gives
      other noise.
"""
import json
import struct
import sys

import torch


def load_metrics(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def load_tensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ("F32", "I32"):
            sys.exit(f"{path}: {name} has dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        dtype = torch.float32 if info["dtype"] == "F32" else torch.int32
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        out[name] = t.reshape(info["shape"]).double()
    return out


def main():
    what, a_path, b_path, rtol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    noise = tuple(sys.argv[6:]) if sys.argv[5:6] == ["--noise"] else ()
    bad = []
    if what == "metrics":
        a, b = load_metrics(a_path), load_metrics(b_path)
        if len(a) != len(b) or not a:
            sys.exit(f"{len(a)} vs {len(b)} metric lines")
        for ra, rb in zip(a, b):
            for key in ("loss", "grad_norm"):
                x, y = ra[key], rb[key]
                if abs(x - y) > rtol * abs(y):
                    bad.append(f"step {ra['step']} {key}: {x} vs {y}")
        print(f"metrics: {len(a)} steps compared")
    elif what == "tensors":
        a, b = load_tensors(a_path), load_tensors(b_path)
        if sorted(a) != sorted(b):
            sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))}")
        for name in sorted(a):
            x, y = a[name], b[name]
            if x.shape != y.shape:
                bad.append(f"{name}: shape {list(x.shape)} vs {list(y.shape)}")
                continue
            if noise and name.endswith(noise):
                continue
            scale = y.abs().max().item()
            diff = (x - y).abs().max().item()
            if diff > rtol * scale:
                bad.append(f"{name}: max diff {diff:.3e} > {rtol} * {scale:.3e}")
        print(f"tensors: {len(a)} compared")
    else:
        sys.exit(f"unknown check {what}")
    for line in bad:
        print("MISMATCH", line)
    print("equivalence: PASS" if not bad else "equivalence: FAIL")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
