"""Write a worker model variant's parameter names and shapes as the JSON `ds-triage probe --model`
and `verify --model` read: the model a job builds, described as its owner would describe it.

    python corpus/workers/model_shapes.py VARIANT OUT.json      # VARIANT: a common.MODEL_VARIANTS key
"""
import json
import sys

from common import build_model


def main(variant: str, out: str) -> None:
    shapes = {name: list(tensor.shape) for name, tensor in build_model(variant).state_dict().items()}
    with open(out, "w") as f:
        json.dump(shapes, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
