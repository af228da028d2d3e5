"""Checks kiln-run's TensorBoard event file against its JSONL metrics, reading the
events with TensorBoard's own reader (EventAccumulator), as `tensorboard --logdir`
would. Run with the reader venv (%reader-python).

  tensorboard_matches_jsonl.py EVENTS_DIR METRICS.jsonl

Passes when EVENTS_DIR holds one events.out.tfevents.* file that starts with the
file_version record "brain.Event:2", its scalar tags are exactly the tags of the
JSON keys the records hold (the table in runtime/Metrics.h), and every tag has an
event at exactly the steps whose record has the key, with the record's value
rounded to float32 (TensorBoard's simple_value). Values kiln-run holds as float32
(loss, norms, the model's metrics, lr, counts) must match exactly; those it computes in
double (update_ratio, step_ms, device_ms, tokens_per_s, mfu, val_loss) may differ by one
float32 ulp, since the JSON's 9 significant digits can round across a float32
midpoint. Prints the tags, one a line, then "tensorboard: PASS".
"""
import glob
import json
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

# JSON key -> TensorBoard tag; metric/<name> keys are their own tags.
TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "update_norm": "train/update_norm",
    "param_norm": "train/param_norm",
    "update_ratio": "train/update_ratio",
    "step_ms": "perf/step_ms",
    "device_ms": "perf/device_ms",
    "tokens": "perf/tokens_per_step",
    "tokens_per_s": "perf/tokens_per_s",
    "mfu": "perf/mfu",
    "peak_memory_bytes": "mem/peak_bytes",
    "skipped": "train/skipped",
    "val_loss": "val/loss",
}
COMPUTED_IN_DOUBLE = {"update_ratio", "step_ms", "device_ms", "tokens_per_s", "mfu", "val_loss"}


def tag_of(key):
    return key if key.startswith("metric/") else TAGS[key]


def main():
    events_dir, jsonl = sys.argv[1], sys.argv[2]
    files = glob.glob(os.path.join(events_dir, "events.out.tfevents.*"))
    if len(files) != 1:
        sys.exit(f"{events_dir}: expected one event file, found {files}")
    first = next(iter(EventFileLoader(files[0]).Load()))
    if first.file_version != "brain.Event:2":
        sys.exit(f"{files[0]}: first event is not file_version brain.Event:2: {first}")

    # Every JSON value of every step, by tag.
    expected = {}
    for line in open(jsonl):
        if not line.strip():
            continue
        record = json.loads(line)
        step = record.pop("step")
        for key, value in record.items():
            expected.setdefault(tag_of(key), {})[step] = (key, float(value))

    accumulator = EventAccumulator(events_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = sorted(accumulator.Tags()["scalars"])
    if tags != sorted(expected):
        sys.exit(f"tags differ:\n  events: {tags}\n  jsonl:  {sorted(expected)}")
    for tag in tags:
        events = {e.step: e.value for e in accumulator.Scalars(tag)}
        if sorted(events) != sorted(expected[tag]):
            sys.exit(f"{tag}: events at steps {sorted(events)}, "
                     f"JSONL at {sorted(expected[tag])}")
        for step, (key, value) in sorted(expected[tag].items()):
            want = np.float32(value)
            got = np.float32(events[step])
            ulps = 1 if key in COMPUTED_IN_DOUBLE else 0
            if abs(got - want) > ulps * np.spacing(want):
                sys.exit(f"{tag} step {step}: event {got!r}, JSONL {value!r} "
                         f"(float32 {want!r})")
        print(tag)
    print("tensorboard: PASS")


if __name__ == "__main__":
    main()
