"""What a user does to peek into a shard: plain torch.load(path) with torch's defaults
(weights_only=True since torch 2.6)."""
import sys

import torch

path = sys.argv[1]
print(f"torch {torch.__version__}: torch.load({path!r})", flush=True)
sd = torch.load(path, map_location="cpu")
print(f"loaded {type(sd).__name__} with keys {sorted(sd)[:12]}", flush=True)
