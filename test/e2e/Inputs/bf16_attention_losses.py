"""Compares a bf16 run with attention-match against one without (attention_bf16.test).

  bf16_attention_losses.py MATCHED.jsonl PLAIN.jsonl [MATCHED2 PLAIN2 ...] RTOL MIN_DROP
      - the first step's loss of MATCHED agrees with PLAIN's within relative
        RTOL, for every pair (one seed each);
      - every later step's too, judged on the median over the pairs of each
        pair's worst step: after a loss spike the two trajectories drift
        apart chaotically, by a different amount for every seed;
      - the first MATCHED trains: the mean of its last 5 losses is at least
        MIN_DROP below its first loss.
Prints one line per check and `bf16 attention: PASS` (exit 0) or FAIL (exit 1).
"""
import json
import sys


def losses(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [row["loss"] for row in rows if "loss" in row]


def main():
    paths = sys.argv[1:-2]
    rtol, min_drop = float(sys.argv[-2]), float(sys.argv[-1])
    if not paths or len(paths) % 2:
        print("expected MATCHED PLAIN pairs")
        sys.exit(1)
    ok = True
    worsts = []
    for m_path, p_path in zip(paths[::2], paths[1::2]):
        matched, plain = losses(m_path), losses(p_path)
        if len(matched) != len(plain) or len(matched) < 6:
            print(f"step counts differ or too few: {len(matched)} vs {len(plain)}")
            sys.exit(1)
        first = abs(matched[0] - plain[0]) / abs(plain[0])
        print(f"step 1 loss: {matched[0]:.6f} vs {plain[0]:.6f}, relative {first:.2e}"
              f" ({'ok' if first <= rtol else 'FAIL'})")
        ok &= first <= rtol
        worsts.append(max(abs(a - b) / abs(b) for a, b in zip(matched, plain)))
    worst = sorted(worsts)[len(worsts) // 2]
    print(f"all {len(matched)} steps: worst relative difference per seed "
          f"{', '.join(f'{w:.2e}' for w in worsts)}, median {worst:.2e}"
          f" ({'ok' if worst <= rtol else 'FAIL'})")
    ok &= worst <= rtol
    matched = losses(paths[0])
    tail = sum(matched[-5:]) / 5
    drop = matched[0] - tail
    print(f"training: first loss {matched[0]:.4f}, mean of last 5 {tail:.4f},"
          f" drop {drop:.4f} ({'ok' if drop >= min_drop else 'FAIL'})")
    ok &= drop >= min_drop
    print("bf16 attention: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
