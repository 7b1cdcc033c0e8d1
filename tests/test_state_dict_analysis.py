"""The one analysis of a state-dict difference (triage/analysis/state_dict.py), on REAL torch errors:
each case builds two small modules with the names the real libraries use, has real torch load one's
state dict into the other, and reads the error torch raised as a log would hold it (through the
classifier's own fact extraction), then checks the signal that case is about, and only it."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from triage.analysis.state_dict import SIGNALS, Difference, analyse, names  # noqa: E402
from triage.logs.parse import parse  # noqa: E402


class Net(nn.Module):
    def __init__(self, width=8, out=4):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, 16), nn.Linear(16, out)

    def forward(self, x):
        return self.fc2(self.fc1(x))


class Holder(nn.Module):
    """`holder.<attr>.<...>` = net: a wrapper whose attribute path is the prefix."""

    def __init__(self, net, *path):
        super().__init__()
        inner = net
        for attr in reversed(path[1:]):
            shell = nn.Module()
            setattr(shell, attr, inner)
            inner = shell
        setattr(self, path[0], inner)


def torch_error(load_into: nn.Module, state: dict) -> str:
    """The RuntimeError real torch raises, as a traceback's last line and its tab-indented body."""
    with pytest.raises(RuntimeError) as raised:
        load_into.load_state_dict(state)
    return "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nRuntimeError: " + str(raised.value)


def difference(log: str) -> Difference:
    incident, _ = parse(log)
    return Difference(missing=incident.missing_keys, unexpected=incident.unexpected_keys,
                      sizes={s["param"]: (s["checkpoint"], s["model"]) for s in incident.size_mismatches})


def signals_of(load_into, state) -> dict:
    return {s.name: s for s in analyse(difference(torch_error(load_into, state)))}


def test_every_signal_is_documented():
    seen = set()
    for case in CASES.values():
        seen |= set(case())
    assert seen <= set(SIGNALS)


def _prefixed(*path):
    return lambda: signals_of(Net(), Holder(Net(), *path).state_dict())


CASES = {
    "prefix_module": _prefixed("module"),
    "prefix_peft": _prefixed("base_model", "model"),
    "prefix_model": _prefixed("model"),
    "prefix_orig_mod": lambda: signals_of(Net(), torch.compile(Net()).state_dict()),
}


@pytest.mark.parametrize("signal", ["prefix_module", "prefix_peft", "prefix_model", "prefix_orig_mod"])
def test_a_wrapper_prefix_on_the_checkpoint_side_only(signal):
    found = CASES[signal]()
    assert set(found) == {signal}
    assert found[signal].facts["side"] == "checkpoint"


def test_a_wrapper_prefix_on_the_model_side():
    found = signals_of(Holder(Net(), "module"), Net().state_dict())
    assert set(found) == {"prefix_module"} and found["prefix_module"].facts["side"] == "model"


class Renamed(nn.Module):
    def __init__(self, attr):
        super().__init__()
        setattr(self, attr, Net())
        self.head = nn.Linear(4, 2)


def test_a_module_moved_under_a_new_name():
    found = signals_of(Renamed("trunk"), Renamed("blocks").state_dict())
    assert set(found) == {"renamed_module"}
    assert found["renamed_module"].facts == {"checkpoint": "blocks", "model": "trunk", "tensors": 4}


