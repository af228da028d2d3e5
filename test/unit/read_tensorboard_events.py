"""Reads an event file written by Kiln's TensorBoardWriter with TensorBoard's
own reader and checks tags, steps and values exactly.

  read_tensorboard_events.py WRITER DIR

Runs WRITER (write-tensorboard-events) into a fresh DIR, then loads DIR with
tensorboard.backend.event_processing.event_accumulator.EventAccumulator,
which verifies both CRCs of every record and parses the protobufs with the
real tensorflow.Event schema. Values are float32 in the file, so each
expected value is rounded to float32 before comparing; comparisons are then
exact. The values must match write_tensorboard_events.cpp.
"""
import glob
import os
import shutil
import struct
import subprocess
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_scalars():
    """tag -> [(step, value)] as the driver writes them."""
    rows = {}
    for step in (1, 2, 300, 1 << 40):
        values = [
            ("train/loss", 5.5 / (step % 1000 + 1)),
            ("train/lr", 3e-4),
            ("train/grad_norm", 1.0 + 0.1 * (step % 7)),
            ("metric/blocks.0.attn", 0.25 * (step % 5 + 1)),
            ("perf/step_ms", 12.5),
            ("perf/tokens_per_step", 4096.0),
            ("perf/tokens_per_s", 4096 / 0.0125),
            ("mem/peak_bytes", float(1 << 30)),
            ("train/skipped", 1.0 if step == 2 else 0.0),
        ]
        if step == 300:
            values.append(("val/loss", 2.31))
        for tag, value in values:
            rows.setdefault(tag, []).append((step, f32(value)))
    return rows


def main():
    writer, logdir = sys.argv[1], sys.argv[2]
    shutil.rmtree(logdir, ignore_errors=True)
    subprocess.run([writer, logdir], check=True)
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if len(files) != 1:
        sys.exit(f"{logdir}: expected one event file, found {files}")

    failures = []
    # The raw records through TensorBoard's own record reader and protobuf.
    from tensorboard.backend.event_processing import event_file_loader
    events = list(event_file_loader.EventFileLoader(files[0]).Load())
    if events[0].file_version != "brain.Event:2":
        failures.append(f"first event: file_version {events[0].file_version!r}")
    if len(events) != 5:
        failures.append(f"{len(events)} events, expected 5 (version + 4 steps)")
    if not all(isinstance(e, event_pb2.Event) for e in events):
        failures.append("records are not tensorflow.Event protobufs")

    acc = event_accumulator.EventAccumulator(logdir)
    acc.Reload()
    expected = expected_scalars()
    tags = sorted(acc.Tags()["scalars"])
    if tags != sorted(expected):
        failures.append(f"tags {tags}, expected {sorted(expected)}")
    for tag, rows in sorted(expected.items()):
        if tag not in tags:
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        if got != rows:
            failures.append(f"{tag}: got {got}, expected {rows}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"{files[0]}: {len(tags)} tags, all steps and values match")


if __name__ == "__main__":
    main()
