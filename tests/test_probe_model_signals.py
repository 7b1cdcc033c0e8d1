"""The model probe reads a state-dict difference with the one analysis classify uses
(triage/analysis/state_dict.py): beyond names missing, unexpected or differently shaped, it says
what they mean (a tensor-parallel shard, ZeRO-3 placeholders and their side, a resized vocabulary,
buffers only, a tied head dropped, an adapter-only save), with --model and from torch's error in a log.

Checkpoints: the real DeepSpeed baselines (tests/probe_checkpoints.py), and real torch.save files
of real modules made here, in DeepSpeed's layout (`latest`, `global_step1/mp_rank_00_model_states.pt`
holding `module`); --model files are real torch.save state dicts, or the baseline's own saved shapes."""

import json

import pytest

from tests import probe_checkpoints as pc
from triage.probe import checks
from triage.probe.context import ProbeContext
from triage.probe.result import CONFIRMED
from triage.probe.safe_pickle import read_shard
from triage.probe.target import from_args

torch = pytest.importorskip("torch")
nn = torch.nn


def probe(root, log=None, **target):
    ctx = ProbeContext.for_path(str(root), from_args(None, None, None, log, **target))
    return checks.run(ctx, ["model"])["model"]


def saved_model(path, module_or_state) -> str:
    state = module_or_state.state_dict() if isinstance(module_or_state, nn.Module) else module_or_state
    torch.save(state, path)
    return str(path)


def checkpoint(root, state: dict):
    """A real torch.save of a module state in the layout DeepSpeed saves one (no engine run)."""
    (root / "global_step1").mkdir(parents=True)
    (root / "latest").write_text("global_step1")
    torch.save({"module": state}, root / "global_step1" / "mp_rank_00_model_states.pt")
    return root


def torch_error(load_into: nn.Module, state: dict, strict: bool = True) -> str:
    """The log of real torch's load_state_dict refusing `state`."""
    with pytest.raises(RuntimeError) as raised:
        load_into.load_state_dict(state, strict=strict)
    return ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
            f"RuntimeError: {raised.value}\n")


class TinyNet(nn.Module):
    """The baselines' model (corpus/workers/common.py TinyNet, hidden 128), its blocks optionally split as
    Megatron splits an MLP across `tp` ranks: column-parallel (output rows) and row-parallel (input columns) in turn."""

    def __init__(self, tp=1):
        super().__init__()
        split = 128 // tp
        self.blocks = nn.ModuleList([nn.Linear(128, split), nn.Linear(split, 128), nn.Linear(128, split),
                                     nn.Linear(split, 128)])
        self.head = nn.Linear(128, 8)


@pytest.mark.slow
def test_a_tensor_parallel_shard_against_the_checkpoint(tmp_path):
    result = probe(pc.scenario(pc.HEALTHY), model=saved_model(tmp_path / "tp2.pt", TinyNet(tp=2)))
    assert result.status == CONFIRMED
    assert result.signals == ["tp_ratio", "shapes_differ"]
    assert result.facts["tp_ratio"] == {"ratio": 2, "smaller": "model", "dims": [0, 1], "only": True}
    assert "tp_ratio: every differing shape is 2x smaller in the model" in result.evidence[0]


@pytest.mark.slow
def test_a_tensor_parallel_shard_from_torchs_error_in_the_log():
    """No --model: torch's error says the shapes; the checkpoint bears them out, the analysis reads the ratio."""
    log = torch_error(TinyNet(tp=4), TinyNet().state_dict())
    result = probe(pc.scenario(pc.HEALTHY), log)
    assert result.signals == ["shapes_differ", "tp_ratio"]
    assert any(e.startswith("tp_ratio: every differing shape is 4x smaller in the model") for e in result.evidence)


@pytest.mark.slow
def test_zero3_placeholders_on_the_model_side(tmp_path):
    """--model: the ZeRO-3 baseline's own saved module state, a partitioned model's placeholders (real DeepSpeed)."""
    zero3 = read_shard(str(sorted((pc.scenario(pc.ZERO3) / "global_step3").glob("*model_states.pt"))[0]))
    assert set(zero3.module_shapes.values()) == {(0,)}
    path = tmp_path / "partitioned.json"
    path.write_text(json.dumps({k: list(v) for k, v in zero3.module_shapes.items()}))
    result = probe(pc.scenario(pc.HEALTHY), model=str(path))
    assert result.signals == ["zero3_placeholder", "shapes_differ"]
    assert result.facts["zero3_placeholder"] == {"side": "model"}


class LM(nn.Module):
    """A causal LM's names (transformers' GPT-2: wte, a position_ids buffer, lm_head tied to wte)."""

    def __init__(self, vocab=32, persistent=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, 16)
        self.register_buffer("position_ids", torch.arange(8).expand((1, -1)), persistent=persistent)
        self.lm_head = nn.Linear(16, vocab, bias=False)
        self.lm_head.weight = self.wte.weight


