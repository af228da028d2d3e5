#!/usr/bin/env python3
"""The SASS of a dumped CUDA kernel's loops, counted without a GPU.

    tools/bench/sass_loops.py DIR/kernels/k_NAME.cu [--arch sm_90a]

Compiles the kernel (a `kilnc --dump-phases-to=DIR` file, which includes
DIR/kernels/prelude.cuh) with nvcc as kiln-run compiles it with NVRTC
(--fmad=false, C++17, the given real architecture), disassembles the cubin
with nvdisasm and prints, for every loop (a backward branch), its size in
instructions and its commonest opcodes. A bandwidth-bound kernel moving B bytes
an element can issue about 8 instructions a byte on an H100 or H200 (132 SMs x
4 schedulers x 32 lanes at ~1.9 GHz against ~4 TB/s): a loop over 8 elements
far above 64 B instructions is bound by issue, not by memory. A loop's size
is the address range from its label to its backward branch: it includes the
loops nested in it and any cold code placed inside (sincosf's slow-path range
reduction, say), so it is an upper bound on the instructions an iteration
issues.

nvdisasm is not in the CUDA toolkit Debian's CI installs; PyPI has it:
`pip install nvidia-cuda-nvdisasm` (set $NVDISASM to the binary if it is not on
PATH). nvcc is /usr/local/cuda/bin/nvcc unless $NVCC says otherwise.
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def find_nvdisasm():
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    found = shutil.which("nvdisasm")
    if found:
        return found
    # pip install nvidia-cuda-nvdisasm puts it under site-packages/nvidia/.
    for site in sys.path:
        hits = glob.glob(os.path.join(site, "nvidia", "*", "bin", "nvdisasm"))
        if hits:
            return hits[0]
    sys.exit("sass_loops: nvdisasm not found (pip install nvidia-cuda-nvdisasm, "
             "or set NVDISASM)")


def disassemble(source, arch):
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "kernel.cubin")
        subprocess.run([nvcc, "-cubin", f"-arch={arch}", "--std=c++17", "--fmad=false",
                        source, "-o", cubin], check=True)
        return subprocess.run([find_nvdisasm(), "-c", cubin], check=True,
                              capture_output=True, text=True).stdout


def parse(sass):
    """[(address, text)] and {label: address of its next instruction}."""
    instructions, labels, pending = [], {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            pending.append(label.group(1))
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            address = int(m.group(1), 16)
            for name in pending:
                labels[name] = address
            pending = []
            instructions.append((address, m.group(2)))
    return instructions, labels


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("--arch", default="sm_90a")
    args = parser.parse_args()
    instructions, labels = parse(disassemble(args.kernel, args.arch))
    print(f"{os.path.basename(args.kernel)} ({args.arch}): {len(instructions)} instructions")
    for address, text in instructions:
        target = re.search(r"BRA\b.*?(\.L_x_\d+)", text)
        if not target or labels.get(target.group(1), address) >= address:
            continue
        start = labels[target.group(1)]
        body = [t for a, t in instructions if start <= a <= address]
        common = collections.Counter(opcode(t) for t in body).most_common(6)
        print(f"  loop {start:#06x}-{address:#06x}: {len(body)} instructions "
              f"({', '.join(f'{op} {n}' for op, n in common)})")


if __name__ == "__main__":
    main()
