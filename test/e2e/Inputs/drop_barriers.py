"""Writes a dumped CUDA kernel with some of its barriers removed: the negative
controls of racecheck_emulated.test, kernels the race check must reject.

  drop_barriers.py KERNELS_DIR MODEL_LINE AFTER PATTERN OUT_DIR

Takes the kernel of KERNELS_DIR (a --dump-phases-to kernels directory) whose
first line names MODEL_LINE ("attention_cases.kiln:37:6") and whose entry is
k_attention_ or k_attention_grad_ as AFTER's first word says ("forward" or
"backward"), replaces every `__syncthreads();` that is followed on the same or
the next line by PATTERN (a regular expression) after the text AFTER's second
word names (e.g. "int stage = 0;") with `;`, and writes it with the prelude to
OUT_DIR. Exits 1 if it removed none.
"""
import os
import re
import shutil
import sys

kernels, line, after, pattern, out = sys.argv[1:6]
role, _, marker = after.partition(" ")
prefix = "k_attention_grad_" if role == "backward" else "k_attention_"
chosen = [f for f in sorted(os.listdir(kernels))
          if f.startswith(prefix) and (role == "backward" or not f.startswith("k_attention_grad_"))
          and line in open(os.path.join(kernels, f)).readline()]
if len(chosen) != 1:
    sys.exit(f"{len(chosen)} {role} kernels at {line} in {kernels}")
text = open(os.path.join(kernels, chosen[0])).read()
start = text.index(marker)
tail, removed = re.subn(r"__syncthreads\(\);(?=[ \t]*(?:\n[ \t]*)?" + pattern + ")", ";", text[start:])
if not removed:
    sys.exit(f"{chosen[0]}: no barrier followed by {pattern!r} after {marker!r}")
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(kernels, "prelude.cuh"), out)
open(os.path.join(out, chosen[0]), "w").write(text[:start] + tail)
print(f"{chosen[0]}: {removed} barriers removed")
