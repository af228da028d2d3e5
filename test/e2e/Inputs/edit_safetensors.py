"""Writes a variant of a safetensors file with Hugging Face's safetensors, for the
bad-input tests: drop NAME | to-f16 NAME | transpose NAME | add NAME (a [4] f32
tensor of zeros the model does not have).

  edit_safetensors.py IN OUT drop Block.0.wq
"""
import sys

import torch
from safetensors.torch import load_file, save_file

src, dst, action, name = sys.argv[1:5]
tensors = load_file(src)
if action == "drop":
    del tensors[name]
elif action == "to-f16":
    tensors[name] = tensors[name].to(torch.float16)
elif action == "transpose":
    tensors[name] = tensors[name].t().contiguous()
elif action == "add":
    tensors[name] = torch.zeros(4)
else:
    sys.exit(f"unknown action {action}")
save_file(tensors, dst, metadata={"format": "pt"})
