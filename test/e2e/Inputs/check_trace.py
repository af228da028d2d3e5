"""Checks a `kiln-run --trace` file (Chrome trace-event JSON) against the run.

    check_trace.py TRACE.json STEPS [PROFILE.txt]

- It parses as JSON with a traceEvents list, names its process and its two
  tracks, and holds STEPS "training step N" slices and as many memory
  counter samples.
- Slices nest on the compute track: every schedule entry lies inside a
  program run, every program run and every input copy inside a training
  step (the copies between the runs) (times are written
  in microseconds with three decimals, so containment is checked to 0.002).
- Every entry names a model line that exists (file:line:col, the file has
  that line and column); only compiler-made constants may have none.
- With PROFILE.txt (the same run's `--profile` output, every step traced):
  the time per model line of program 'step' in the trace, over the runs
  --profile timed, equals --profile's "ms/step" for each line it lists, to
  the 0.001 ms it prints plus rounding. --profile leaves out the runs the
  trace marks with a "timing" (CUDA's first run of a program whose
  attention calls are timed against cuDNN); their number plus the
  profile's "N timed steps" must make STEPS.
Prints one summary line; exits 1 with the reason on the first failure.
"""
import collections
import json
import os
import re
import sys

EPS_US = 0.002


def fail(message):
    print("check_trace: FAIL: " + message)
    sys.exit(1)


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    meta = {(e["name"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M"}
    if not meta.get(("process_name", None), "").startswith("kiln-run "):
        fail("no process name: %r" % meta)
    if meta.get(("thread_name", 1)) != "compute" or meta.get(("thread_name", 2)) != "communication":
        fail("tracks are not compute and communication: %r" % meta)
    slices = [e for e in events if e["ph"] == "X"]
    by_cat = collections.defaultdict(list)
    for e in slices:
        if e["dur"] < 0:
            fail("negative duration: %r" % e)
        by_cat[e["cat"]].append(e)
    step_slices = by_cat["step"]
    if len(step_slices) != steps:
        fail("%d training step slices, expected %d" % (len(step_slices), steps))
    counters = [e for e in events if e["ph"] == "C" and e["name"] == "memory"]
    if len(counters) != steps or any(c["args"]["peak_bytes"] <= 0 for c in counters):
        fail("memory counters: %r" % counters)

    def inside(inner, outer):
        return (inner["ts"] >= outer["ts"] - EPS_US and
                inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + EPS_US)

    programs = by_cat["program"]
    for p in programs:
        if not any(inside(p, s) and s["args"]["step"] == p["args"]["step"] for s in step_slices):
            fail("program run outside its step: %r" % p)
    # Each copy of a step's inputs lies in its step, between program runs.
    copies = by_cat["copy"]
    for c in copies:
        if not any(inside(c, s) and s["args"]["step"] == c["args"]["step"] for s in step_slices):
            fail("copy outside its step: %r" % c)
        if any(inside(c, p) for p in programs) or c["args"]["bytes"] <= 0:
            fail("copy inside a program run, or of no bytes: %r" % c)
    entries = [e for e in slices if e["cat"] in ("kernel", "gemm", "collective")]
    files = {}
    for e in entries:
        if e["tid"] == 1 and not any(inside(e, p) for p in programs):
            fail("entry outside every program run: %r" % e)
        line = e["args"].get("line")
        if line is None:
            if "[kiln.constant]" not in e["name"]:
                fail("entry without a model line: %r" % e)
            continue
        m = re.fullmatch(r"(.+):(\d+):(\d+)", line)
        if not m or not os.path.isfile(m.group(1)):
            fail("entry's line is not file:line:col of a file: %r" % e)
        if m.group(1) not in files:
            with open(m.group(1)) as f:
                files[m.group(1)] = f.read().split("\n")
        text = files[m.group(1)]
        row, col = int(m.group(2)), int(m.group(3))
        if row > len(text) or col > len(text[row - 1]) + 1:
            fail("%s does not exist: %r" % (line, e))

    compared = 0
    if len(sys.argv) > 3:
        step_runs = [p for p in programs if p["name"].startswith("step")]
        untimed = [p for p in step_runs if "timing" in p["args"]]
        per_line = collections.defaultdict(float)
        for e in entries:
            if e["args"]["program"] == "step" and "line" in e["args"] and \
                    not any(inside(e, p) for p in untimed):
                per_line[e["args"]["line"]] += e["dur"]
        with open(sys.argv[3]) as f:
            profile = f.read()
        # The 'step' program's section, its per-line table.
        section = profile.split("profile of program 'step'")[1].split("profile of program")[0]
        timed = int(re.match(r": (\d+) timed steps", section).group(1))
        if timed + len(untimed) != steps:
            fail("--profile timed %d steps and the trace marks %d runs untimed, of %d steps"
                 % (timed, len(untimed), steps))
        table = section.split("model line\n")[1]
        for row in table.splitlines():
            # time%, ms/step, GFLOP/s, GB/s, roofline ("-" or "20% mem"), entries, line
            m = re.fullmatch(r"\s*[\d.]+% +([\d.]+) +(?:-|[\d.]+) +(?:-|[\d.]+) +"
                             r"(?:-|\d+% \w+) +\d+ +(\S+)", row)
            if not m:
                break
            ms, line = float(m.group(1)), m.group(2)
            traced = per_line[line] / 1000.0 / timed
            if abs(traced - ms) > 0.0015:
                fail("%s: %.4f ms/step in the trace, %.3f in --profile" % (line, traced, ms))
            compared += 1
        if compared == 0:
            fail("no model line in the profile to compare")
    print("check_trace: OK, %d steps, %d program runs, %d entries, %d lines as --profile, "
          "%d input copies" % (steps, len(programs), len(entries), compared, len(copies)))


if __name__ == "__main__":
    main()
