"""Checks whose only oracle is the model itself (kiln_fuzz.py --same-bits):
what Kiln promises to compute to the same bits on the CPU (and under the
device simulator) however it is scheduled.

  remat    compiled with each --remat mode, 3 steps train to the same losses,
           metrics and first-step gradients (a recomputed op is the same pure
           op on the same operands, dropout's Philox counters included)
  resume   2 steps, a checkpoint and --resume to step 4 end in the parameters
           and optimizer state of 4 steps straight, with the same metrics
  zero     over a data axis: ZeRO-1 trains to plain data parallelism's bits,
           ZeRO-3 to ZeRO-2's
  overlap  over a data axis: the gradient all-reduce beside the backward
           (the default) or where the schedule puts it (--no-comm-overlap)
  graph    CUDA: the step replayed as a CUDA graph or launched kernel by
           kernel (KILN_CUDA_EAGER=1)

Each check is check(prog, launch, tools, env, d, target, art) -> failures.
"""
import os
import re

import torch

from runs import compile_model, train, training_metrics
from tiny_gpt_oracle import read_safetensors  # on kiln_fuzz.py's path


def _variants(prog, launch, tools, env, d, target, art, variants):
    """Trains each (label, kilnc flags or None for ART, kiln-run args, env
    additions) 3 steps: every one must give the first's metrics (less wall
    clock) and first-step gradients, bit for bit."""
    seen, failures = {}, []
    for label, flags, args, env_extra in variants:
        tag = f"{target}.{re.sub(r'[^A-Za-z0-9]+', '-', label).strip('-')}"
        variant_art = art
        if flags is not None:
            variant_art = os.path.join(d, f"{tag}.kart")
            rc = compile_model(tools, env, d, target, variant_art, flags)
            if rc != 0:
                failures.append(f"{target}: kilnc for {label} exited {rc} (see {tag}.kilnc.log)")
                continue
        rc = train(prog, launch, tools, variant_art, {**env, **env_extra}, d, tag, 3, args)
        if rc != 0:
            failures.append(f"{target}: kiln-run for {label} exited {rc} (see {tag}.run.log)")
            continue
        seen[label] = (training_metrics(os.path.join(d, f"{tag}.jsonl")),
                       open(os.path.join(d, f"{tag}.grads"), "rb").read())
    first, (m0, g0) = next(iter(seen.items()), (None, (None, None)))
    for label, (metrics, grads) in seen.items():
        if metrics != m0:
            step = next((i + 1 for i, (a, b) in enumerate(zip(metrics, m0)) if a != b),
                        min(len(metrics), len(m0)) + 1)
            failures.append(f"{target}: {label} differs from {first} in step {step}'s metrics")
        elif grads != g0:
            failures.append(f"{target}: {label} differs from {first} "
                            "in the first step's gradients")
    return failures


REMAT_MODES = ("none", "pointwise", "selective", "full")


def remat(prog, launch, tools, env, d, target, art):
    # Overrides in the model (`remat = ...` on a repeat) win over the flag,
    # as they do for users.
    flags = [f for f in prog.flags if not f.startswith("--remat")]
    return _variants(prog, launch, tools, env, d, target, art,
                     [(f"--remat={m}", flags + [f"--remat={m}"], [], {}) for m in REMAT_MODES])


def overlap(prog, launch, tools, env, d, target, art):
    if "data" not in prog.mesh:
        return []
    return _variants(prog, launch, tools, env, d, target, art,
                     [("the overlapped all-reduce", None, [], {}),
                      ("--no-comm-overlap", None, ["--no-comm-overlap"], {})])


def graph(prog, launch, tools, env, d, target, art):
    if target != "cuda":
        return []
    return _variants(prog, launch, tools, env, d, target, art,
                     [("the CUDA graph", None, [], {}),
                      ("KILN_CUDA_EAGER=1", None, [], {"KILN_CUDA_EAGER": "1"})])


def resume(prog, launch, tools, env, d, target, art):
    tag = f"{target}.resume"
    cks = {name: os.path.join(d, f"{tag}.{name}.ck") for name in ("straight", "split")}
    # --decay-steps: the same schedule in every run (it defaults to --steps).
    for name, steps, extra in [("straight", 4, []), ("first", 2, []), ("resumed", 4, ["--resume"])]:
        ck = cks["straight" if name == "straight" else "split"]
        rc = train(prog, launch, tools, art, env, d, f"{tag}.{name}", steps,
                   ["--checkpoint-dir", ck, "--decay-steps", "4"] + extra)
        if rc != 0:
            return [f"{target}: kiln-run ({name} run of the resume check) exited {rc} "
                    f"(see {tag}.{name}.run.log)"]
    failures = []
    straight = training_metrics(os.path.join(d, f"{tag}.straight.jsonl"))
    if straight[2:] != training_metrics(os.path.join(d, f"{tag}.resumed.jsonl")):
        failures.append(f"{target}: the resumed run's metrics for steps 3-4 differ from "
                        "4 steps straight")
    for name in ("model.safetensors", "optimizer.safetensors"):
        files = [os.path.join(cks[k], "step-00000004", name) for k in ("straight", "split")]
        if not all(os.path.exists(f) for f in files):
            failures.append(f"{target}: no step-4 {name} in {' or '.join(files)}")
        elif open(files[0], "rb").read() != open(files[1], "rb").read():
            failures.append(f"{target}: step 4's {name} differs between 4 steps straight "
                            "and 2 + 2 resumed")
    return failures


def zero(prog, launch, tools, env, d, target, art):
    # Not ZeRO-2 against plain data parallelism: its norm sums by slice
    # (test/e2e/zero.test), another order.
    if "data" not in prog.mesh:
        return []
    failures, runs = [], {}
    for stage in range(4):
        tag = f"{target}.zero{stage}"
        stage_art = os.path.join(d, f"{tag}.kart")
        ck = os.path.join(d, f"{tag}.ck")
        rc = compile_model(tools, env, d, target, stage_art,
                           ["-D", f"zero={stage}"] + prog.flags)
        if rc != 0:
            failures.append(f"{target}: kilnc -D zero={stage} exited {rc} (see {tag}.kilnc.log)")
            continue
        rc = train(prog, launch, tools, stage_art, env, d, tag, 3, ["--checkpoint-dir", ck])
        if rc != 0:
            failures.append(f"{target}: kiln-run of -D zero={stage} exited {rc} "
                            f"(see {tag}.run.log)")
            continue
        last = os.path.join(ck, "step-00000003")
        runs[stage] = {
            "the losses and gradient norms": [
                {k: r[k] for k in ("loss", "grad_norm")}
                for r in training_metrics(os.path.join(d, f"{tag}.jsonl"))],
            "the first step's gradients": read_safetensors(os.path.join(d, f"{tag}.grads")),
            "the parameters": read_safetensors(os.path.join(last, "model.safetensors")),
            "the optimizer state": read_safetensors(os.path.join(last, "optimizer.safetensors"))}
    for a, b in ((0, 1), (2, 3)):
        if a not in runs or b not in runs:
            continue
        for what, x in runs[a].items():
            y = runs[b][what]
            same = x == y if isinstance(x, list) else (
                x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x))
            if not same:
                failures.append(f"{target}: ZeRO-{b} differs from ZeRO-{a} in {what}")
    return failures


CHECKS = {"remat": remat, "resume": resume, "zero": zero, "overlap": overlap, "graph": graph}


def applies(name, mesh, target):
    """Whether check NAME compares anything for a model over MESH on TARGET."""
    return {"zero": "data" in mesh, "overlap": "data" in mesh,
            "graph": target == "cuda"}.get(name, True)
