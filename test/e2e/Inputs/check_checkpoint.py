"""Reads a Kiln checkpoint with Hugging Face's safetensors (the reader users have).

  check_checkpoint.py STEP_DIR ARTIFACT      describe the checkpoint (FileCheck'd)
  check_checkpoint.py --same-tensors A B     exit 1 unless A and B hold equal tensors
  check_checkpoint.py --close-tensors A B RTOL ATOL
                                             exit 1 unless A and B hold the same
                                             tensors, |a - b| <= ATOL + RTOL * |b|
"""
import json
import os
import sys

from safetensors import safe_open
from safetensors.torch import load_file


def same_tensors(a, b):
    ta, tb = load_file(a), load_file(b)
    if set(ta) != set(tb):
        sys.exit(f"tensor names differ: {sorted(set(ta) ^ set(tb))[:5]}")
    for name in ta:
        if not (ta[name].shape == tb[name].shape and bool((ta[name] == tb[name]).all())):
            sys.exit(f"tensor {name} differs")
    print(f"{len(ta)} tensors equal")


def close_tensors(a, b, rtol, atol):
    ta, tb = load_file(a), load_file(b)
    if set(ta) != set(tb):
        sys.exit(f"tensor names differ: {sorted(set(ta) ^ set(tb))[:5]}")
    worst, where = 0.0, None
    for name in sorted(ta):
        x, y = ta[name].double(), tb[name].double()
        if x.shape != y.shape:
            sys.exit(f"tensor {name}: shape {list(x.shape)} vs {list(y.shape)}")
        excess = ((x - y).abs() - (atol + rtol * y.abs())).max().item()
        if excess > 0:
            sys.exit(f"tensor {name} differs beyond atol {atol} + rtol {rtol}: "
                     f"largest difference {(x - y).abs().max().item():.3g}")
        diff = (x - y).abs().max().item()
        if diff > worst:
            worst, where = diff, name
    print(f"{len(ta)} tensors agree within atol {atol} + rtol {rtol} "
          f"(largest difference {worst:.1e} in {where})")


def describe(step_dir):
    model_path = os.path.join(step_dir, "model.safetensors")
    with safe_open(model_path, framework="pt") as f:
        metadata = f.metadata()
    model = load_file(model_path)
    shape = lambda name: list(model[name].shape)
    print(f"model.safetensors: format {metadata.get('format')}, {len(model)} tensors, "
          f"wte {shape('wte')}, Block.0.wq {shape('Block.0.wq')}".replace("'", ""))
    optimizer = load_file(os.path.join(step_dir, "optimizer.safetensors"))
    kinds = sorted({name.split(".")[0] for name in optimizer})
    ok = all(list(t.shape) == shape(name.split(".", 1)[1]) for name, t in optimizer.items())
    print(f"optimizer.safetensors: {len(optimizer)} tensors ({', '.join(k + '.*' for k in kinds)}), "
          f"shapes {'match' if ok else 'DO NOT match'} the parameters")
    state = json.load(open(os.path.join(step_dir, "trainer_state.json")))
    position = state["data"]["position"]
    print(f"trainer_state.json: step {state['step']}, {state['updates']} updates, seed {state['seed']}, "
          f"data position epoch {position['epoch']} index {position['index']}")
    marker = os.path.join(step_dir, "COMMITTED")
    print(f"COMMITTED: {'present' if os.path.exists(marker) else 'MISSING'}")


if __name__ == "__main__":
    if sys.argv[1] == "--same-tensors":
        same_tensors(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--close-tensors":
        close_tensors(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    else:
        describe(sys.argv[1])
