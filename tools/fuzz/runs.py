"""Running kilnc and kiln-run for the fuzzer (kiln_fuzz.py, same_bits.py)."""
import json
import os
import shutil
import subprocess

TEXT = "/usr/share/common-licenses/GPL-3"  # the token inputs' bytes (Debian's base-files)
# --metrics fields that measure the run, not the training (check_metrics.py's).
WALL_CLOCK = {"step_ms", "device_ms", "tokens_per_s", "mfu", "peak_memory_bytes"}


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


def snapshot_tools(work, kilnc, kiln_run):
    """Copies of kilnc and kiln-run, with kiln-run's plugins (MPI, Gloo: the
    libkiln_*.so in lib/ beside its folder), in WORK/tools: a rebuild while a
    long run goes on changes nothing under it (nor is refused a busy
    executable). {"kilnc": path, "kiln-run": path}."""
    snapshot = os.path.join(work, "tools")
    shutil.rmtree(snapshot, ignore_errors=True)
    os.makedirs(os.path.join(snapshot, "lib"))
    tools = {k: shutil.copy2(p, os.path.join(snapshot, k))
             for k, p in (("kilnc", kilnc), ("kiln-run", kiln_run))}
    plugins = os.path.join(os.path.dirname(kiln_run), "..", "lib")
    for name in os.listdir(plugins) if os.path.isdir(plugins) else []:
        if name.startswith("libkiln_") and name.endswith(".so"):
            shutil.copy2(os.path.join(plugins, name), os.path.join(snapshot, "lib", name))
    return tools
