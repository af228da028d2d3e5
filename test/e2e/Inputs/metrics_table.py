"""Columns of kiln-run's JSONL metrics, for FileCheck, diff and tolerance checks.

  metrics_table.py print METRICS.jsonl KEY...
      one line per record: "step=S KEY=VALUE ...", VALUE as the JSON text wrote
      it (so two files with the same lines hold the same numbers bit for bit)
      and "-" for a key the record lacks
  metrics_table.py close A.jsonl B.jsonl KEY RTOL N
      the first N records of A and B have the same steps and values of KEY that
      agree within relative tolerance RTOL; prints the largest difference
  metrics_table.py derived METRICS.jsonl
      the derived metrics of every record agree with what they derive from,
      within relative 1e-6 (9 printed digits lose ~5e-9): update_ratio =
      update_norm / param_norm, tokens_per_s = tokens / step time, and (when
      present) mfu * step_ms is the same every step (FLOPs per step / peak)
"""
import json
import sys


def load(path):
    # Keep each number's text as written: float() of it is exact, and printing
    # it back unchanged shows what kiln-run wrote rather than Python's repr.
    rows = [json.loads(line, parse_float=str, parse_int=str)
            for line in open(path) if line.strip()]
    if not rows:
        sys.exit(f"{path}: no metrics")
    return rows


def text(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def print_columns(path, keys):
    for row in load(path):
        cells = [f"step={row['step']}"]
        cells += [f"{k}={text(row[k]) if k in row else '-'}" for k in keys]
        print(" ".join(cells))


def close(path_a, path_b, key, rtol, count):
    a, b = load(path_a)[:count], load(path_b)[:count]
    if len(a) < count or len(b) < count:
        sys.exit(f"need {count} records, have {len(a)} and {len(b)}")
    worst = 0.0
    for ra, rb in zip(a, b):
        if ra["step"] != rb["step"]:
            sys.exit(f"steps differ: {ra['step']} vs {rb['step']}")
        x, y = float(ra[key]), float(rb[key])
        diff = abs(x - y) / max(abs(x), abs(y), 1e-30)
        worst = max(worst, diff)
        if diff > rtol:
            sys.exit(f"step {ra['step']}: {key} {x!r} vs {y!r}, relative "
                     f"difference {diff:.3g} > {rtol:g}")
    print(f"{key}: {count} steps agree, largest relative difference "
          f"{worst:.3g} <= {rtol:g}")


def derived(path):
    rows = load(path)

    def agree(what, x, y):
        if abs(x - y) > 1e-6 * max(abs(x), abs(y)):
            sys.exit(f"{what}: {x!r} vs {y!r}")

    for row in rows:
        step = row["step"]
        get = lambda key: float(row[key])
        agree(f"step {step} update_ratio", get("update_ratio"),
              get("update_norm") / get("param_norm"))
        agree(f"step {step} tokens_per_s", get("tokens_per_s"),
              get("tokens") / (get("step_ms") / 1e3))
        if "mfu" in row:
            agree(f"step {step} mfu * step_ms", get("mfu") * get("step_ms"),
                  float(rows[0]["mfu"]) * float(rows[0]["step_ms"]))
    print(f"derived metrics agree in {len(rows)} records")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "print":
        print_columns(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "derived":
        derived(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "close":
        close(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]),
              int(sys.argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
