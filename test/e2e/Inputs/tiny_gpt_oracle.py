"""An independent PyTorch implementation of models/tiny_gpt.kiln: the oracle.

Loads the initial parameters kiln-run used (--save-init), the first batch and the
gradients kiln computed for it (--save-grads) and kiln's per-step losses
(--metrics JSONL), then checks in float64:
  1. the loss of step 1 and every parameter gradient,
  2. the losses of the first N AdamW steps (same data order, same hyperparameters).

Tolerance: relative 1e-4, norm-wise per tensor: ||g_kiln - g_ref|| / (||g_ref|| + f),
with a floor f = 1e-6 * (global gradient norm). The floor matters only for tensors
whose true gradient is zero (the key biases bk: softmax is invariant to adding the
same q.bk to every score of a row), where float32 leaves ~1e-9 of rounding noise.
Kiln computes in float32; float32 sums of n terms carry a relative error of about
1e-7 * sqrt(n) with n up to ~10^4 here, and the chain of ~40 ops per layer amplifies
that by at most ~10-100, so correct code lands near 1e-6..1e-5: a wrong op (a missing
term, a transposed weight, a bad mask) gives errors of order 1, far above 1e-4.

usage: tiny_gpt_oracle.py INIT.safetensors GRADS.safetensors METRICS.jsonl DATA STEPS LR SEED
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

VOCAB, DIM, N_LAYER, N_HEAD, EPS = 256, 128, 4, 4, 1e-5
BETAS, ADAM_EPS, WEIGHT_DECAY = (0.9, 0.95), 1e-8, 0.1
TOLERANCE = 1e-4


def read_safetensors(path):
    """Minimal reader of the safetensors format (8-byte header length, JSON, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    dtypes = {"F32": np.float32, "I32": np.int32}
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        data = np.frombuffer(blob[8 + n + start:8 + n + end], dtype=dtypes[info["dtype"]])
        tensors[name] = torch.from_numpy(data.reshape(info["shape"]).copy())
    return tensors


def forward(P, tokens, targets):
    B, T = tokens.shape
    D = DIM // N_HEAD
    x = P["wte"][tokens] + P["wpe"][:T]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(N_LAYER):
        p = lambda n: P[f"Block.{l}.{n}"]
        h = F.layer_norm(x, (DIM,), p("ln1_w"), p("ln1_b"), EPS)
        q = (h @ p("wq") + p("bq")).view(B, T, N_HEAD, D).transpose(1, 2)
        k = (h @ p("wk") + p("bk")).view(B, T, N_HEAD, D).transpose(1, 2)
        v = (h @ p("wv") + p("bv")).view(B, T, N_HEAD, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, DIM)
        x = x + y @ p("wo") + p("bo")
        h = F.layer_norm(x, (DIM,), p("ln2_w"), p("ln2_b"), EPS)
        x = x + F.gelu(h @ p("w_fc") + p("b_fc"), approximate="tanh") @ p("w_proj") + p("b_proj")
    x = F.layer_norm(x, (DIM,), P["lnf_w"], P["lnf_b"], EPS)
    logits = x @ P["wte"].T
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1).long())


MASK64 = (1 << 64) - 1


def split_mix64(x):
    """The SplitMix64 finaliser of runtime/Hash.h."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def batch(data, seed, step, B, T):
    """kiln-run's batch order (runtime/data/TokenDataset.h): seeded random windows."""
    N = len(data)
    rows_x, rows_y = [], []
    for r in range(B):
        o = split_mix64((split_mix64(seed) + step * B + r) & MASK64) % (N - T - 1)
        rows_x.append(data[o:o + T])
        rows_y.append(data[o + 1:o + T + 1])
    return torch.tensor(np.array(rows_x), dtype=torch.long), torch.tensor(np.array(rows_y), dtype=torch.long)


def relative_error(a, b, floor):
    return (a - b).norm().item() / (b.norm().item() + floor)


def main():
    init_path, grads_path, metrics_path, data_path, steps, lr, seed = sys.argv[1:8]
    steps, lr, seed = int(steps), float(lr), int(seed)
    init = read_safetensors(init_path)
    kiln_grads = read_safetensors(grads_path)
    kiln_losses = [json.loads(line)["loss"] for line in open(metrics_path)]
    data = np.frombuffer(open(data_path, "rb").read(), dtype=np.uint8).astype(np.int64)
    tokens, targets = kiln_grads.pop("input:tokens"), kiln_grads.pop("input:targets")
    B, T = tokens.shape
    failures = 0

    # The batch kiln saved must be the batch the documented order gives.
    x0, y0 = batch(data, seed, 0, B, T)
    if not (torch.equal(x0, tokens.long()) and torch.equal(y0, targets.long())):
        print("FAIL: kiln's first batch differs from the documented data order")
        failures += 1

    P = {n: t.double().requires_grad_() for n, t in init.items()}
    loss = forward(P, tokens.long(), targets.long())
    loss.backward()
    err = abs(kiln_losses[0] - loss.item()) / abs(loss.item())
    print(f"step 1 loss: kiln {kiln_losses[0]:.8f} torch {loss.item():.8f} rel {err:.2e}")
    failures += err > TOLERANCE
    if set(kiln_grads) != set(P):
        print(f"FAIL: gradient names differ: {sorted(set(kiln_grads) ^ set(P))}")
        failures += 1
    worst = 0.0
    floor = 1e-6 * math.sqrt(sum(P[n].grad.norm().item() ** 2 for n in P))
    for name in sorted(P):
        if name not in kiln_grads:
            continue
        err = relative_error(kiln_grads[name].double(), P[name].grad, floor)
        worst = max(worst, err)
        if err > TOLERANCE:
            print(f"FAIL: gradient of {name}: relative error {err:.2e}")
            failures += 1
    print(f"gradients: {len(P)} tensors, worst relative error {worst:.2e}")

    # The first `steps` AdamW steps.
    P = {n: t.double().requires_grad_() for n, t in init.items()}
    opt = torch.optim.AdamW(list(P.values()), lr=lr, betas=BETAS, eps=ADAM_EPS, weight_decay=WEIGHT_DECAY)
    for s in range(steps):
        x, y = batch(data, seed, s, B, T)
        opt.zero_grad()
        loss = forward(P, x, y)
        loss.backward()
        opt.step()
        err = abs(kiln_losses[s] - loss.item()) / abs(loss.item())
        print(f"step {s + 1:2d} loss: kiln {kiln_losses[s]:.8f} torch {loss.item():.8f} rel {err:.2e}")
        failures += err > TOLERANCE
    print("oracle: PASS" if failures == 0 else f"oracle: FAIL ({failures} mismatches)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
