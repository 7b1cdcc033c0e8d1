"""The seeds' quick-reference rows from one line (issue 41, item 4): every row of the tables in
../shared/seeds/000 section 5 and 001 section 4, and 000's worked case (section 6), pasted as a
user would paste it, in our own values, answers the cause the seeds name.

Each line is a library's real message template with our values, and says which. The torch and
Python ones are made here for real (`test_the_lines_are_real_output` raises each again and
compares); DeepSpeed's are its templates as `corpus/` runs printed them, with other numbers.
Where the row itself names two causes (000's worked case: "the error says missing, the cause is
the config"), the seeds' cause is first and the other in the top 3, and the deciding question
(triage/evidence/question.py, the seeds' order path -> permission -> integrity -> version ->
config) names the listing that tells them apart.
"""

import pytest

from tests.test_error_facts import raised as traced
from triage.classify.classifier import classify

CONFIG = {"config_mismatch", "zero_stage_mismatch", "parallelism_mismatch"}  # the seeds' 配置错误

# (row, the line, where its text comes from, the seeds' causes (any of them first), the other cause
# the row itself names or None)
ROWS = [
    # 000 section 5
    ("000 version: unexpected key after an upgrade",
     'RuntimeError: Error(s) in loading state_dict for BertForPreTraining:\n'
     '\tUnexpected key(s) in state_dict: "bert.embeddings.position_ids". ',
     "torch Module.load_state_dict (a BERT position_ids buffer saved by one release, not registered by "
     "the other)", {"version_incompatible"}, None),
    ("000 version: a class pickled by another release",
     "AttributeError: Can't get attribute 'LossScaler' on <module 'deepspeed.runtime.fp16.loss_scaler' from "
     "'/opt/venv/lib/python3.11/site-packages/deepspeed/runtime/fp16/loss_scaler.py'>",
     "Python's unpickler (find_class) under torch.load", {"version_incompatible"}, None),
    ("000 config: shard count differs, some ranks fail",
     "deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used a DP world size of 4 "
     "but the current world size is 2. Automatic adjustment of ZeRO's optimizer state partitioning with a new "
     "world size is not currently supported.",
     "DeepSpeedEngine._load_zero_checkpoint (deepspeed/runtime/engine.py)", CONFIG, None),
    ("000 missing file: a model-states shard",
     "FileNotFoundError: [Errno 2] No such file or directory: "
     "'/data/ckpt/global_step1000/mp_rank_00_model_states.pt'",
     "Python's open() under torch.load", {"missing_file"}, None),
    ("000 permission",
     "PermissionError: [Errno 13] Permission denied: '/data/ckpt/global_step1000/mp_rank_00_model_states.pt'",
     "Python's open() under torch.load", {"permission_denied"}, None),
    # 000 section 6, the worked case: a ZeRO-3 save loaded with stage 2
    ("000 worked case",
     'RuntimeError: Error(s) in loading state_dict for DeepSpeedEngine:\n'
     '\tMissing key(s) in state_dict: "optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg_sq", '
     '"optimizer.param_groups.0.lr". ',
     "torch Module.load_state_dict on a module named DeepSpeedEngine", {"zero_stage_mismatch"},
     "partial_checkpoint"),
    # 001 section 4
    ("001 KeyError: missing key(s)",
     'RuntimeError: Error(s) in loading state_dict for GPT2LMHeadModel:\n'
     '\tMissing key(s) in state_dict: "transformer.h.2.mlp.c_fc.weight", "transformer.h.2.mlp.c_fc.bias". ',
     "torch Module.load_state_dict (a layer the checkpoint lacks)", {"model_mismatch"}, None),
    ("001 size mismatch for weight: the parallel degree",
     "size mismatch for weight: copying a param with shape torch.Size([512, 4096]) from checkpoint, "
     "the shape in current model is torch.Size([2048, 4096]).",
     "torch Module._load_from_state_dict (a column-parallel shard of degree 4 loaded at degree 1)",
     {"parallelism_mismatch"}, None),
    ("001 size mismatch for weight: the parallel degree, with the header",
     "RuntimeError: Error(s) in loading state_dict for ColumnParallelLinear:\n"
     "\tsize mismatch for weight: copying a param with shape torch.Size([512, 4096]) from checkpoint, "
     "the shape in current model is torch.Size([2048, 4096]).",
     "torch Module.load_state_dict", {"parallelism_mismatch"}, None),
    ("001 size mismatch for weight: the ZeRO stage",
     "size mismatch for weight: copying a param with shape torch.Size([0]) from checkpoint, "
     "the shape in current model is torch.Size([2048, 4096]).",
     "torch Module._load_from_state_dict (a ZeRO-3 placeholder saved without gathering)",
     {"zero_stage_mismatch"}, None),
    ("001 FileNotFoundError: latest",
     "FileNotFoundError: [Errno 2] No such file or directory: '/data/ckpt/latest'",
     "Python's open()", {"missing_file"}, None),
    ("001 unpickling / EOFError: bare",
     "EOFError", "torch.load(weights_only=True) of a 0-byte file", {"corrupt_file"}, None),
    ("001 unpickling / EOFError: ran out of input",
     "EOFError: Ran out of input", "torch.load(weights_only=False) of a 0-byte file", {"corrupt_file"}, None),
    ("001 unpickling / EOFError: truncated",
     "_pickle.UnpicklingError: pickle data was truncated",
     "torch.load(weights_only=False) of a legacy-format file cut to 100 bytes", {"corrupt_file"}, None),
    ("001 optimizer state load failed",
     "ValueError: loaded state dict contains a parameter group that doesn't match the size of optimizer's group",
     "torch Optimizer.load_state_dict", {"optimizer_mismatch"}, None),
]


