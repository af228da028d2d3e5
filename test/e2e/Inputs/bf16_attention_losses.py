"""Compares a bf16 run with attention-match against one without (attention_bf16.test).

  bf16_attention_losses.py MATCHED.jsonl PLAIN.jsonl RTOL MIN_DROP
      - the first step's loss, and every later step's, of MATCHED agree with
        PLAIN's within relative RTOL;
      - MATCHED trains: the mean of its last 5 losses is at least MIN_DROP
        below its first loss.
Prints one line per check and `bf16 attention: PASS` (exit 0) or FAIL (exit 1).
"""
import json
import sys


def losses(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [row["loss"] for row in rows if "loss" in row]


def main():
    matched, plain = losses(sys.argv[1]), losses(sys.argv[2])
    rtol, min_drop = float(sys.argv[3]), float(sys.argv[4])
    ok = True
    if len(matched) != len(plain) or len(matched) < 6:
        print(f"step counts differ or too few: {len(matched)} vs {len(plain)}")
        sys.exit(1)
    first = abs(matched[0] - plain[0]) / abs(plain[0])
    print(f"step 1 loss: {matched[0]:.6f} vs {plain[0]:.6f}, relative {first:.2e}"
          f" ({'ok' if first <= rtol else 'FAIL'})")
    ok &= first <= rtol
    worst = max(abs(a - b) / abs(b) for a, b in zip(matched, plain))
    print(f"all {len(matched)} steps: worst relative difference {worst:.2e}"
          f" ({'ok' if worst <= rtol else 'FAIL'})")
    ok &= worst <= rtol
    tail = sum(matched[-5:]) / 5
    drop = matched[0] - tail
    print(f"training: first loss {matched[0]:.4f}, mean of last 5 {tail:.4f},"
          f" drop {drop:.4f} ({'ok' if drop >= min_drop else 'FAIL'})")
    ok &= drop >= min_drop
    print("bf16 attention: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