def test_a_resized_vocabulary(tmp_path):
    root = checkpoint(tmp_path / "ckpt", LM(vocab=32).state_dict())
    result = probe(root, model=saved_model(tmp_path / "model.pt", LM(vocab=40)))
    assert result.signals == ["vocab_resized", "shapes_differ"]
    assert result.facts["vocab_resized"] == {"rows": [[32, 40]]}


def test_buffers_a_release_saved(tmp_path):
    root = checkpoint(tmp_path / "ckpt", LM(persistent=True).state_dict())
    result = probe(root, model=saved_model(tmp_path / "model.pt", LM(persistent=False)))
    assert result.signals == ["buffers_only", "unexpected_keys"]
    assert result.facts["buffers_only"]["side"] == "checkpoint"


def _without_head():
    return {k: v for k, v in LM().state_dict().items() if k != "lm_head.weight"}  # consolidated: one copy kept


def test_a_tied_head_dropped_when_consolidated(tmp_path):
    root = checkpoint(tmp_path / "ckpt", _without_head())
    result = probe(root, model=saved_model(tmp_path / "model.pt", LM()))
    assert result.signals == ["tied_head_missing", "missing_keys"]


def test_a_tied_head_dropped_from_torchs_error_in_the_log(tmp_path):
    root = checkpoint(tmp_path / "ckpt", _without_head())
    result = probe(root, torch_error(LM(), _without_head()))
    assert result.signals == ["missing_keys", "tied_head_missing"]


class LoraNet(nn.Module):
    """`base_model.model.` + a q_proj as peft's LoRA wraps it (base_layer frozen, lora_A / lora_B trained)."""

    def __init__(self):
        super().__init__()
        self.base_model = nn.Module()
        self.base_model.model = nn.Module()
        q = self.base_model.model.q_proj = nn.Module()
        q.base_layer = nn.Linear(16, 16)
        q.lora_A = nn.ModuleDict({"default": nn.Linear(16, 4, bias=False)})
        q.lora_B = nn.ModuleDict({"default": nn.Linear(4, 16, bias=False)})


def test_an_adapter_only_save_against_the_full_model(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {k: v for k, v in LoraNet().state_dict().items() if "lora_" in k})
    result = probe(root, model=saved_model(tmp_path / "model.pt", LoraNet()))
    assert result.signals == ["adapter_only", "missing_keys"]
    assert result.facts["adapter_only"]["names"] == ["base_model.model.q_proj.base_layer.bias",
                                                     "base_model.model.q_proj.base_layer.weight"]


# The rule each reading names, decided by the probe's result (triage/probe/verdict.py): confirmed by its
# own signal, refuted by a full --model comparison that found another one, and a model exactly as saved
# refutes them all (a healthy pair is never flagged).
NAMED = {"vocab_resized": ("model_mismatch", "DS-M007"), "buffers_only": ("version_incompatible", "DS-V005"),
         "tied_head_missing": ("partial_checkpoint", "DS-H005")}


def _compared(tmp_path, saved: dict, model: nn.Module):
    return probe(checkpoint(tmp_path / "ckpt", saved), model=saved_model(tmp_path / "model.pt", model))


@pytest.mark.parametrize("reading", sorted(NAMED))
def test_each_reading_confirms_its_rule_and_refutes_the_others(tmp_path, reading):
    from triage.probe.verdict import decide

    saved, model = {"vocab_resized": (LM(vocab=32).state_dict(), LM(vocab=40)),
                    "buffers_only": (LM(persistent=True).state_dict(), LM(persistent=False)),
                    "tied_head_missing": (_without_head(), LM())}[reading]
    result = _compared(tmp_path, saved, model)
    for signal, (category, rule) in NAMED.items():
        expected = CONFIRMED if signal == reading else "refuted"
        assert decide(category, rule, {"model": result}).status == expected, (reading, rule)


def test_a_model_as_saved_refutes_every_named_reading(tmp_path):
    from triage.probe.verdict import decide

    result = _compared(tmp_path, LM().state_dict(), LM())
    assert result.signals == []
    assert {rule: decide(category, rule, {"model": result}).status for category, rule in NAMED.values()} == \
        {rule: "refuted" for _, rule in NAMED.values()}


@pytest.mark.slow
def test_a_tensor_parallel_shard_confirms_the_degree_change(tmp_path):
    from triage.probe.verdict import decide

    result = probe(pc.scenario(pc.HEALTHY), model=saved_model(tmp_path / "tp2.pt", TinyNet(tp=2)))
    assert decide("parallelism_mismatch", "DS-P002", {"model": result}).status == CONFIRMED
    assert decide("parallelism_mismatch", "DS-P003", {"model": result}).status != CONFIRMED  # a pipeline change: not this
