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
    access (16-byte loads and stores, ldmatrix rows, cp.async, 32-byte WMMA
    loads and stores) at an address the GPU would fault on, and undefined
    integer arithmetic (a 32-bit index that overflows, an out-of-range shift).

A kernel kilnc marked `// in place` (Kernel.in_place) gets each output on the
bytes of the first input with as many elements and bytes, as the memory plan
may place them, so a thread that overwrites an element another still reads is
reported too.

Races between blocks and the GPU's weaker memory order are not modelled.
Each kernel is compiled with its prelude (DIR/kernels/prelude.cuh), its
buffers are sized from its `in:` / `out:` comments and pointer declarations
(floats and bf16 normal random values, every integer --int-value, default 1,
kilnc's scratch zero), and the listed blocks run one after another (negative
numbers count from the grid's end): blocks of each role a kernel gives its
grid (the attention backward's dK/dV and dQ blocks, a norm backward's rows and
column sums) are worth listing. The kernels of one directory build as one
program, which runs again from the next kernel after a finding stops it; each
kernel has --timeout seconds. Prints one line per kernel and exits 1 if any
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
    without its prelude include, {output: the input it is placed over}).

    Buffers come from the kernel's `in:` / `out:` comments, in order, and its
    declarations of its pointers
    (`const float* in0 = (const float*)buffers[0]; // tensor<2x64xf32>`, or a
    `// scratch: NAME [elements]` for the scratch kilnc plans beside them,
    zeroed as the arena is: counters start at 0)."""
    text = open(path).read()
    launch = re.search(r"^// launch: grid (\d+), block (\d+), shared bytes (\d+)$", text, re.M)
    entry = re.search(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(void\* const\* __restrict__ buffers\)', text)
    if not launch or not entry:
        raise ValueError("not a kernel kilnc --target=cuda --dump-phases-to wrote "
                         "(no '// launch:' line or entry point)")
    found, inputs = {}, set()
    # The `in:` / `out:` comments list the buffers in order (a multi-tensor
    # kernel picks its pointers from a segment table, declaring none).
    for index, (kind, shape, element) in enumerate(
            re.findall(r"^//   (in|out): +tensor<((?:\d+x)*)(\w+)>$", text, re.M)):
        if element not in ELEMENTS:
            raise ValueError(f"buffers[{index}] holds {element}, which this check does not fill")
        size, fill = ELEMENTS[element]
        found[index] = (size, elements(shape), fill)
        if kind == "in":
            inputs.add(index)
    # A copy between buffers (a DMA-like step): source and destination alike.
    copy = re.search(r"^// copy of \[([\d, ]*)\] ([a-z_0-9 ]+)$", text, re.M)
    if copy and copy.group(2) in C_TYPES:
        count = elements(copy.group(1).replace(", ", "x"))
        size, fill = C_TYPES[copy.group(2)]
        found = {0: (size, count, fill), 1: (size, count, fill)}
    for ctype, index, shape, scratch in DECLARATION.findall(text):
        if ctype not in C_TYPES:
            raise ValueError(f"buffers[{index}] is a {ctype}*, which this check does not fill")
        size, fill = C_TYPES[ctype]
        found[int(index)] = (size, int(scratch), "z") if scratch else (size, elements(shape), fill)
    used = {int(i) for i in re.findall(r"buffers\[(\d+)\]", text)}
    if sorted(found) != list(range(len(found))) or not used <= set(found) or not found:
        raise ValueError(f"cannot size every buffer the kernel reads "
                         f"(declared {sorted(found)}, read {sorted(used)})")
    # In place: each output over the first input (not yet taken) of its
    # element count and element bytes, as codegen/program/MemoryPlan.cpp's
    # step 3 picks when that input dies at the call.
    over = {}
    if re.search(r"^// in place: ", text, re.M):
        for out in sorted(set(found) - inputs):
            for i in sorted(inputs - set(over.values())):
                if found[i][:2] == found[out][:2]:
                    over[out] = i
                    break
    source = text.replace('#include "prelude.cuh"\n', "")
    return (entry.group(1), int(launch.group(1)), int(launch.group(2)), int(launch.group(3)),
            [found[i] for i in range(len(found))], source, over)


# What each tool defines before the emulation, and compiles with.
TOOLS = {
    "racecheck": ("KILN_RACECHECK", ["-fsanitize=thread"]),
    "memcheck": ("KILN_MEMCHECK", ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]),
}


def runner(index, path, blocks, int_value):
    """The kernel's source and a C++ function kiln_run_<index>() running it, with its entry."""
    entry, grid, block, shared, buffers, source, over = parse_kernel(path)
    if sum(size * n for size, n, _ in buffers) > 4 << 30:
        raise ValueError("over 4 GiB of buffers; dump the model at smaller shapes")
    chosen = sorted({b % grid for b in blocks})
    sizes = ", ".join(f"{{{size}ull, {n}ull, '{fill}'}}" for size, n, fill in buffers)
    in_place = "".join(f"  free(pointers[{o}]);\n  pointers[{o}] = pointers[{i}]; // in place\n"
                       for o, i in over.items())
    owned = ", ".join(str(i) for i in range(len(buffers)) if i not in over)
    return entry, source + f"""
static void kiln_run_{index}() {{
  const KilnBufferSpec spec[] = {{{sizes}}};
  std::vector<void *> pointers = kiln_buffers(spec, sizeof spec / sizeof spec[0], {int_value}, {index});
{in_place}#ifdef KILN_MEMCHECK
  kiln_emulated_dynamic_shared = {shared} ? static_cast<unsigned char *>(aligned_alloc(256, {shared})) : nullptr;
#endif
  for (unsigned int b : {{{", ".join(f"{b}u" for b in chosen)}}})
    kiln_emulate_block({entry}, pointers.data(), {grid}u, {block}u, b);
#ifdef KILN_MEMCHECK
  free(kiln_emulated_dynamic_shared);
#endif
  for (int i : {{{owned}}})
    free(pointers[i]);
  std::printf("ran blocks {", ".join(map(str, chosen))} of {grid}\\n");
}}
"""


