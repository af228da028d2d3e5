#!/usr/bin/env python3
"""compute-sanitizer's racecheck and memcheck for dumped CUDA kernels, without a GPU.

    tools/gpu/emulated_sanitizer.py [--tool racecheck|memcheck] [--blocks 0,1,-1]
                                    DIR/kernels/k_NAME.cu...

compute-sanitizer needs a GPU. This runs kernels that `kilnc --target=cuda
--dump-phases-to=DIR` wrote on the host instead: the CUDA threads of a block
as host threads (test/unit/codegen/CudaHostEmulation.h, the emulation the
kernel unit tests use; __syncthreads and __syncwarp are barriers of those
threads, the WMMA operations and the mma.sync / ldmatrix stand-ins wait for
the warp), built with a sanitizer:

  racecheck (default): ThreadSanitizer. Two accesses of one shared or global
    address by different threads with no barrier between them, one of them a
    write, are a data race, whichever order they happened to run in. The
    emulated cp.async writes its bytes both when issued and when its group is
    waited for (KILN_RACECHECK), the earliest and the latest the GPU may land
    them: a tile read while its copy may still land, or overwritten while
    others still read it, is a race.
  memcheck: AddressSanitizer and UndefinedBehaviorSanitizer. Every buffer is a
    heap block of exactly its bytes (256-byte aligned, as the arena places
    it) and the dynamic shared memory exactly the launch's shared bytes
    (KILN_MEMCHECK), so a read or write past either is reported; so is a vector
    access (16-byte loads and stores, ldmatrix rows, cp.async) at an address
    the GPU would fault on, and undefined integer arithmetic (a 32-bit index
    that overflows, an out-of-range shift).

Races between blocks and the GPU's weaker memory order are not modelled.
Each kernel is compiled with its prelude (DIR/kernels/prelude.cuh), its
buffers are sized from its `in:` / `out:` comments and pointer declarations
(floats and bf16 normal random values, every integer --int-value, default 1,
kilnc's scratch zero), and the listed blocks run one after another (negative
numbers count from the grid's end): blocks of each role a kernel gives its
grid (the attention backward's dK/dV and dQ blocks, a norm backward's rows and
column sums) are worth listing. Prints one line per kernel and exits 1 if any
has a finding (the sanitizer's report follows) or fails to run.

Needs the host C++ compiler ($CXX, default c++) with -fsanitize=thread,
address and undefined (GCC's libtsan, libasan and libubsan).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EMULATION = os.path.join(ROOT, "test", "unit", "codegen", "CudaHostEmulation.h")
# The kernel's pointer types: bytes an element, and how main() fills them.
C_TYPES = {"float": (4, "f"), "uint16_t": (2, "b"), "int32_t": (4, "i"), "int64_t": (8, "i"),
           "uint8_t": (1, "i"), "double": (8, "z"), "unsigned int": (4, "z")}
ELEMENTS = {"f32": (4, "f"), "bf16": (2, "b"), "i32": (4, "i"), "i64": (8, "i"), "i1": (1, "i")}
DECLARATION = re.compile(r"= \((?:const )?([a-z_0-9 ]+?)\*\)buffers\[(\d+)\]; // "
                         r"(?:tensor<((?:\d+x)*)\w+>|scratch: .*\[(\d+)\])$", re.M)


def elements(shape):
    """Elements of a tensor<AxBx...> type's shape text ("2x64x" -> 128; "" -> 1)."""
    count = 1
    for d in shape.rstrip("x").split("x") if shape else []:
        count *= int(d)
    return count


