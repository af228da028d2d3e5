"""Checks that every pass declared in passes/*.td has its lit test.

A pass `Pass<"kiln-FLAG", ...>` must have test/passes/FLAG.mlir whose RUN
line uses --kiln-FLAG (STYLE.md item 2). Usage: every_pass_has_a_test.py SRC
"""
import os
import re
import sys

src = sys.argv[1]
flags = []
passes = os.path.join(src, "passes")
for name in sorted(os.listdir(passes)):
    if name.endswith(".td"):
        with open(os.path.join(passes, name)) as f:
            flags += re.findall(r'Pass<"(kiln-[a-z0-9-]+)"', f.read())
if not flags:
    sys.exit("no passes found in passes/*.td")

missing = []
for flag in flags:
    path = os.path.join(src, "test", "passes", flag[len("kiln-"):] + ".mlir")
    if not os.path.exists(path):
        missing.append(f"{flag}: no {os.path.relpath(path, src)}")
        continue
    with open(path) as f:
        if not re.search(r"RUN:.*--" + re.escape(flag) + r"\b", f.read()):
            missing.append(f"{flag}: {os.path.relpath(path, src)} has no RUN line with --{flag}")
for line in missing:
    print(line)
sys.exit(1 if missing else 0)
