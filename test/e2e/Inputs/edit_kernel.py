"""Writes a dumped CUDA kernel with one mistake put in: the negative controls
of racecheck_emulated.test and memcheck_emulated.test, kernels the emulated
sanitizers must reject.

  edit_kernel.py KERNELS_DIR NAME_REGEX MODEL_LINE REGEX REPLACEMENT OUT_DIR [AFTER]

Takes the first kernel (by file name) of KERNELS_DIR (a --dump-phases-to
kernels directory) whose file name matches NAME_REGEX and whose first line
contains MODEL_LINE ("" for any), replaces every match of REGEX (Python's re,
REPLACEMENT may use \\1) in its text after the first AFTER (the whole text
without it), and writes it with the prelude to OUT_DIR. Exits 1 if nothing
matched.
"""
import os
import re
import shutil
import sys

kernels, name_regex, model_line, regex, replacement, out = sys.argv[1:7]
after = sys.argv[7] if len(sys.argv) > 7 else ""
chosen = [f for f in sorted(os.listdir(kernels)) if re.search(name_regex, f)
          and model_line in open(os.path.join(kernels, f)).readline()]
if not chosen:
    sys.exit(f"no kernel of {kernels} matches {name_regex!r} at {model_line!r}")
text = open(os.path.join(kernels, chosen[0])).read()
start = text.index(after) if after else 0
tail, edits = re.subn(regex, replacement, text[start:])
if not edits:
    sys.exit(f"{chosen[0]}: nothing matches {regex!r}")
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(kernels, "prelude.cuh"), out)
open(os.path.join(out, chosen[0]), "w").write(text[:start] + tail)
print(f"{chosen[0]}: {edits} edits")