def parse_kernel(path):
    """(entry, grid, block, shared bytes, [(bytes an element, elements, fill)], source
    without its prelude include).

    Buffers come from the kernel's `in:` / `out:` comments, in order, and its
    declarations of its pointers
    (`const float* in0 = (const float*)buffers[0]; // tensor<2x64xf32>`, or a
    `// scratch: NAME [elements]` for the scratch kilnc plans beside them,
    zeroed as the arena is: counters start at 0)."""
    text = open(path).read()
    launch = re.search(r"^// launch: grid (\d+), block (\d+), shared bytes (\d+)$", text, re.M)
    entry = re.search(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(void\* const\* __restrict__ buffers\)', text)
    if not launch or not entry:
        sys.exit(f"{path}: not a kernel kilnc --target=cuda --dump-phases-to wrote "
                 "(no '// launch:' line or entry point)")
    found = {}
    # The `in:` / `out:` comments list the buffers in order (a multi-tensor
    # kernel picks its pointers from a segment table, declaring none).
    for index, (shape, element) in enumerate(
            re.findall(r"^//   (?:in|out): +tensor<((?:\d+x)*)(\w+)>$", text, re.M)):
        if element not in ELEMENTS:
            sys.exit(f"{path}: buffers[{index}] holds {element}, which this check does not fill")
        size, fill = ELEMENTS[element]
        found[index] = (size, elements(shape), fill)
    for ctype, index, shape, scratch in DECLARATION.findall(text):
        if ctype not in C_TYPES:
            sys.exit(f"{path}: buffers[{index}] is a {ctype}*, which this check does not fill")
        size, fill = C_TYPES[ctype]
        found[int(index)] = (size, int(scratch), "z") if scratch else (size, elements(shape), fill)
    used = {int(i) for i in re.findall(r"buffers\[(\d+)\]", text)}
    if sorted(found) != list(range(len(found))) or not used <= set(found) or not found:
        sys.exit(f"{path}: cannot size every buffer the kernel reads "
                 f"(declared {sorted(found)}, read {sorted(used)})")
    source = text.replace('#include "prelude.cuh"\n', "")
    return (entry.group(1), int(launch.group(1)), int(launch.group(2)), int(launch.group(3)),
            [found[i] for i in range(len(found))], source)


# What each tool defines before the emulation, and compiles with.
TOOLS = {
    "racecheck": ("KILN_RACECHECK", ["-fsanitize=thread"]),
    "memcheck": ("KILN_MEMCHECK", ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]),
}


def harness(path, prelude, blocks, int_value=1, tool="racecheck"):
    entry, grid, block, shared, buffers, source = parse_kernel(path)
    chosen = sorted({b % grid for b in blocks})
    lines = [f"#define {TOOLS[tool][0]} 1", f'#include "{EMULATION}"']
    # The host has <stdint.h>: the prelude's NVRTC-only typedefs go, as in
    # test/unit/codegen/KernelRunner.cpp.
    lines += [l for l in prelude.splitlines() if not l.startswith("typedef ")]
    lines.append(source)
    sizes = ", ".join(f"{{{size}ull, {n}ull, '{fill}'}}" for size, n, fill in buffers)
    lines.append(f"""
#include <cstdio>
#include <cstdlib>
#include <random>
struct KilnBufferSpec {{ unsigned long long bytes, count; char fill; }};
int main() {{
  const KilnBufferSpec spec[] = {{{sizes}}};
  const int n = sizeof spec / sizeof spec[0];
  std::vector<void *> pointers(n);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < n; ++i) {{
    // Exactly the buffer's bytes, 256-byte aligned as the arena places it.
    unsigned char *p = nullptr;
    const unsigned long long bytes = spec[i].bytes * spec[i].count;
    if (posix_memalign(reinterpret_cast<void **>(&p), 256, bytes ? bytes : 1) != 0)
      return 2;
    memset(p, 0, bytes);
    pointers[i] = p;
    for (unsigned long long e = 0; e < spec[i].count; ++e) {{
      if (spec[i].fill == 'f') {{
        float v = normal(random);
        memcpy(p + 4 * e, &v, 4);
      }} else if (spec[i].fill == 'i') {{
        const long long v = {int_value};
        memcpy(p + spec[i].bytes * e, &v, spec[i].bytes); // little-endian: the low bytes
      }} else if (spec[i].fill == 'b') {{
        float v = normal(random);
        unsigned int bits;
        memcpy(&bits, &v, 4);
        unsigned short h = static_cast<unsigned short>(bits >> 16);
        memcpy(p + 2 * e, &h, 2);
      }}
    }}
  }}
#ifdef KILN_MEMCHECK
  kiln_emulated_dynamic_shared = {shared} ? static_cast<unsigned char *>(malloc({shared})) : nullptr;
#endif
  const unsigned int blocks[] = {{{", ".join(f"{b}u" for b in chosen)}}};
  for (unsigned int b : blocks)
    kiln_emulate_block({entry}, pointers.data(), {grid}u, {block}u, b);
  std::printf("ran blocks {", ".join(map(str, chosen))} of {grid}\\n");
  for (void *p : pointers)
    free(p);
  return 0;
}}
""")
    return entry, "\n".join(lines) + "\n", sum(size * n for size, n, _ in buffers)


