"""Sums the bf16 copies of block parameters live at a plan's peak.

  param_copies_at_peak.py MEMORY_PLAN_TXT MODEL_FILE (--at-most | --at-least) MIB

Reads the "tensors live at the peak" list of a --dump-phases-to
memory-plan.txt (every tensor, largest first) and sums the kiln.convert
entries located at a `param` line inside a `block` of MODEL_FILE (an
indented one): mixed precision's bf16 copy of a parameter carries its
declaration's location. Exits 1 unless the sum is at most (or at least) MIB.
"""
import re
import sys

plan_path, model_path, bound, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
with open(model_path) as f:
    param_lines = {n for n, line in enumerate(f, 1)
                   if line[:1].isspace() and line.strip().startswith("param ")}

total, count, listing = 0.0, 0, False
with open(plan_path) as f:
    for line in f:
        if line.startswith("tensors live at the peak"):
            listing = True
            continue
        if listing and not line.startswith(" "):
            break
        entry = re.match(r"\s+([0-9.]+) MiB\s+\S+:(\d+):\d+\s+kiln\.convert\b", line)
        if listing and entry and int(entry.group(2)) in param_lines:
            total += float(entry.group(1))
            count += 1
if not listing:
    sys.exit(f"{plan_path}: no 'tensors live at the peak' list")
print(f"{count} parameter copies live at the peak: {total:.2f} MiB")
if bound == "--at-most" and total > limit:
    sys.exit(f"{plan_path}: {total:.2f} MiB of parameter copies at the peak, more than {limit}")
if bound == "--at-least" and total < limit:
    sys.exit(f"{plan_path}: {total:.2f} MiB of parameter copies at the peak, less than {limit}")