# main() of a program running kernels kiln_run_0 .. kiln_run_{n-1}, from the
# one its argument names: each announced on stderr first, so that a report
# (the sanitizer stops the program at its first) names its kernel.
MAIN = """
#include <csignal>
#include <unistd.h>
static void kiln_timed_out(int) {
  const char message[] = "kiln-sanitizer: over the time a kernel may take\\n";
  (void)!write(2, message, sizeof message - 1);
  _exit(67);
}
int main(int argc, char **argv) {
  void (*const runs[])() = {%s};
  std::signal(SIGALRM, kiln_timed_out);
  for (int i = argc > 1 ? atoi(argv[1]) : 0; i < (int)(sizeof runs / sizeof runs[0]); ++i) {
    std::fprintf(stderr, "kiln-sanitizer: kernel %%d\\n", i);
    std::printf("kiln-sanitizer: kernel %%d: ", i);
    std::fflush(stdout);
    alarm(%d); // each kernel its own limit
    runs[i]();
    alarm(0);
    std::fflush(stdout);
  }
  return 0;
}
"""

# Buffers of exactly their bytes (256-byte aligned, as the arena places
# them), filled: 'f' float and 'b' bf16 normal random values, 'i' integers
# the given value (bools: whether it is non-zero), 'z' zeros (kilnc's scratch).
BUFFERS = """
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
struct KilnBufferSpec { unsigned long long bytes, count; char fill; };
static std::vector<void *> kiln_buffers(const KilnBufferSpec *spec, int n, long long intValue,
                                        unsigned seed) {
  std::vector<void *> pointers(n);
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    unsigned char *p = nullptr;
    const unsigned long long bytes = spec[i].bytes * spec[i].count;
    if (posix_memalign(reinterpret_cast<void **>(&p), 256, bytes ? bytes : 1) != 0)
      std::abort();
    memset(p, 0, bytes);
    pointers[i] = p;
    for (unsigned long long e = 0; e < spec[i].count; ++e) {
      if (spec[i].fill == 'f') {
        float v = normal(random);
        memcpy(p + 4 * e, &v, 4);
      } else if (spec[i].fill == 'i') {
        // little-endian: the low bytes; a one-byte buffer holds bools (0 or 1)
        const long long v = spec[i].bytes == 1 ? intValue != 0 : intValue;
        memcpy(p + spec[i].bytes * e, &v, spec[i].bytes);
      } else if (spec[i].fill == 'b') {
        float v = normal(random);
        unsigned int bits;
        memcpy(&bits, &v, 4);
        unsigned short h = static_cast<unsigned short>(bits >> 16);
        memcpy(p + 2 * e, &h, 2);
      }
    }
  }
  return pointers;
}
"""


def programs(paths):
    """The kernels in groups that can share one program: one directory (one
    prelude), no file name (so no entry point) twice."""
    groups = []
    for path in paths:
        directory = os.path.dirname(os.path.abspath(path))
        entry = os.path.basename(path)
        for g in groups:
            if g["dir"] == directory and entry not in g["names"]:
                g["paths"].append(path)
                g["names"].add(entry)
                break
        else:
            groups.append({"dir": directory, "paths": [path], "names": {entry}})
    return groups


