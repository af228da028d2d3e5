"""Checks on kiln-run's JSONL metrics, for the end-to-end lit tests.

  check_metrics.py final-loss-below METRICS.jsonl LIMIT [MORE.jsonl...]
                                                  (mean of the last 20 steps; with several
                                                   runs, the median of their means)
  check_metrics.py first-loss-near METRICS.jsonl VALUE TOLERANCE
  check_metrics.py identical A.jsonl B.jsonl      (every recorded value bit-identical,
                                                   except wall-clock measurements)
  check_metrics.py fields METRICS.jsonl FIELD...  (every line has every field)
"""
import json
import sys


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def main():
    what, path = sys.argv[1], sys.argv[2]
    rows = load(path)
    if not rows:
        sys.exit(f"{path}: no metrics")
    if what == "final-loss-below":
        limit = float(sys.argv[3])
        # One batch's loss is noisy (batches differ in difficulty); the mean over
        # the last 20 steps is the training loss a logger would report. One run's
        # trajectory is chaotic: a rounding-level change (a reassociated add) has
        # moved one seed's mean by 0.2 after 300 steps while other seeds moved by
        # 1e-3, so several seeds are judged by their median.
        finals = []
        for run in [rows] + [load(p) for p in sys.argv[4:]]:
            tail = run[-20:]
            finals.append(sum(r["loss"] for r in tail) / len(tail))
            print(f"first loss {run[0]['loss']:.4f}, mean loss of steps {tail[0]['step']}-{tail[-1]['step']}: {finals[-1]:.4f}")
        final = sorted(finals)[len(finals) // 2]
        print(f"median {final:.4f} of {len(finals)} run(s) (limit {limit})")
        sys.exit(0 if final < limit else 1)
    if what == "first-loss-near":
        value, tolerance = float(sys.argv[3]), float(sys.argv[4])
        first = rows[0]["loss"]
        print(f"first loss {first:.4f}, expected {value} +- {tolerance}")
        sys.exit(0 if abs(first - value) <= tolerance else 1)
    if what == "identical":
        other = load(sys.argv[3])
        timing = {"step_ms", "device_ms", "tokens_per_s", "mfu", "peak_memory_bytes"}
        a = [{k: v for k, v in r.items() if k not in timing} for r in rows]
        b = [{k: v for k, v in r.items() if k not in timing} for r in other]
        print("identical" if a == b else f"differ: {a[:3]} vs {b[:3]}")
        sys.exit(0 if a == b else 1)
    if what == "fields":
        missing = [(r.get("step"), f) for r in rows for f in sys.argv[3:] if f not in r]
        print("all fields present" if not missing else f"missing: {missing[:5]}")
        sys.exit(0 if not missing else 1)
    sys.exit(f"unknown check {what}")


if __name__ == "__main__":
    main()
