"""Compares two kiln-run JSONL metric files key by key, for the CUDA-vs-CPU tests.

  compare_metrics.py A.jsonl B.jsonl KEY=RTOL [KEY=RTOL...]

Both files must record the same steps. For every KEY, each step that has it in
either file must have it in both, and the values must agree within relative
tolerance RTOL (|a - b| <= RTOL * max(|a|, |b|), non-finite values must be equal);
RTOL 0 means bit-identical as written. Prints one line per key with the largest
relative difference seen, and exits 1 on the first disagreement.
"""
import json
import math
import sys


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        sys.exit(f"{path}: no metrics")
    return rows


def main():
    a_path, b_path = sys.argv[1], sys.argv[2]
    a, b = load(a_path), load(b_path)
    if [r["step"] for r in a] != [r["step"] for r in b]:
        sys.exit(f"steps differ: {[r['step'] for r in a]} vs {[r['step'] for r in b]}")
    for spec in sys.argv[3:]:
        key, rtol = spec.split("=")
        rtol = float(rtol)
        worst, seen = 0.0, 0
        for ra, rb in zip(a, b):
            if (key in ra) != (key in rb):
                sys.exit(f"step {ra['step']}: {key} only in one file")
            if key not in ra:
                continue
            x, y = float(ra[key]), float(rb[key])
            seen += 1
            if not (math.isfinite(x) and math.isfinite(y)):
                if not (x == y or (math.isnan(x) and math.isnan(y))):
                    sys.exit(f"step {ra['step']}: {key} {x} vs {y}")
                continue
            diff = abs(x - y) / max(abs(x), abs(y), 1e-30)
            worst = max(worst, diff)
            if diff > rtol:
                sys.exit(f"step {ra['step']}: {key} {x} vs {y} (relative {diff:.3g} > {rtol})")
        if seen == 0:
            sys.exit(f"{key}: in no record")
        print(f"{key}: {seen} values agree (largest relative difference {worst:.3g})")


if __name__ == "__main__":
    main()
