#!/usr/bin/python3
"""Differential fuzzing of kilnc and kiln-run against PyTorch in float64.

  kiln_fuzz.py [--seeds 0:200] [--targets cpu,cuda] [--work DIR] [--keep]
               [--same-bits remat,resume,zero,overlap,graph] [--sanitize racecheck,memcheck]
               [--kilnc build/bin/kilnc] [--kiln-run build/bin/kiln-run] [--show SEED]

Each seed draws a random model in Kiln's language -- unary math, broadcasting
arithmetic, matmuls, reshapes and transposes, reductions, softmax, causal
masks, layer_norm and rms_norm, slices, concat, split, expand, where, rope,
gathers, attention with random scores, masks and grouped kv heads, blocks
repeated with their own parameters, cross_entropy over token inputs -- and,
beside it, the same computation written in PyTorch by the generator itself
(never by reading the Kiln text back). kilnc compiles the model (fp32) for
each target; kiln-run trains one step (`--save-init`, `--save-grads`,
`--metrics`, `--save-batches`); PyTorch recomputes the loss and every
gradient from the saved initial parameters and batch, in float64 (the
reference) and in float32 (to measure how well the model's own conditioning
lets float32 get the answer). The CUDA target runs under the device simulator
($KILN_CUDA_LIB_DIR, else build/sim/lib), so its generated kernels execute
on this machine.

A seed passes when Kiln's loss and each gradient are within
  max(16 x PyTorch float32's error, 1e-4) x scale
of the float64 reference, per tensor, the scale being its largest entry or a
hundredth of the largest gradient's, whichever is larger (see check()). Float32
kernels and PyTorch's float32 differ only in summation order and formulas
(tanh-form GELU, exp-based sigmoid), which the factor 16 covers; a
wrong index, a dropped term or a wrong broadcast is off by order 1.

generator.py draws the models (Program), oracle_ops.py holds the PyTorch
helpers their programs call; this file runs kilnc and kiln-run and checks.

--same-bits adds checks whose only oracle is the model itself, what Kiln
promises to compute to the same bits however it is scheduled (same_bits.py:
remat modes, checkpoint and resume, ZeRO stages, the all-reduce's overlap,
CUDA graphs); attention may then drop probabilities too (Philox masks,
which recompute and a resumed run must draw again the same), and a model
that does is checked these ways only.

A failing seed leaves its directory (model.kiln, oracle.py, the logs) under
--work and is printed with what disagreed; `--show SEED` prints the model and
the PyTorch program without running anything. Exit status: 0 when every seed
passed, 1 otherwise.
"""
import argparse
import copy
import json
import math
import os
import re
import shutil
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "Inputs"))
from tiny_gpt_oracle import read_safetensors  # noqa: E402  (the tree's one reader)
sys.path.insert(0, HERE)
from generator import PRELUDE, Program  # noqa: E402
import same_bits  # noqa: E402
from runs import compile_model, run, sanitize, snapshot_tools, train  # noqa: E402


def micro_batches(prog, grads, saved):
    """The (tokens, targets) batches step 1 trained on and which one the
    metrics report. Over data ranks --save-grads holds every rank's rows
    (the ranks' losses and gradients are averaged; kiln-run reports rank 0's
    metrics); with micro-batches, --save-batches holds each (their losses
    and gradients are averaged; the metrics report the last)."""
    if not prog.tokens:
        return [(None, None)], 0
    if prog.grad_accum > 1:
        return [(saved[f"step.1.{k}.tokens"], saved[f"step.1.{k}.targets"])
                for k in range(prog.grad_accum)], prog.grad_accum - 1
    rows = prog.tokens[0]
    tokens, targets = grads["input:tokens"], grads["input:targets"]
    return [(tokens[r:r + rows], targets[r:r + rows])
            for r in range(0, tokens.shape[0], rows)], 0


def run_program(prog, params, batch, rounded=False):
    """The namespace after the PyTorch program ran on `params` (name ->
    tensor) and `batch` (tokens, targets or None); `rounded`: bf16 emulated."""
    ns = {}
    exec(PRELUDE, ns)  # noqa: S102
    ns["P"] = {k: ns["rb"](v) for k, v in params.items()} if rounded else params
    tokens, targets = batch
    if tokens is not None:
        ns["TOK"], ns["TGT"] = tokens.long(), targets.long()
    exec(prog.torch_source(rounded), ns)  # noqa: S102
    return ns