def check(path, tool, blocks, int_value, timeout, cxx):
    """(one verdict line and what follows it, whether the kernel has a finding or failed)."""
    prelude_path = os.path.join(os.path.dirname(path), "prelude.cuh")
    if not os.path.exists(prelude_path):
        sys.exit(f"{path}: no prelude.cuh beside it (a --dump-phases-to kernels directory)")
    entry, program, buffer_bytes = harness(path, open(prelude_path).read(), blocks, int_value, tool)
    if buffer_bytes > 4 << 30:
        sys.exit(f"{path}: {buffer_bytes >> 20} MiB of buffers; dump the model at smaller shapes")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "kernel.cpp"), os.path.join(tmp, "kernel")
        open(src, "w").write(program)
        # -O0: at -O1, GCC 12's ThreadSanitizer build missed a race the check
        # must find (racecheck_emulated.test's backward without its barriers).
        built = subprocess.run([cxx, "-std=c++17", "-O0", "-g", *TOOLS[tool][1], "-pthread", "-w",
                                src, "-o", exe], capture_output=True, text=True)
        if built.returncode != 0:
            return f"{entry}: FAIL (does not compile)\n{built.stderr[-4000:]}", True
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66",
                   ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")
        try:
            run = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"{entry}: FAIL (over {timeout} s)", True
    report = run.stderr[:6000]  # the report's head: the accesses and where
    if "WARNING: ThreadSanitizer" in run.stderr:
        return f"{entry}: RACE\n{report}", True
    if any(m in run.stderr for m in ("ERROR: AddressSanitizer", "runtime error:", "kiln memcheck:")):
        return f"{entry}: MEMORY ERROR\n{report}", True
    if run.returncode != 0:
        return f"{entry}: FAIL (exit {run.returncode})\n{run.stderr[-4000:]}", True
    return f"{entry}: clean ({run.stdout.strip()})", False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="+", help="DIR/kernels/k_NAME.cu files kilnc dumped")
    ap.add_argument("--tool", choices=sorted(TOOLS), default="racecheck",
                    help="racecheck (ThreadSanitizer, the default) or memcheck (AddressSanitizer "
                         "and UndefinedBehaviorSanitizer)")
    ap.add_argument("--blocks", default="0,-1",
                    help="blocks to run, comma-separated; negative counts from the end (default 0,-1)")
    ap.add_argument("--int-value", type=int, default=1,
                    help="the value of every element of an integer buffer (default 1)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per kernel (default 600)")
    a = ap.parse_args()
    blocks = [int(b) for b in a.blocks.split(",")]
    cxx = os.environ.get("CXX", "c++")
    failed = 0
    for path in a.kernels:
        verdict, bad = check(path, a.tool, blocks, a.int_value, a.timeout, cxx)
        print(verdict, flush=True)
        failed += bad
    print(f"{a.tool}: {len(a.kernels) - failed} kernels clean, {failed} with a finding or failing")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
