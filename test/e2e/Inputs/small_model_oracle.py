"""PyTorch (float64) oracle for the small models of test/e2e/gradcheck/.

  small_model_oracle.py MODEL INIT.safetensors GRADS.safetensors METRICS.jsonl

Recomputes MODEL's loss (unary_math.kiln: torch's own sigmoid, silu, relu,
sin, cos, square and pow; rms_norm.kiln: RMSNorm written out as Llama / Hugging
Face compute it; rope.kiln: Hugging Face's rotary embedding with rotate_half
and the llama3 frequency scaling; slicing.kiln: a rotary embedding built from
split, sin, cos and concat, and slices and cats, in torch's own slicing),
written apart from the compiler, from the initial
parameters kiln-run saved, and its gradients by torch.autograd; compares them
with kiln-run's step-1 loss (--metrics) and gradients (--save-grads).

Tolerance: relative 1e-5 on the loss and on each gradient's largest entry
(float32 kernels against float64: a handful of ulps of rounding, nothing of a
wrong formula, which is off by far more).
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from tiny_gpt_oracle import read_safetensors  # noqa: E402


def unary_math(a, b, c):
    u = torch.sigmoid(a) * F.silu(b) + torch.sin(a * b) - torch.cos(c) * torch.square(b)
    pos = torch.sqrt(torch.square(a)) + 0.1
    w = torch.relu(pos) * b + torch.relu(-pos) * a + torch.relu(b) * F.silu(c)
    v = torch.pow(pos, b) / 10 + pos ** 1.5 * c - torch.pow(2.0, c) + b * b
    return torch.sum(u + w) + torch.mean(torch.square(c)) + torch.sum(v)


def rms_norm(x, weight, eps):
    # LlamaRMSNorm: x * rsqrt(mean(x^2, -1) + eps) * weight.
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_norm_model(a, r, w):
    h = rms_norm(a + r, w, 1e-5)
    return torch.sum(h * h * a) + torch.sum(rms_norm(a, w, 1e-6) * r)


def rope_inv_freq(dim, theta, scaling=None):
    # LlamaRotaryEmbedding's inv_freq, and _compute_llama3_parameters for
    # rope_type "llama3" (factor, low_freq_factor, high_freq_factor,
    # original_max_position_embeddings), in float64.
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if scaling is None:
        return inv_freq
    factor, low, high, old_len = scaling
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, inv_freq):
    t = torch.arange(x.shape[-2], dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def rope_model(q, k, w):
    r = apply_rope(q, rope_inv_freq(96, 10000.0)) * w
    s = apply_rope(k, rope_inv_freq(96, 500000.0, (8.0, 1.0, 4.0, 64.0)))
    return torch.sum(r * r) / 100 + torch.sum(s * w) / 100


def slicing_model(q, w, a, b):
    # The rotary embedding written out as Hugging Face's apply_rotary_pos_emb
    # (its own table, not slicing.kiln's), then slices and cats in torch's
    # spelling.
    hand = apply_rope(q, rope_inv_freq(96, 10000.0))
    u, v, z = torch.split(a, [4, 5, 3], dim=1)
    m = torch.cat([z * b, a[:, -3:], u], dim=-1)
    t = torch.cat([v, a[:, 2:7]], dim=0)
    aa = torch.cat([a, a], dim=0)[:, :5]
    return (torch.sum(hand * w) / 100 + torch.sum(m * m) / 10
            + torch.sum(t * t * aa) / 10
            + torch.sum(q[:, :, 5:30] * w[:, :, 5:30]) / 100)


MODELS = {"unary_math": (unary_math, ("a", "b", "c")),
          "rms_norm": (rms_norm_model, ("a", "r", "w")),
          "rope": (rope_model, ("q", "k", "w")),
          "slicing": (slicing_model, ("q", "w", "a", "b"))}


def main(model, init_path, grads_path, metrics_path):
    loss_of, names = MODELS[model]
    init = read_safetensors(init_path)
    grads = read_safetensors(grads_path)
    params = {k: init[k].double().requires_grad_() for k in names}
    loss = loss_of(*(params[k] for k in names))
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
    main(*sys.argv[1:5])
