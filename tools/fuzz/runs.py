"""Running kilnc and kiln-run for the fuzzer (kiln_fuzz.py, same_bits.py)."""
import json
import os
import subprocess

TEXT = "/usr/share/common-licenses/GPL-3"  # the token inputs' bytes (Debian's base-files)
# --metrics fields that measure the run, not the training (check_metrics.py's).
WALL_CLOCK = {"step_ms", "tokens_per_s", "mfu", "peak_memory_bytes"}


def run(cmd, env, log):
    """CMD's exit status; its stdout and stderr in the file LOG."""
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=600)
    return p.returncode


def compile_model(tools, env, d, target, art, flags):
    """kilnc D/model.kiln for TARGET into ART with FLAGS; its exit status
    (the log: ART with .kilnc.log for .kart)."""
    return run([tools["kilnc"], os.path.join(d, "model.kiln"), f"--target={target}", "-o", art]
               + list(flags), env, art[:-len(".kart")] + ".kilnc.log")


def train(prog, launch, tools, art, env, d, tag, steps, extra=()):
    """kiln-run ART for STEPS steps (the seed's own --seed): TAG.grads holds
    the first step's gradients, TAG.jsonl every step's metrics."""
    return run(launch + [tools["kiln-run"], art, "--steps", str(steps),
                         "--seed", str(prog.seed % 1000 + 1),
                         "--save-grads", os.path.join(d, f"{tag}.grads"),
                         "--metrics", os.path.join(d, f"{tag}.jsonl"), "--quiet"]
               + (["--data", TEXT] if prog.tokens else []) + list(extra),
               env, os.path.join(d, f"{tag}.run.log"))


def training_metrics(path):
    """Every step's --metrics record, less the wall-clock fields."""
    return [{k: v for k, v in json.loads(line).items() if k not in WALL_CLOCK}
            for line in open(path) if line.strip()]