def evaluate(prog, init, batches, dtype, rounded=False):
    """(loss, gradients, metrics) of the PyTorch program at the saved
    parameters: the mean loss and gradients over `batches` (micro_batches'
    list), the metrics of the one it names."""
    batches, metrics_of = batches
    parts = []
    for batch in batches:
        params = {name: init[name].to(dtype).requires_grad_() for name, _, _ in prog.params}
        ns = run_program(prog, params, batch, rounded)
        loss = ns["loss"]
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
        parts.append((loss.item(),
                      {name: (g if g is not None else torch.zeros_like(params[name])).double()
                       for name, g in zip(params, grads)},
                      {name: ns[name].item() for name, _ in prog.metrics}))
    if len(parts) == 1:
        return parts[0]
    return (sum(p[0] for p in parts) / len(parts),
            {name: sum(p[1][name] for p in parts) / len(parts) for name in parts[0][1]},
            parts[metrics_of][2])


def threshold_moves(prog, init, batches):
    """(what, copy of `prog`) with one where() threshold (of those outside
    blocks) moved by a bf16 ulp up or down: 2^-8 of the threshold, or for
    one near 0 of an eighth of the compared value's largest element. bf16
    rounding can put an element that near its threshold on the other side,
    and the branch it takes moves a gradient by order 1; the exact
    computation with the threshold moved takes that branch."""
    with torch.no_grad():
        ns = run_program(prog, {name: init[name].double() for name, _, _ in prog.params},
                         batches[0][0])
    for expr, cmp, c in prog.comparisons:
        scale = eval(expr, ns).abs().max().item()  # noqa: S307
        # The exact comparison, not one whose threshold merely starts the
        # same ("t3 < 0.5" in "t3 < 0.55").
        pattern = re.compile(re.escape(f"{expr} {cmp} {c}") + r"(?![\d.e])")
        for sign, direction in ((1, "up"), (-1, "down")):
            c2 = c + sign * 2 ** -8 * max(abs(c), 2 ** -3 * scale)
            moved = copy.copy(prog)
            moved.torch = [pattern.sub(f"{expr} {cmp} {c2!r}", line) for line in prog.torch]
            yield f"where()'s {expr} {cmp} {c} moved {direction} by a bf16 ulp", moved


def rel_err(got, ref, floor):
    """Largest difference over the larger of the reference's largest entry and
    `floor`."""
    scale = max(ref.abs().max().item() if ref.numel() else 0.0, floor)
    diff = (got.double() - ref).abs().max().item() if ref.numel() else 0.0
    return diff / max(scale, 1e-30), scale


