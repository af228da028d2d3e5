"""PyTorch (float64) oracle for test/e2e/gradcheck/unary_math.kiln.

Recomputes the model's loss from the initial parameters kiln-run saved, with
torch's own sigmoid, silu, relu, sin, cos and square (written apart from the
compiler's formulas), and its gradients by torch.autograd; compares them with
kiln-run's step-1 loss (--metrics) and gradients (--save-grads).

Tolerance: relative 1e-5 on the loss and on each gradient's largest entry
(float32 kernels against float64: a handful of ulps of rounding, nothing of a
wrong formula, which is off by far more).
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from tiny_gpt_oracle import read_safetensors  # noqa: E402


def loss_of(a, b, c):
    u = torch.sigmoid(a) * F.silu(b) + torch.sin(a * b) - torch.cos(c) * torch.square(b)
    pos = torch.sqrt(torch.square(a)) + 0.1
    w = torch.relu(pos) * b + torch.relu(-pos) * a + torch.relu(b) * F.silu(c)
    return torch.sum(u + w) + torch.mean(torch.square(c))


def main(init_path, grads_path, metrics_path):
    init = read_safetensors(init_path)
    grads = read_safetensors(grads_path)
    params = {k: init[k].double().requires_grad_() for k in ("a", "b", "c")}
    loss = loss_of(params["a"], params["b"], params["c"])
    loss.backward()
    kiln_loss = json.loads(open(metrics_path).readline())["loss"]
    rel = abs(kiln_loss - loss.item()) / abs(loss.item())
    print(f"loss: kiln {kiln_loss:.7g} torch {loss.item():.7g} rel {rel:.2e} "
          + ("ok" if rel <= 1e-5 else "MISMATCH"))
    for name, p in params.items():
        ref = p.grad
        got = grads[name].double()
        err = (got - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        print(f"grad {name}: rel {err:.2e} " + ("ok" if err <= 1e-5 else "MISMATCH"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
