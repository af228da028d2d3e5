"""Checks kilnc's planned peak against a memory budget.

  peak_within_budget.py KILNC_STDOUT BUDGET_BYTES [--below OTHER_STDOUT]

Exits 1 unless the "memory plan: peak ... (N bytes" line of KILNC_STDOUT says
N <= BUDGET_BYTES (and, with --below, N < the peak OTHER_STDOUT planned).
"""
import re
import sys


def peak_bytes(path):
    with open(path) as f:
        match = re.search(r"memory plan: peak [0-9.]+ MiB \((\d+) bytes", f.read())
    if not match:
        sys.exit(f"{path}: no 'memory plan: peak' line")
    return int(match.group(1))


peak, budget = peak_bytes(sys.argv[1]), int(sys.argv[2])
if peak > budget:
    sys.exit(f"{sys.argv[1]}: planned peak {peak} bytes exceeds the budget {budget}")
if len(sys.argv) > 4 and sys.argv[3] == "--below":
    other = peak_bytes(sys.argv[4])
    if peak >= other:
        sys.exit(f"{sys.argv[1]}: planned peak {peak} bytes is not below {other}")
print(f"peak {peak} <= budget {budget}")