def check(prog, init, grads, record, saved_batches=None):
    """(ok, report lines); record: kiln-run's first --metrics line."""
    kiln_loss = record["loss"]
    if not math.isfinite(kiln_loss):
        return False, [f"  loss: kiln {kiln_loss}"]
    batches = micro_batches(prog, grads, saved_batches)
    bf16 = prog.precision == "bf16"
    # The calibration: PyTorch in float32, or (bf16) in float64 with every
    # value and gradient rounded to bfloat16.
    calibration = evaluate(prog, init, batches, torch.float64 if bf16 else torch.float32, bf16)
    # bf16: the emulation rounds at statement boundaries, kiln where its
    # kernels store bf16 (GEMM operands, attention's dq, dk, dv), so their
    # errors differ in detail; 5e-2 is llama_oracle.test's bf16 gradient
    # tolerance, and a wrong op is off by order 1.
    factor, least = (4, 5e-2) if bf16 else (16, 1e-4)
    lines, missing = [], []
    for name in calibration[2]:
        # kiln-run writes metric NAME as metric/NAME (its TensorBoard tag).
        if f"metric/{name}" not in record:
            missing.append(f"  metric {name}: missing from --metrics")
    for name, g in calibration[1].items():
        if name not in grads:
            missing.append(f"  grad {name}: missing from --save-grads")
        elif tuple(grads[name].shape) != tuple(g.shape):
            missing.append(f"  grad {name}: shape {tuple(grads[name].shape)}, "
                           f"expected {tuple(g.shape)}")
    if missing:
        return False, missing

    def scalar_err(x, ref):
        return abs(x - ref) / max(abs(ref), 1e-30)

    def judge(reference, report):
        """Whether Kiln's loss, metrics and gradients are within the bound of
        `reference` (loss, gradients, metrics); `report`: one line each."""
        ref_loss, ref_grads, ref_metrics = reference
        f32_loss, f32_grads, f32_metrics = calibration
        # A gradient a hundred times smaller than the largest is a
        # cancellation of terms of the larger scale (a scale the next op
        # normalizes away, as layer_norm(x * w) does to w; a sum of softmax
        # rows, whose gradient is 0 up to rounding): each side resolves it
        # only to the larger scale's rounding, and PyTorch may happen to get
        # 0 exactly, so that scale, divided by 100, is its floor (also
        # bf16's: 8 bits, llama_oracle.test's floor). A wrong gradient of
        # such a tensor shows when it is off by more than 1e-6 of the largest
        # (1e-4 of the floor).
        floor = 1e-2 * max(
            (g.abs().max().item() for g in ref_grads.values() if g.numel()), default=0.0)
        items = [(f"loss ({kiln_loss:.7g} vs {ref_loss:.7g})", scalar_err(kiln_loss, ref_loss),
                  scalar_err(f32_loss, ref_loss), abs(ref_loss))]
        for name, ref in ref_metrics.items():
            got = record[f"metric/{name}"]
            # The metrics file keeps 9 significant digits: 1e-8 of rounding more.
            items.append((f"metric {name} ({got:.7g} vs {ref:.7g})", scalar_err(got, ref),
                          scalar_err(f32_metrics[name], ref) + 1e-8, abs(ref)))
        for name, ref in ref_grads.items():
            kerr, scale = rel_err(grads[name], ref, floor)
            items.append((f"grad {name} {list(ref.shape)}", kerr,
                          rel_err(f32_grads[name], ref, floor)[0], scale))
        all_good = True
        for what, kiln_err, f32_err, scale in items:
            bound = max(factor * f32_err, least)
            good = kiln_err <= bound or scale < 1e-12
            all_good &= good
            if report:
                lines.append(f"  {what}: kiln rel {kiln_err:.2e}, torch "
                             f"{'bf16' if bf16 else 'fp32'} rel {f32_err:.2e}, bound {bound:.2e} "
                             f"{'ok' if good else 'MISMATCH'}")
        return all_good

    ok = judge(evaluate(prog, init, batches, torch.float64), report=True)
    if bf16 and not ok:
        # The exact computation with a where() threshold moved by bf16's
        # rounding: Kiln agreeing with it on everything took another branch
        # at an element that near its threshold, which says nothing of Kiln.
        for what, moved in threshold_moves(prog, init, batches):
            if judge(evaluate(moved, init, batches, torch.float64), report=False):
                lines.append(f"  (not counted: the exact computation with {what} agrees on "
                             "the loss, every metric and every gradient)")
                ok = True
                break
    return ok, lines


def roundtrip_phases(prog, target, tools, env, d, art):
    """Every phase's dump (--dump-phases-to), compiled from there
    (--compile-from), gives the direct compile's artifact byte for byte: the
    dumps print every op and attribute the later phases read."""
    dumps = os.path.join(d, f"{target}.phases")
    model = os.path.join(d, "model.kiln")
    common = [f"--target={target}"] + prog.flags
    rc = run([tools["kilnc"], model, f"--dump-phases-to={dumps}", "-o",
              os.path.join(d, f"{target}.dumped.kart")] + common,
             env, os.path.join(d, f"{target}.dump.log"))
    if rc != 0:
        return [f"{target}: kilnc --dump-phases-to exited {rc} (see {target}.dump.log)"]
    failures = []
    for name in sorted(os.listdir(dumps)):
        if not name.endswith(".mlir") or "-" not in name:
            continue
        phase = name[name.index("-") + 1:-len(".mlir")]
        if phase == "artifact":
            continue
        out = os.path.join(d, f"{target}.from-{phase}.kart")
        log = os.path.join(d, f"{target}.from-{phase}.log")
        # --remat is compiled into the dump (kilnc refuses it with one).
        rc = run([tools["kilnc"], f"--compile-from={phase}", os.path.join(dumps, name), "-o", out]
                 + [f for f in common if not f.startswith("--remat")], env, log)
        if rc != 0:
            failures.append(f"{target}: kilnc --compile-from={phase} exited {rc} (see {log})")
        elif open(out, "rb").read() != open(art, "rb").read():
            failures.append(f"{target}: the artifact compiled from the {phase} dump differs")
    return failures


