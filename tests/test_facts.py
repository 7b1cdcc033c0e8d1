"""Facts lifted from a log (triage/logs/facts.py) survive what people paste (issues 16, 20).

Each case is a real corpus log with one value edited in.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_log
from triage.classify.classifier import classify

# DeepSpeed 0.19.8 loading a checkpoint into a grown model: torch's size mismatches, the
# engine's version line, checkpoint paths, torchrun's summary with its docs URL.
CASE = "cases/zero2-dp1-model-hidden-changed.log"
ROOT_DIR = "/tmp/ds-triage-corpus/zero2-dp1-model-hidden-changed"
VERSION_LINE = "DeepSpeed info: version=0.19.8, git-hash=unknown, git-branch=unknown"


def _incident(text: str, rules) -> dict:
    return classify(text, rules=rules).to_json()["incident"]


def test_a_shape_that_is_no_shape_classifies_and_is_kept_as_printed(cli):
    text = corpus_log(CASE).replace("torch.Size([128]) from checkpoint", "torch.Size([1x]) from checkpoint", 1)
    assert "torch.Size([1x])" in text
    result = cli("classify", "-", "--json", stdin=text.encode())
    assert result.returncode in (0, 1), result.stderr.decode()  # docs/exit-codes.md: 70 is a crash
    mismatches = json.loads(result.stdout)["incident"]["size_mismatches"]
    assert {"param": "blocks.0.bias", "checkpoint": "torch.Size([1x])", "model": [192]} in mismatches
    assert {"param": "blocks.0.weight", "checkpoint": [128, 128], "model": [192, 192]} in mismatches


HUGE = "torch.Size([" + "9" * 5000 + "])"  # int() refuses over 4,300 digits


@pytest.mark.parametrize("shape, kept", [("torch.Size([1x])", "torch.Size([1x])"), (HUGE, HUGE),
                                         ("torch.Size([4,,4])", "torch.Size([4,,4])"),
                                         ("torch.Size([-1])", "torch.Size([-1])"), ("torch.Size([])", [])])
def test_any_shape_text_is_a_fact_not_an_error(shape, kept, rules):
    text = corpus_log(CASE).replace("torch.Size([128, 128]) from checkpoint", f"{shape} from checkpoint", 1)
    first = _incident(text, rules)["size_mismatches"][0]
    assert first == {"param": "blocks.0.weight", "checkpoint": kept, "model": [192, 192]}


@pytest.mark.parametrize("line, key, version", [
    (VERSION_LINE, "deepspeed", "0.19.8"),  # as DeepSpeed prints it: the comma is the sentence's
    ("deepspeed version 0.19.8,", "deepspeed", "0.19.8"),
    ("deepspeed install version ....... [0.19.8]", "deepspeed", "0.19.8"),
    ("DeepSpeed info: version=0.19.8+cu121, git-hash=unknown", "deepspeed", "0.19.8+cu121"),
    ("DeepSpeed info: version=0.20.0.dev0.", "deepspeed", "0.20.0.dev0"),
    ("torch version .................... 2.13.0a0+git4f2c1e3;", "torch", "2.13.0a0+git4f2c1e3"),
    ("ds_version: 0.19.8,", "checkpoint_deepspeed", "0.19.8"),
    ("'ds_version': '0.19.8', 'dp_world_size': 2", "checkpoint_deepspeed", "0.19.8"),
])
def test_versions_keep_no_trailing_punctuation(line, key, version, rules):
    text = corpus_log(CASE).replace(VERSION_LINE, line)
    assert _incident(text, rules)["versions"][key] == version


@pytest.mark.parametrize("url", ["https://storage.example.com/ckpt", "http://10.0.0.5:8080/ckpt", "s3://bucket/ckpt",
                                 "gs://bucket/runs/ckpt", "hdfs://namenode:8020/user/ckpt", "az://container/ckpt"])
def test_urls_are_not_local_paths(url, rules):
    text = corpus_log(CASE).replace(ROOT_DIR, url)
    paths = _incident(text, rules)["paths"]
    # the checkpoint now lives behind a URL; torchrun's docs link was never a path either
    assert not any("ckpt" in p or "bucket" in p or "pytorch.org" in p or "example.com" in p for p in paths), paths


def test_local_paths_are_still_found(rules):
    paths = _incident(corpus_log(CASE), rules)["paths"]
    assert f"{ROOT_DIR}/global_step3/mp_rank_00_model_states.pt" in paths
    assert not any("pytorch.org" in p for p in paths)
