"""An independent PyTorch implementation of models/post_ln.kiln: the oracle.

  post_ln_oracle.py --heads H INIT GRADS BATCHES METRICS --steps N --lr X \
      [tiny_gpt_oracle options]

The checks of tiny_gpt_oracle.py (its harness: step 1's loss, every gradient
and the global norm, then N steps of torch.optim AdamW, all in float64,
relative 1e-4; see there for why that tolerance is right), with the model
swapped for a post-LN decoder written as the original Transformer orders
it: each sub-layer's output is added to the residual stream and the sum is
layer-normalised (x = LN(x + attn(x)), x = LN(x + mlp(x))), with no final
norm. Tied embeddings, learned positions, GELU (tanh) MLP, biases.
Vocabulary, width and depth come from the saved parameters.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import tiny_gpt_oracle as harness  # noqa: E402

CONFIG = {}


def forward(P, tokens, targets, metrics=None):
    B, T = tokens.shape
    H, eps = CONFIG["heads"], 1e-5
    V, C = P["wte"].shape
    D = C // H
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = P["wte"][tokens] + P["wpe"][:T]
    layers = len({n.split(".")[1] for n in P if n.startswith("Block.")})
    for l in range(layers):
        p = lambda n: P[f"Block.{l}.{n}"]
        q = (x @ p("wq") + p("bq")).view(B, T, H, D).transpose(1, 2)
        k = (x @ p("wk") + p("bk")).view(B, T, H, D).transpose(1, 2)
        v = (x @ p("wv") + p("bv")).view(B, T, H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = F.layer_norm(x + y @ p("wo") + p("bo"), (C,), p("ln1_w"), p("ln1_b"), eps)
        mlp = F.gelu(x @ p("w_fc") + p("b_fc"), approximate="tanh") @ p("w_proj") + p("b_proj")
        x = F.layer_norm(x + mlp, (C,), p("ln2_w"), p("ln2_b"), eps)
        if metrics is not None:
            metrics[f"Block.{l}.resid_rms"] = x.detach().pow(2).mean().sqrt().item()
    logits = x @ P["wte"].T
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1).long())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--heads", type=int, required=True)
    known, rest = ap.parse_known_args()
    CONFIG.update(heads=known.heads)
    harness.forward = forward  # the harness calls its module's forward
    sys.argv = [sys.argv[0]] + rest
    harness.main()