class Lora(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(8, 8)
        self.q_proj.lora_A = nn.ModuleDict({"default": nn.Linear(8, 2, bias=False)})
        self.q_proj.lora_B = nn.ModuleDict({"default": nn.Linear(2, 8, bias=False)})


def test_adapter_weights_in_the_checkpoint_only():
    plain = nn.Module()
    plain.q_proj = nn.Linear(8, 8)
    found = signals_of(plain, Lora().state_dict())
    assert set(found) == {"adapter_keys"} and found["adapter_keys"].facts["side"] == "checkpoint"
    assert "q_proj.lora_A.default.weight" in found["adapter_keys"].facts["names"]


def test_optimizer_state_where_module_weights_were_expected():
    net = Net()
    opt = torch.optim.Adam(net.parameters())
    net(torch.zeros(1, 8)).sum().backward()
    opt.step()
    checkpoint = {**net.state_dict(), **{f"optimizer.state.{k}.exp_avg": v["exp_avg"] for k, v in opt.state_dict()["state"].items()}}
    found = signals_of(Net(), checkpoint)
    assert set(found) == {"engine_keys"} and found["engine_keys"].facts["side"] == "checkpoint"


class Embeddings(nn.Module):
    def __init__(self, persistent):
        super().__init__()
        self.word_embeddings = nn.Embedding(16, 4)
        self.register_buffer("position_ids", torch.arange(8).expand((1, -1)), persistent=persistent)


def test_a_buffer_a_release_stopped_saving():
    found = signals_of(Embeddings(persistent=False), Embeddings(persistent=True).state_dict())
    assert set(found) == {"buffers_only"} and found["buffers_only"].facts["side"] == "checkpoint"


class TiedLM(nn.Module):
    def __init__(self, vocab=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, 8)
        self.lm_head = nn.Linear(8, vocab, bias=False)
        self.lm_head.weight = self.wte.weight


def test_a_tied_head_dropped_when_the_weights_were_consolidated():
    state = {k: v for k, v in TiedLM().state_dict().items() if k != "lm_head.weight"}
    assert set(signals_of(TiedLM(), state)) == {"tied_head_missing"}


def test_a_resized_vocabulary():
    found = signals_of(TiedLM(vocab=40), TiedLM(vocab=32).state_dict())
    assert set(found) == {"vocab_resized"} and found["vocab_resized"].facts["rows"] == [[32, 40]]


def test_zero3_placeholders_saved_in_the_checkpoint():
    state = {k: torch.empty(0) for k in Net().state_dict()}  # what a ZeRO-3 save without gathering holds
    found = signals_of(Net(), state)
    assert set(found) == {"zero3_placeholder"} and found["zero3_placeholder"].facts["side"] == "checkpoint"


class Mlp(nn.Module):
    """Megatron's MLP under tensor parallelism: fc1 column-parallel (rows split), fc2 row-parallel."""

    def __init__(self, tp):
        super().__init__()
        self.fc1 = nn.Linear(64, 256 // tp, bias=False)
        self.fc2 = nn.Linear(256 // tp, 64, bias=False)


@pytest.mark.parametrize("tp", [2, 4, 16])
def test_one_integer_ratio_along_one_dimension_is_a_tensor_parallel_degree(tp):
    found = signals_of(Mlp(1), Mlp(tp).state_dict())
    assert set(found) == {"tp_ratio"}
    assert found["tp_ratio"].facts == {"ratio": tp, "smaller": "checkpoint", "dims": [0, 1], "only": True}


def test_shapes_with_no_common_ratio_are_an_architecture_change():
    other = Net()
    other.fc1 = nn.Linear(8, 24)  # 16 -> 24 rows: 1.5x, and fc2's columns with it
    assert set(signals_of(other, Net().state_dict())) == {"shapes_unpatterned"}


def test_names_nothing_explains():
    other = nn.Module()
    other.encoder = nn.Linear(8, 8)
    assert set(signals_of(other, Net().state_dict())) == {"names_differ"}


def test_a_flat_partition_sized_for_another_data_parallel_world():
    with pytest.raises(RuntimeError) as raised:  # ZeRO's copy_ of a saved fp32 partition into the load's
        torch.zeros(2048).copy_(torch.zeros(1024))
    import re

    a, b = map(int, re.search(r"tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", str(raised.value)).groups())
    found = {s.name: s for s in analyse(Difference(partition=(b, a)))}
    assert set(found) == {"dp_ratio"} and found["dp_ratio"].facts["ratio"] == 2
    assert names(analyse(Difference(partition=(1000, 1537)))) == {"partition_unpatterned"}


class LoraLinear(nn.Module):
    """A layer as peft's LoRA wraps it: the frozen `base_layer`, the trained `lora_A` [r, in] and `lora_B` [out, r]."""

    def __init__(self, n_in, n_out, r=4):
        super().__init__()
        self.base_layer = nn.Linear(n_in, n_out)
        self.lora_A = nn.ModuleDict({"default": nn.Linear(n_in, r, bias=False)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(r, n_out, bias=False)})


class PeftNet(nn.Module):
    """`base_model.model.<net>` with q_proj adapted: the names peft gives a LoRA model."""

    def __init__(self, hidden=64, r=4):
        super().__init__()
        net = nn.Module()
        net.embed_tokens = nn.Embedding(32, hidden)
        net.q_proj = LoraLinear(hidden, hidden, r)
        self.base_model = Holder(net, "model")


def test_an_adapter_only_checkpoint_loaded_strictly():
    """exclude_frozen_parameters=True / an adapter-only save: the trained lora_ weights alone."""
    adapters = {k: v for k, v in PeftNet().state_dict().items() if "lora_" in k}
    found = signals_of(PeftNet(), adapters)
    assert set(found) == {"adapter_only"}
    assert found["adapter_only"].facts["names"] == ["base_model.model.embed_tokens.weight",
                                                    "base_model.model.q_proj.base_layer.bias",
                                                    "base_model.model.q_proj.base_layer.weight"]


def test_missing_adapter_weights_are_not_an_adapter_only_save():
    """The opposite: a base model's weights loaded into the LoRA model lack the adapters themselves."""
    base = {k: v for k, v in PeftNet().state_dict().items() if "lora_" not in k}
    assert "adapter_only" not in signals_of(PeftNet(), base)


def test_the_checkpoints_own_names_decide_an_adapter_only_save():
    """With the checkpoint's names in hand (the probe), they decide, not the prefix of torch's list."""
    adapters = [k for k in PeftNet().state_dict() if "lora_" in k]
    missing = ["base_model.model.q_proj.base_layer.weight"]
    assert names(analyse(Difference(missing=missing, saved=adapters))) == {"adapter_only"}
    assert "adapter_only" not in names(analyse(Difference(missing=missing, saved=adapters + ["head.weight"])))


def test_an_adapter_trained_on_a_base_of_other_sizes():
    """peft copies an adapter in with load_state_dict(strict=False): only shape differences raise."""
    with pytest.raises(RuntimeError) as raised:
        PeftNet(hidden=96).load_state_dict({k: v for k, v in PeftNet(hidden=64).state_dict().items() if "lora_" in k},
                                           strict=False)
    log = "RuntimeError: " + str(raised.value)
    assert "size mismatch for base_model.model.q_proj.lora_A.default.weight" in log
    found = {s.name: s for s in analyse(difference(log))}
    assert set(found) == {"adapter_shapes"} and found["adapter_shapes"].qualifier == "base"
    assert found["adapter_shapes"].facts["features"] == [(64, 96)]


def test_an_adapter_of_another_rank_is_not_a_tensor_parallel_degree():
    """r 4 saved, 8 built: lora_A 2x along dimension 0 and lora_B along 1, a ratio a TP split also shows."""
    with pytest.raises(RuntimeError) as raised:
        PeftNet(r=8).load_state_dict({k: v for k, v in PeftNet(r=4).state_dict().items() if "lora_" in k},
                                     strict=False)
    found = {s.name: s for s in analyse(difference("RuntimeError: " + str(raised.value)))}
    assert set(found) == {"adapter_shapes"} and found["adapter_shapes"].qualifier == "rank"
    assert found["adapter_shapes"].facts["ranks"] == [(4, 8)]
