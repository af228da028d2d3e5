"""Compares first-step gradients of tiny_gpt with and without attention-match.

  attention_match_equivalence.py MATCHED.safetensors PLAIN.safetensors RTOL ZERO

Every gradient agrees within max|a - b| <= RTOL * max|b|, except the key
biases (names ending in ".bk"): q . bk adds the same value to every score of
a row, which softmax cancels, so their exact gradient is zero and both runs
hold only rounding noise; those must be below ZERO in absolute value.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fusion_equivalence import load_tensors  # noqa: E402


def main():
    a_path, b_path = sys.argv[1], sys.argv[2]
    rtol, zero = float(sys.argv[3]), float(sys.argv[4])
    a, b = load_tensors(a_path), load_tensors(b_path)
    if sorted(a) != sorted(b):
        sys.exit(f"tensor names differ: {sorted(set(a) ^ set(b))}")
    bad, zeros = [], 0
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.shape != y.shape:
            bad.append(f"{name}: shape {list(x.shape)} vs {list(y.shape)}")
        elif name.endswith(".bk"):
            zeros += 1
            worst = max(x.abs().max().item(), y.abs().max().item())
            if worst > zero:
                bad.append(f"{name}: |gradient| {worst:.3e} > {zero} (should be 0)")
        else:
            scale = y.abs().max().item()
            diff = (x - y).abs().max().item()
            if diff > rtol * scale:
                bad.append(f"{name}: max diff {diff:.3e} > {rtol} * {scale:.3e}")
    print(f"tensors: {len(a)} compared, {zeros} of them zero-gradient key biases")
    for line in bad:
        print("MISMATCH", line)
    print("equivalence: PASS" if not bad else "equivalence: FAIL")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
