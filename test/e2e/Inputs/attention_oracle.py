"""An independent PyTorch (float64) reference of test/e2e/Inputs/attention_cases.kiln.

Loads the initial parameters kiln-run used (--save-init), the gradients of the first
step (--save-grads) and the first step's loss (--metrics JSONL); recomputes every
attention naively (the full [T, S] score matrix, masked entries at -inf, softmax,
fully masked rows set to zero output) and checks the loss and the gradient of every
parameter (q/k/v, the output projections, the learned slopes and the learned points
that only enter through score captures).

Tolerance: relative 1e-4, norm-wise per tensor (||g_kiln - g_ref|| / ||g_ref||), and
1e-5 on the loss relative to the sum of the magnitudes of its terms (it is a sum of
signed terms that cancel). Kiln computes in float32: dot products of up to 256 terms
and softmax sums of up to 53 terms carry ~1e-7 * sqrt(n) relative error, the online
softmax rescaling and the backward's recomputed p = exp(score - lse) add a few ulps,
so a correct kernel lands near 1e-6; a wrong mask, a missing term, a wrong kv head
(GQA) or a missing capture gradient gives errors of order 1e-2..1.

usage: attention_oracle.py INIT GRADS METRICS
"""
import json
import math
import sys

import torch

from tiny_gpt_oracle import read_safetensors  # the same reader, in this folder

TOLERANCE = 1e-4
LOSS_TOLERANCE = 1e-5


def attention(q, k, v, scale, score=None, mask=None, weights=None):
    """Naive attention: q [B, H, T, D], k [B, KVH, S, D], v [B, KVH, S, Dv].
    score(s, b, h, i, j) and mask(b, h, i, j) take broadcastable index grids;
    `weights` [B, H, T, S] multiplies the probabilities (dropout's keep / (1 - p))."""
    B, H, T, _ = q.shape
    KVH, S = k.shape[1], k.shape[2]
    g = H // KVH
    k = k.repeat_interleave(g, dim=1)  # query head h reads kv head h // g
    v = v.repeat_interleave(g, dim=1)
    s = scale * q @ k.transpose(-1, -2)  # [B, H, T, S]
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(H).view(1, H, 1, 1)
    i = torch.arange(T).view(1, 1, T, 1)
    j = torch.arange(S).view(1, 1, 1, S)
    if score is not None:
        s = score(s, b, h, i, j)
    keep = torch.ones(B, H, T, S, dtype=torch.bool)
    if mask is not None:
        keep = keep & mask(b, h, i, j)
    s = s.masked_fill(~keep, -math.inf)
    any_kept = keep.any(dim=-1, keepdim=True)
    p = torch.softmax(s.masked_fill(~any_kept, 0.0), dim=-1) * any_kept
    if weights is not None:
        p = p * weights
    return p @ v


def model(P):
    B, H, T, D = P["q1"].shape
    lens = torch.arange(B).view(B, 1, 1, 1)
    slope, slope2, xy = P["slope"], P["slope2"], P["xy"]
    a1 = attention(P["q1"], P["k1"], P["v1"], 1 / math.sqrt(D),
                   score=lambda s, b, h, i, j: s - slope[h] * (i - j).abs(),
                   mask=lambda b, h, i, j: j < 30 + 20 * lens)
    x2 = P["x2"]
    a2 = attention(x2, x2, x2, 1 / math.sqrt(D),
                   score=lambda s, b, h, i, j: s - 0.25 * (h + 1) * (i - j),
                   mask=lambda b, h, i, j: j <= i)
    a3 = attention(x2, x2, x2, 0.1, mask=lambda b, h, i, j: (j <= i) & (i - j < 8))

    def dist_score(s, b, h, i, j):
        xi, xj = xy[b, i, 0], xy[b, j, 0]
        yi, yj = xy[b, i, 1], xy[b, j, 1]
        return s - slope2[h] * torch.sqrt((xi - xj) ** 2 + (yi - yj) ** 2 + 0.000001)

    a4 = attention(x2, x2, x2, 1 / math.sqrt(D), score=dist_score,
                   mask=lambda b, h, i, j: (lens > 0) & ((j < 20) | (i == j)))
    # Sample 0 of a4 is fully masked: its output must be exactly zero.
    assert a4[0].abs().max().item() == 0.0
    terms = [a1 * P["w1"], a2 * P["w2"], a3 * P["w2"], a4 * P["w4"]]
    loss = sum(t.sum() for t in terms)
    magnitude = sum(t.abs().sum() for t in terms).item()
    return loss, magnitude


def check(model, init_path, grads_path, metrics_path):
    """Runs `model(P)` -> (loss, magnitude) in float64 on Kiln's initial
    parameters and compares Kiln's first-step loss and gradients with it;
    prints each comparison and returns whether all are within tolerance."""
    init = read_safetensors(init_path)
    grads = read_safetensors(grads_path)
    with open(metrics_path) as f:
        kiln_loss = json.loads(f.readline())["loss"]
    P = {name: t.double().requires_grad_(True) for name, t in init.items()}
    loss, magnitude = model(P)
    loss.backward()
    ok = True
    # The loss is a sum of ~10^5 signed terms that largely cancel: its float32
    # rounding error scales with the sum of their magnitudes, not with the
    # (small) result, so the loss is compared relative to that magnitude.
    rel = abs(kiln_loss - loss.item()) / magnitude
    print(f"loss: kiln {kiln_loss:.6f} reference {loss.item():.6f} rel {rel:.2e}")
    ok &= rel < LOSS_TOLERANCE
    names = sorted(P)
    for name in names:
        ref = P[name].grad
        got = grads[name].double()
        if not torch.isfinite(got).all():
            print(f"grad {name}: NOT FINITE")
            ok = False
            continue
        err = (got - ref).norm().item() / ref.norm().item()
        print(f"grad {name}: rel {err:.2e}")
        ok &= err < TOLERANCE
    print(f"gradients: {len(names)} tensors")
    print("oracle: " + ("PASS" if ok else "FAIL"))
    return ok


def main():
    sys.exit(0 if check(model, *sys.argv[1:4]) else 1)


if __name__ == "__main__":
    main()
