"""The PyTorch helpers the fuzzer's generated programs call (tools/fuzz/
kiln_fuzz.py): Python's slicing, where() with numbers, RMSNorm, Hugging Face's
rotary embedding, causal masks, bf16 rounding, repeated blocks and attention
with a score and a mask. The generator runs this file's text in the namespace
of every program it evaluates, and writes it at the head of each failing
seed's oracle.py so that it runs alone."""
import math
import torch
import torch.nn.functional as F  # noqa: F401 (the generated programs call F.*)


def sl(x, dim, start, end):
    index = [slice(None)] * x.dim()
    index[dim] = slice(start, end)
    return x[tuple(index)]


def wh(cond, a, b):
    dt = a.dtype if torch.is_tensor(a) else b.dtype
    a = a if torch.is_tensor(a) else torch.tensor(a, dtype=dt)
    b = b if torch.is_tensor(b) else torch.tensor(b, dtype=dt)
    return torch.where(cond, a, b)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):
    # Hugging Face's rotary embedding: positions along dim -2, feature i
    # paired with i + D/2.
    t, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(torch.arange(t, dtype=torch.float64), inv)
    ang = torch.cat((ang, ang), dim=-1).to(x.dtype)
    half = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    return x * ang.cos() + half * ang.sin()


def causal_softmax(x):
    # causal_mask of [.., T, S]: -inf where j > i + (S - T).
    t, s = x.shape[-2], x.shape[-1]
    keep = torch.ones(t, s, dtype=torch.bool).tril(s - t)
    return torch.softmax(x.masked_fill(~keep, float("-inf")), -1)


class RoundBf16(torch.autograd.Function):
    """x rounded to bfloat16 (kept in x's dtype), its gradient rounded too:
    precision = bf16 emulated coarsely, every value and gradient rounded."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(g.dtype)


def rb(x):
    return RoundBf16.apply(x) if torch.is_tensor(x) and x.is_floating_point() else x


def rep(block, x, name, layers):
    # `repeat LAYERS Name(x)`: layer l's parameters are Name.l.*
    for layer in range(layers):
        x = block(x, f"{name}.{layer}.")
    return x


def attention(q, k, v, scale, score, mask):
    # q [B, H, T, D], k and v [B, KVH, S, D]: kv head h // (H / KVH) serves
    # query head h. score(s, b, h, i, j) and mask(b, h, i, j) take
    # broadcasting index tensors.
    B, H, T, D = q.shape
    group = H // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    S = k.shape[2]
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(H).view(1, H, 1, 1)
    i = torch.arange(T).view(1, 1, T, 1)
    j = torch.arange(S).view(1, 1, 1, S)
    s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D) if scale is None else scale)
    s = score(s, b, h, i, j)
    keep = mask(b, h, i, j)
    if keep is not None:
        s = s.masked_fill(~keep.expand(s.shape), float("-inf"))
    return torch.softmax(s, -1) @ v