def check_group(group, tool, blocks, int_value, timeout, cxx):
    """[(verdict line and what follows it, whether the kernel has a finding or failed)],
    in the group's order: one program for the group, run from its first kernel and,
    after a finding stops it, from the kernel after."""
    prelude_path = os.path.join(group["dir"], "prelude.cuh")
    if not os.path.exists(prelude_path):
        return [(f"{p}: FAIL (no prelude.cuh beside it: a --dump-phases-to kernels directory)",
                 True) for p in group["paths"]]
    results, parts, runnable = {}, [], []
    for path in group["paths"]:
        try:
            entry, part = runner(len(runnable), path, blocks, int_value)
            parts.append(part)
            runnable.append((path, entry))
        except ValueError as e:
            results[path] = (f"{os.path.basename(path)}: FAIL ({e})", True)
    if runnable:
        prelude = [l for l in open(prelude_path).read().splitlines() if not l.startswith("typedef ")]
        # The host has <stdint.h>: the prelude's NVRTC-only typedefs go, as
        # in test/unit/codegen/KernelRunner.cpp.
        program = "\n".join([f"#define {TOOLS[tool][0]} 1", f'#include "{EMULATION}"', *prelude,
                              BUFFERS, *parts,
                              MAIN % (", ".join(f"kiln_run_{i}" for i in range(len(runnable))),
                                      timeout)])
        built = run_program(program, runnable, tool, timeout, cxx)
        if built is None and len(runnable) > 1:
            # One kernel that does not build fails the program: each alone.
            for path, _ in runnable:
                [results[path]] = check_group({"dir": group["dir"], "paths": [path]}, tool,
                                              blocks, int_value, timeout, cxx)
        elif built is None:
            path, entry = runnable[0]
            results[path] = (f"{entry}: FAIL (does not compile)\n{last_build_error[0]}", True)
        else:
            results.update(built)
    return [results[p] for p in group["paths"]]


last_build_error = [""]  # the compiler's message when run_program returns None


def run_program(program, runnable, tool, timeout, cxx):
    """{path: verdict} of the kernels `program` runs, or None if it does not build."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "kernels.cpp"), os.path.join(tmp, "kernels")
        open(src, "w").write(program)
        # -O0: at -O1, GCC 12's ThreadSanitizer build missed a race the check
        # must find (racecheck_emulated.test's backward without its barriers).
        built = subprocess.run([cxx, "-std=c++17", "-O0", "-g", *TOOLS[tool][1], "-pthread", "-w",
                                src, "-o", exe], capture_output=True, text=True)
        if built.returncode != 0:
            last_build_error[0] = built.stderr[-4000:]
            return None
        # Ours first: a user's own options (a suppressions file, say) follow.
        env = dict(os.environ)
        for name, ours in (("TSAN_OPTIONS", "halt_on_error=1 exitcode=66"),
                           ("ASAN_OPTIONS", "detect_leaks=0"),
                           ("UBSAN_OPTIONS", "print_stacktrace=1")):
            env[name] = (ours + " " + env.get(name, "")).strip()
        first = 0
        while first < len(runnable):
            try:
                # Each kernel has its own alarm (MAIN); this only backs it up.
                run = subprocess.run([exe, str(first)], capture_output=True, text=True, env=env,
                                     timeout=(timeout + 30) * (len(runnable) - first))
                stdout, stderr, code = run.stdout, run.stderr, run.returncode
            except subprocess.TimeoutExpired as e:
                stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
                code = None
            for line in stdout.splitlines():
                m = re.match(r"kiln-sanitizer: kernel (\d+): (ran .*)$", line)
                if m:
                    path, entry = runnable[int(m.group(1))]
                    results[path] = (f"{entry}: clean ({m.group(2)})", False)
            announced = [int(i) for i in re.findall(r"^kiln-sanitizer: kernel (\d+)$", stderr, re.M)]
            if code == 0 and len(results) == len(runnable):
                break
            # The kernel running when the program stopped, and its report.
            last = announced[-1] if announced else first
            path, entry = runnable[last]
            marker = stderr.rfind(f"kiln-sanitizer: kernel {last}\n")
            # The report's head (the accesses); all of stderr if it came before any kernel.
            report = (stderr[stderr.find("\n", marker) + 1:] if marker >= 0 else stderr)[:6000]
            if code is None or code == 67 and "kiln-sanitizer: over the time" in report:
                results[path] = (f"{entry}: FAIL (over {timeout} s)", True)
            elif "WARNING: ThreadSanitizer" in report:
                results[path] = (f"{entry}: RACE\n{report}", True)
            elif any(m in report for m in ("ERROR: AddressSanitizer", "runtime error:", "kiln memcheck:")):
                results[path] = (f"{entry}: MEMORY ERROR\n{report}", True)
            else:
                results[path] = (f"{entry}: FAIL (exit {code})\n{report[-4000:]}", True)
            first = last + 1
    return results


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
    for group in programs(a.kernels):
        for verdict, bad in check_group(group, a.tool, blocks, a.int_value, a.timeout, cxx):
            print(verdict, flush=True)
            failed += bad
    print(f"{a.tool}: {len(a.kernels) - failed} kernels clean, {failed} with a finding or failing")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
