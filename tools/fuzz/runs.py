"""Running kilnc and kiln-run for the fuzzer (kiln_fuzz.py, same_bits.py)."""
import json
import os
import shutil
import subprocess
import sys

TEXT = "/usr/share/common-licenses/GPL-3"  # the token inputs' bytes (Debian's base-files)
# --metrics fields that measure the run, not the training (check_metrics.py's).
WALL_CLOCK = {"step_ms", "device_ms", "tokens_per_s", "mfu", "peak_memory_bytes"}


def run(cmd, env, log, timeout=600):
    """CMD's exit status (124 past TIMEOUT seconds, as timeout(1)); its stdout
    and stderr in the file LOG."""
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n(killed after {timeout} s)\n")
            return 124


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


def sanitize(tools, env, d, flags, tool):
    """The CUDA kernels of D/model.kiln (FLAGS) under the emulated sanitizer
    TOOL (tools/gpu/emulated_sanitizer.py: racecheck or memcheck), each on its
    first two and last two blocks: [] or one failure naming the kernels with a
    finding (the tool's report in D/cuda.TOOL.log)."""
    dump = os.path.join(d, "cuda-dump")
    if not os.path.isdir(os.path.join(dump, "kernels")):
        log = os.path.join(d, "cuda-dump.kilnc.log")
        if run([tools["kilnc"], os.path.join(d, "model.kiln"), "--target=cuda",
                "--dump-phases-to", dump, "-o", os.devnull] + list(flags), env, log) != 0:
            return [f"cuda: {tool}: kilnc --dump-phases-to exited non-zero (see {log})"]
    kernels = sorted(os.path.join(dump, "kernels", k)
                     for k in os.listdir(os.path.join(dump, "kernels")) if k.endswith(".cu"))
    log = os.path.join(d, f"cuda.{tool}.log")
    sanitizer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu",
                             "emulated_sanitizer.py")
    if run([sys.executable, sanitizer, "--tool", tool, "--blocks", "0,1,-2,-1", "--timeout", "300"]
           + kernels, env, log, timeout=3600) == 0:
        return []
    found = [line.strip() for line in open(log) if line.startswith("k_") and ": clean" not in line]
    return [f"cuda: {tool}: " + ("; ".join(found) or "failed") + f" (see {log})"]


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
