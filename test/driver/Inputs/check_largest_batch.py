"""Checks kilnc --largest-batch's answer by compiling its neighbours.

  check_largest_batch.py KILNC MODEL SIZE_BYTES FIT_STDOUT FIT_KART WORKDIR [KILNC_ARG...]

FIT_STDOUT is what `kilnc MODEL --largest-batch=SIZE -o FIT_KART KILNC_ARG...`
printed. Exits 1 unless its "largest batch: N" line names a batch N whose plan,
compiled here with -D batch=N, peaks at most SIZE_BYTES while batch N + 1's
exceeds it; unless the peaks it prints are those compiles' own; and unless
FIT_KART is byte for byte the artifact compiled at -D batch=N (the search
leaves the ordinary compilation at that batch, not a probe's leftovers).
"""
import re
import subprocess
import sys

kilnc, model, size, fit_stdout, fit_kart, workdir = sys.argv[1:7]
extra = sys.argv[7:]
size = int(size)
text = open(fit_stdout).read()
line = re.search(r"^largest batch: (\d+) \(planned peak ([0-9.]+) MiB of ([0-9.]+) MiB; "
                 r"batch (\d+) plans ([0-9.]+) MiB\)$", text, re.M)
if not line:
    sys.exit(f"{fit_stdout}: no 'largest batch: N (...; batch M plans ...)' line")
batch, above = int(line.group(1)), int(line.group(4))
if above != batch + 1:
    sys.exit(f"the neighbour named is batch {above}, not {batch + 1}")
if abs(float(line.group(3)) - size / 2**20) > 0.005:
    sys.exit(f"the size printed, {line.group(3)} MiB, is not {size} bytes")


def compile_at(b):
    out = f"{workdir}/batch{b}.kart"
    printed = subprocess.run([kilnc, model, "-D", f"batch={b}", "-o", out, *extra],
                             check=True, capture_output=True, text=True).stdout
    peak = re.search(r"memory plan: peak ([0-9.]+) MiB \((\d+) bytes", printed)
    return out, peak.group(1), int(peak.group(2))


kart, fit_mib, fit_bytes = compile_at(batch)
_, above_mib, above_bytes = compile_at(batch + 1)
if fit_bytes > size:
    sys.exit(f"batch {batch} plans {fit_bytes} bytes, more than {size}")
if above_bytes <= size:
    sys.exit(f"batch {batch + 1} plans {above_bytes} bytes, which fits {size}: not the largest")
if (line.group(2), line.group(5)) != (fit_mib, above_mib):
    sys.exit(f"printed peaks {line.group(2)} and {line.group(5)} MiB, compiled {fit_mib} and {above_mib}")
if f"memory plan: peak {fit_mib} MiB ({fit_bytes} bytes" not in text:
    sys.exit(f"{fit_stdout}: the memory plan printed is not batch {batch}'s")
if open(fit_kart, "rb").read() != open(kart, "rb").read():
    sys.exit(f"{fit_kart} differs from the artifact compiled with -D batch={batch}")
print(f"largest batch {batch}: {fit_bytes} <= {size} < {above_bytes}")
