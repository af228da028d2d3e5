"""Checkpoints written by Kiln's CheckpointStore are read by Hugging Face's
safetensors (names, shapes, values, and __metadata__ format "pt"), and a file
written by safetensors.torch.save_file is read by Kiln's SafetensorsFile.

usage: checkpoint_interop_test.py CHECKPOINT_STRESS WORK_DIR
Run with the build folder's venv (<build>/pyenv/bin/python), which has
safetensors and sees Debian's torch.
"""

import json
import os
import shutil
import subprocess
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

# Mirrors checkpoint_stress.cpp: parameter names and shapes, and the value of
# element i of tensor k at a step (exact in float32).
PARAMETERS = [
    ("transformer.wte.weight", [256, 1024]),
    ("transformer.h.0.attn.c_attn.weight", [64, 1536]),
    ("transformer.h.0.attn.c_attn.bias", [1536]),
    ("transformer.ln_f.weight", [1024]),
    ("lm_head.scale", []),
]
STEP = 100


def expected_tensor(step, k, shape):
    count = 1
    for d in shape:
        count *= d
    i = torch.arange(count, dtype=torch.int64)
    values = (step * 131 + k * 7919 + i * 31) % 65521 - 32000
    return values.to(torch.float32).reshape(shape)


def check(condition, message):
    if not condition:
        print("FAIL:", message)
        sys.exit(1)


def check_kiln_checkpoint_loads_in_python(driver, work):
    path = subprocess.run([driver, "write", os.path.join(work, "ckpt"), str(STEP)],
                          check=True, capture_output=True, text=True).stdout.strip()
    p = len(PARAMETERS)
    model = load_file(os.path.join(path, "model.safetensors"))
    optimizer = load_file(os.path.join(path, "optimizer.safetensors"))
    check(sorted(model) == sorted(name for name, _ in PARAMETERS),
          f"model tensor names {sorted(model)}")
    check(sorted(optimizer) == sorted(f"adam_{m}.{name}" for m in "mv" for name, _ in PARAMETERS),
          f"optimizer tensor names {sorted(optimizer)}")
    for k, (name, shape) in enumerate(PARAMETERS):
        for tensors, key, index in [(model, name, k),
                                    (optimizer, "adam_m." + name, p + k),
                                    (optimizer, "adam_v." + name, 2 * p + k)]:
            t = tensors[key]
            check(t.dtype == torch.float32, f"{key}: dtype {t.dtype}")
            check(list(t.shape) == shape, f"{key}: shape {list(t.shape)}, expected {shape}")
            # Bitwise equality: both sides hold the same exact integers.
            check(torch.equal(t, expected_tensor(STEP, index, shape)), f"{key}: values differ")
    with safe_open(os.path.join(path, "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
        check(metadata.get("format") == "pt", f"model metadata {metadata}")
        check(metadata.get("kiln_step") == str(STEP), f"model metadata {metadata}")
    with safe_open(os.path.join(path, "optimizer.safetensors"), framework="pt") as f:
        check(f.metadata().get("format") == "pt", f"optimizer metadata {f.metadata()}")
    with open(os.path.join(path, "trainer_state.json")) as f:
        state = json.load(f)
    check(state["format"] == "kiln-trainer-state" and state["version"] == 1
          and state["step"] == STEP and state["data_position"] == STEP * 1000,
          f"trainer_state.json {state}")
    print(f"ok: {path} loads in safetensors.torch with exact names, shapes and values")


def raw_bytes(t):
    # numpy has no bfloat16; reinterpret 16-bit floats as int16 first.
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.contiguous().numpy().tobytes()


def check_python_file_reads_in_kiln(driver, work):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "f32": torch.randn(3, 5, generator=g),
        "bf16": torch.randn(4, 2, generator=g).to(torch.bfloat16),
        "f16": torch.randn(7, generator=g).to(torch.float16),
        "f64": torch.randn(2, 2, generator=g).to(torch.float64),
        "i64": torch.tensor([-1, 2**40, 3]),
        "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3) - 3,
        "u8": torch.tensor([0, 7, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
    }
    path = os.path.join(work, "from_python.safetensors")
    save_file(tensors, path, metadata={"format": "pt", "origin": "python"})
    out = subprocess.run([driver, "dump", path], capture_output=True, text=True)
    check(out.returncode == 0, f"kiln could not read {path}: {out.stderr}")
    dump = json.loads(out.stdout)
    check(dump["metadata"] == {"format": "pt", "origin": "python"}, f"metadata {dump['metadata']}")
    dtype_names = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
                   torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
                   torch.uint8: "U8", torch.bool: "BOOL"}
    check(sorted(dump["tensors"]) == sorted(tensors), f"names {sorted(dump['tensors'])}")
    for name, t in tensors.items():
        entry = dump["tensors"][name]
        check(entry["dtype"] == dtype_names[t.dtype], f"{name}: dtype {entry['dtype']}")
        check(entry["shape"] == list(t.shape), f"{name}: shape {entry['shape']}")
        check(bytes.fromhex(entry["hex"]) == raw_bytes(t), f"{name}: bytes differ")
    print(f"ok: {path} written by safetensors.torch.save_file reads in Kiln")


def main():
    driver, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    check_kiln_checkpoint_loads_in_python(driver, work)
    check_python_file_reads_in_kiln(driver, work)
    shutil.rmtree(work)
    print("PASS")


if __name__ == "__main__":
    main()