@pytest.mark.parametrize("row, line, source, causes, other", ROWS, ids=[r[0] for r in ROWS])
def test_a_seed_row_pasted_as_one_line_answers_the_seeds_cause(row, line, source, causes, other):
    found = [h.rule.category for h in classify(line).hypotheses]
    assert found and found[0] in causes, (row, found)
    if other is not None:
        from triage.evidence.question import deciding

        assert other in found[:3], (row, found)
        question = deciding(found[:3])
        assert question is not None and question.kind == "listing", (row, found, question)


def test_the_lines_are_real_output():
    """The torch and Python lines above are what the libraries raise, made here."""
    torch = pytest.importorskip("torch")
    import io
    import pickle

    from torch import nn

    def raised(call) -> str:
        """The real type and message as the last line(s) of a traceback: `EOFError` alone when bare."""
        return traced(call).split("\n", 2)[2].removesuffix(": ")

    class ColumnParallelLinear(nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(rows, 4096))

    lines = {row: line for row, line, *_ in ROWS}
    made = raised(lambda: ColumnParallelLinear(2048).load_state_dict(ColumnParallelLinear(512).state_dict()))
    assert made == lines["001 size mismatch for weight: the parallel degree, with the header"]
    assert made.endswith("\t" + lines["001 size mismatch for weight: the parallel degree"])
    placeholder = raised(lambda: ColumnParallelLinear(2048).load_state_dict({"weight": torch.zeros(0)}))
    assert placeholder.endswith("\t" + lines["001 size mismatch for weight: the ZeRO stage"])

    def model(**buffers):
        module = nn.Module()
        for name, shape in buffers.items():
            module.register_buffer(name, torch.zeros(shape))
        return module

    class DeepSpeedEngine(nn.Module):
        def __init__(self, optimizer):
            super().__init__()
            self.module = nn.Linear(4, 4)
            if optimizer:
                self.optimizer = nn.Module()
                self.optimizer.state = nn.ModuleDict({"0": model(exp_avg=4, exp_avg_sq=4)})
                self.optimizer.param_groups = nn.ModuleDict({"0": model(lr=())})

    assert raised(lambda: DeepSpeedEngine(True).load_state_dict(DeepSpeedEngine(False).state_dict())) \
        == lines["000 worked case"]

    class BertForPreTraining(nn.Module):
        def __init__(self, persistent):
            super().__init__()
            self.bert = nn.Module()
            self.bert.embeddings = nn.Module()
            self.bert.embeddings.register_buffer("position_ids", torch.arange(8)[None], persistent=persistent)

    assert raised(lambda: BertForPreTraining(False).load_state_dict(BertForPreTraining(True).state_dict())) \
        == lines["000 version: unexpected key after an upgrade"]

    class GPT2LMHeadModel(nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.transformer = nn.Module()
            self.transformer.h = nn.ModuleList(nn.Module() for _ in range(layers))
            for block in self.transformer.h:
                block.mlp = nn.Module()
                block.mlp.c_fc = nn.Linear(4, 16)

    assert raised(lambda: GPT2LMHeadModel(3).load_state_dict(GPT2LMHeadModel(2).state_dict())) \
        == lines["001 KeyError: missing key(s)"]

    weights = nn.Linear(4, 4)
    sgd = torch.optim.SGD(weights.parameters())
    other = torch.optim.SGD([weights.weight])
    assert raised(lambda: sgd.load_state_dict(other.state_dict())) == lines["001 optimizer state load failed"]

    for path in ("/data/ckpt/latest", "/data/ckpt/global_step1000/mp_rank_00_model_states.pt"):
        assert raised(lambda: torch.load(path)) in (lines["001 FileNotFoundError: latest"],
                                                    lines["000 missing file: a model-states shard"])
    empty = io.BytesIO(b"")
    assert raised(lambda: torch.load(io.BytesIO(b""), weights_only=True)) == lines["001 unpickling / EOFError: bare"]
    assert raised(lambda: torch.load(empty, weights_only=False)) == lines["001 unpickling / EOFError: ran out of input"]
    legacy = io.BytesIO()
    torch.save({"w": torch.zeros(1000)}, legacy, _use_new_zipfile_serialization=False)
    assert raised(lambda: torch.load(io.BytesIO(legacy.getvalue()[:100]), weights_only=False)) \
        == lines["001 unpickling / EOFError: truncated"]
    assert "Can't get attribute 'LossScaler' on <module 'deepspeed.runtime.fp16.loss_scaler'" in \
        lines["000 version: a class pickled by another release"]
    pickled = pickle.dumps(_Moved())
    assert raised(lambda: pickle.loads(pickled.replace(b"_Moved", b"_Gone_"))).startswith(
        "AttributeError: Can't get attribute '_Gone_' on <module 'tests.test_seed_rows'")


class _Moved:
    """A class pickled here and looked up under a name its module no longer has."""