def program(seed, targets, precision="fp32", mesh=None, grad_accum=1, bits_checks=()):
    """The seed's Program, not yet generated: the options change what it
    draws. Attention may drop probabilities when a --same-bits check applies
    on every target (dropout has no PyTorch twin)."""
    prog = Program(seed)
    prog.precision = precision
    prog.mesh = mesh or {}
    prog.grad_accum = grad_accum
    prog.allow_dropout = any(all(same_bits.applies(name, prog.mesh, t) for t in targets)
                             for name in bits_checks)
    return prog


def run_seed(seed, targets, tools, work, keep, roundtrip=False, precision="fp32", mesh=None,
             grad_accum=1, bits_checks=(), sanitizers=()):
    prog = program(seed, targets, precision, mesh, grad_accum, bits_checks)
    try:
        prog.generate()
    except Exception as e:  # the generator's own bug: reported, the run goes on
        return [f"generator error: {type(e).__name__}: {e}"], prog.n, []
    d = os.path.join(work, f"seed{seed}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.kiln"), "w") as f:
        f.write(prog.kiln_source())
    with open(os.path.join(d, "oracle.py"), "w") as f:
        f.write(PRELUDE + "\n# P: the parameters (--save-init), float64 with requires_grad\n"
                + prog.torch_source())
    failures, refusals = [], []
    ranks = math.prod(prog.mesh.values()) if prog.mesh else 1
    launch = [] if ranks == 1 else [
        "env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        "OMPI_MCA_rmaps_base_oversubscribe=1", "OMP_NUM_THREADS=1", "mpirun", "-np", str(ranks)]
    for target in targets:
        env = dict(os.environ)
        env["KILN_CACHE_DIR"] = os.path.join(work, f"cache-{target}")
        if target == "cuda":
            env["KILN_CUDA_LIB_DIR"] = tools["sim"]
            env["KILN_SIM_DEVICES"] = str(ranks)  # one simulated GPU per rank
        art = os.path.join(d, f"{target}.kart")
        rc = compile_model(tools, env, d, target, art, prog.flags)
        if rc != 0:
            log = open(os.path.join(d, f"{target}.kilnc.log")).read()
            if prog.mesh and rc == 1 and " error: " in log and "internal error" not in log:
                refusals.append(f"{target}: refused: " + log.split(" error: ", 1)[1].split("\n")[0])
                continue
            failures.append(f"{target}: kilnc exited {rc} (see {target}.kilnc.log)")
            continue
        if roundtrip:
            failures += roundtrip_phases(prog, target, tools, env, d, art)
        for tool in sanitizers if target == "cuda" else ():
            failures += sanitize(tools, env, d, prog.flags, tool)
        files = {k: os.path.join(d, f"{target}.{k}")
                 for k in ("init", "grads", "jsonl", "batches")}
        accumulates_tokens = prog.tokens and prog.grad_accum > 1
        rc = train(prog, launch, tools, art, env, d, target, steps=1,
                   extra=["--save-init", files["init"]]
                   + (["--save-batches", files["batches"]] if accumulates_tokens else []))
        if rc != 0:
            failures.append(f"{target}: kiln-run exited {rc} (see {target}.run.log)")
            continue
        for name in bits_checks:
            failures += same_bits.CHECKS[name](prog, launch, tools, env, d, target, art)
        if prog.dropout:  # no PyTorch twin of Kiln's dropout masks
            continue
        record = json.loads(open(files["jsonl"]).readline())
        ok, lines = check(prog, read_safetensors(files["init"]),
                          read_safetensors(files["grads"]), record,
                          read_safetensors(files["batches"]) if accumulates_tokens else None)
        if not ok:
            failures.append(f"{target}: disagrees with PyTorch\n" + "\n".join(lines))
    if not failures and not keep:
        shutil.rmtree(d)
    return failures, prog.n, refusals


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:50", help="A:B (B excluded) or a list A,B,C")
    ap.add_argument("--targets", default="cpu", help="cpu, cuda (device simulator) or cpu,cuda")
    ap.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    ap.add_argument("--kiln-run", default=os.path.join(ROOT, "build", "bin", "kiln-run"))
    ap.add_argument("--work", default="/tmp/kiln-fuzz")
    ap.add_argument("--keep", action="store_true", help="keep passing seeds' directories too")
    ap.add_argument("--show", type=int, help="print one seed's model and PyTorch program "
                    "(as the other options make it)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="the models' precision (bf16: checked against PyTorch with every "
                    "value and gradient rounded to bfloat16, 4x its error, at least 5e-2)")
    ap.add_argument("--mesh", default="",
                    help="several ranks over MPI, e.g. 'data=2', 'model=2' or 'data=2,model=2': "
                    "parameters split over 'model' at random, batches over 'data'; a clear "
                    "kilnc error on a split it does not support counts as refused, not failed")
    ap.add_argument("--grad-accum", type=int, default=1,
                    help="micro-batches per step (token inputs: --save-batches keeps each, "
                    "the oracle averages their losses and gradients; not with --mesh data)")
    ap.add_argument("--roundtrip", action="store_true",
                    help="also compile from every phase's dump: the same artifact")
    ap.add_argument("--same-bits", default="",
                    help="comma-separated checks against the model itself (same_bits.py): "
                    + ", ".join(same_bits.CHECKS) + "; attention may then drop (those models "
                    "are checked only so)")
    ap.add_argument("--sanitize", default="",
                    help="comma-separated: racecheck, memcheck -- the CUDA target's kernels "
                    "also run under tools/gpu/emulated_sanitizer.py (ThreadSanitizer, or "
                    "AddressSanitizer and UndefinedBehaviorSanitizer)")
    a = ap.parse_args()
    sanitizers = tuple(filter(None, a.sanitize.split(",")))
    for name in sanitizers:
        if name not in ("racecheck", "memcheck"):
            ap.error(f"--sanitize: unknown tool '{name}' (racecheck, memcheck)")
    if sanitizers and "cuda" not in a.targets.split(","):
        ap.error("--sanitize checks the CUDA target's kernels: give --targets cuda")
    if ":" in a.seeds:
        lo, hi = map(int, a.seeds.split(":"))
        seeds = range(lo, hi)
    else:
        seeds = [int(s) for s in a.seeds.split(",")]
    targets = a.targets.split(",")
    mesh = {}
    for axis in filter(None, a.mesh.split(",")):
        name, _, size = axis.partition("=")
        if name not in ("data", "model") or not size.isdigit() or int(size) < 2:
            ap.error(f"--mesh: '{axis}' is not data=N or model=N with N >= 2")
        mesh[name] = int(size)
    bits_checks = tuple(filter(None, a.same_bits.split(",")))
    for name in bits_checks:
        if name not in same_bits.CHECKS:
            ap.error(f"--same-bits: unknown check '{name}' ({', '.join(same_bits.CHECKS)})")
    for t in targets:
        if t not in ("cpu", "cuda"):
            ap.error(f"unknown target '{t}' (cpu or cuda)")
    if a.show is not None:
        prog = program(a.show, targets, a.precision, mesh, a.grad_accum, bits_checks)
        prog.generate()
        print(prog.kiln_source())
        print("# PyTorch\n" + prog.torch_source())
        return 0
    sim = os.environ.get("KILN_CUDA_LIB_DIR") or os.path.join(ROOT, "build", "sim", "lib")
    tools = {"kilnc": a.kilnc, "kiln-run": a.kiln_run, "sim": sim}
    for k, p in tools.items():
        if (k != "sim" or "cuda" in targets) and not os.path.exists(p):
            ap.error(f"{p} does not exist (build first, or --kilnc / --kiln-run, or "
                     "KILN_CUDA_LIB_DIR for the simulator's libraries)")
    os.makedirs(a.work, exist_ok=True)
    tools.update(snapshot_tools(a.work, tools["kilnc"], tools["kiln-run"]))
    if "cuda" in targets:
        tools["sim"] = shutil.copytree(tools["sim"], os.path.join(a.work, "tools", "sim-lib"))
    failed, refused_seeds, start = [], [], time.time()
    for seed in seeds:
        failures, n, refused = run_seed(seed, targets, tools, a.work, a.keep, a.roundtrip,
                                        a.precision, mesh, a.grad_accum, bits_checks,
                                        sanitizers)
        status = "FAIL" if failures else "refused" if refused else "ok"
        print(f"seed {seed}: {n} statements, {status}", flush=True)
        for f in refused:
            print("  " + f, flush=True)
        for f in failures:
            print("  " + f.replace("\n", "\n  "), flush=True)
        if failures:
            failed.append(seed)
        elif refused:
            refused_seeds.append(seed)
    passed = len(seeds) - len(failed) - len(refused_seeds)
    print(f"{passed} passed, {len(failed)} failed"
          + (f", {len(refused_seeds)} refused" if refused_seeds else "") + " "
          f"({time.time() - start:.0f} s; failing seeds in {a.work}: {failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
