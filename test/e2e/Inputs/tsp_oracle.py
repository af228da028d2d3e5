"""An independent PyTorch (float64) reference of one training step of models/tsp.kiln.

Loads the initial parameters kiln-run used (--save-init), the first step's gradients
and batch (--save-grads: input:coords, input:lengths, input:targets) and the first
step's loss (--metrics JSONL); recomputes the model naively (full [N, N] attention
scores with the distance bias, padded keys at -inf, pointer logits with padded cities
at -inf) and checks the loss and the gradient of every parameter, the learned
per-head distance slopes (which reach the loss only through the attention score's
captures) first among them.

Tolerance: relative 1e-4 on the loss and, norm-wise, on each gradient
(||g_kiln - g_ref|| / ||g_ref||). Kiln computes in float32: a forward/backward
through a few layers of layer norms, GEMMs of <= 256 terms and softmaxes of <= 20
terms carries ~1e-6 relative error; a wrong mask (a padded city attended or pointed
at), a wrong distance, a missing slope gradient or a wrong head order gives errors of
order 1e-2..1 (the oracle prints each figure).

usage: tsp_oracle.py INIT GRADS METRICS
"""
import json
import math
import sys

import torch

from tiny_gpt_oracle import read_safetensors  # the same reader, in this folder

TOLERANCE = 1e-4
EPS = 1e-5           # layer_norm eps in models/tsp.kiln
DIST_EPS = 0.000001  # inside the distance's sqrt in models/tsp.kiln


def gelu(x):  # the tanh approximation, as kiln.gelu
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def model(P, coords, lengths, targets):
    B, N, _ = coords.shape
    C = P["w_in"].shape[1]
    H = P["Block.0.slope"].shape[0]
    D = C // H
    layers = len({k.split(".")[1] for k in P if k.startswith("Block.")})
    j = torch.arange(N)
    real = j.view(1, N) < lengths.view(B, 1)                      # [B, N]: city j exists
    diff = coords.view(B, N, 1, 2) - coords.view(B, 1, N, 2)
    dist = torch.sqrt((diff ** 2).sum(-1) + DIST_EPS)              # [B, N, N]
    heads = torch.arange(H, dtype=torch.float64).view(1, H, 1, 1)

    x = coords @ P["w_in"] + P["b_in"]                             # [B, N, C]
    for l in range(layers):
        p = lambda n: P[f"Block.{l}.{n}"]
        h = torch.nn.functional.layer_norm(x, (C,), p("ln1_w"), p("ln1_b"), EPS)
        split = lambda t: t.view(B, N, H, D).transpose(1, 2)       # [B, H, N, D]
        q, k, v = split(h @ p("wq")), split(h @ p("wk")), split(h @ p("wv"))
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        s = s - p("slope").view(1, H, 1, 1) * (heads + 1) * dist.view(B, 1, N, N)
        s = s.masked_fill(~real.view(B, 1, 1, N), -math.inf)
        y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, N, C)
        x = x + y @ p("wo") + p("bo")
        h = torch.nn.functional.layer_norm(x, (C,), p("ln2_w"), p("ln2_b"), EPS)
        x = x + gelu(h @ p("w_fc") + p("b_fc")) @ p("w_proj") + p("b_proj")
    x = torch.nn.functional.layer_norm(x, (C,), P["lnf_w"], P["lnf_b"], EPS)
    logits = (x @ P["w_from"]) @ (x @ P["w_to"]).transpose(-1, -2) / math.sqrt(C)
    logits = logits.masked_fill(~real.view(B, 1, N), -math.inf)
    # kiln.cross_entropy: the mean over ALL B * N positions, ignored ones
    # (target >= N, the padded cities) counting 0.
    used = targets < N
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, targets.clamp(max=N - 1).unsqueeze(-1)).squeeze(-1)
    # where, not a product: an ignored row's clamped pick may be a padded -inf.
    return -torch.where(used, picked, torch.zeros_like(picked)).sum() / (B * N)


def main():
    init_path, grads_path, metrics_path = sys.argv[1:4]
    init = read_safetensors(init_path)
    saved = read_safetensors(grads_path)
    with open(metrics_path) as f:
        kiln_loss = json.loads(f.readline())["loss"]
    coords = saved.pop("input:coords").double()
    lengths = saved.pop("input:lengths").long()
    targets = saved.pop("input:targets").long()
    print(f"batch: {coords.shape[0]} samples of {lengths.min().item()}-"
          f"{lengths.max().item()} cities (n_max {coords.shape[1]})")
    P = {name: t.double().requires_grad_(True) for name, t in init.items()}
    loss = model(P, coords, lengths, targets)
    loss.backward()
    rel = abs(kiln_loss - loss.item()) / abs(loss.item())
    print(f"loss: kiln {kiln_loss:.6f} reference {loss.item():.6f} rel {rel:.2e}")
    ok = rel < TOLERANCE
    # Slopes first: they are what this oracle exists for.
    names = sorted(P, key=lambda n: (not n.endswith("slope"), n))
    for name in names:
        ref, got = P[name].grad, saved[name].double()
        if not torch.isfinite(got).all():
            print(f"grad {name}: NOT FINITE")
            ok = False
            continue
        err = (got - ref).norm().item() / ref.norm().item()
        extra = f" kiln {got.tolist()} reference {ref.tolist()}" if name.endswith("slope") else ""
        print(f"grad {name}: rel {err:.2e}{extra}")
        ok &= err < TOLERANCE
    print(f"gradients: {len(names)} tensors")
    print("oracle: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
