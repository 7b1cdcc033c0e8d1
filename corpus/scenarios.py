"""The scenario table: one entry per corpus case (data only; see generate.py for the runner).

Entry keys: id, kind (failure|silent|negative|clean), category (expected root cause), layout
(baseline in layouts.py), scenario (prose), fault (what was injected), inject (faults.apply steps,
paths relative to the DeepSpeed save dir), run (load|base|train|negative|zero_to_fp32|
ds_to_universal|torch_load|cmd), args (load-time worker overrides, incl. nproc), flags, load_dir
(relative to the save dir), tag, user ("nobody"), env, pre (runs before the recorded one),
record_pre (the case log is the pre steps' output followed by the recorded run's, as one job
script's log would be), what (regex choosing the what_happened line), note.
"""
from corpus.layouts import LAYOUTS, TAG

T = TAG
S = []


def case(id, kind, category, layout, scenario, fault, **kw):
    S.append(dict(id=id, kind=kind, category=category, layout=layout, scenario=scenario, fault=fault, **kw))


def lay_text(name):
    d = LAYOUTS[name]
    if "stage" not in d:   # a framework layout without DeepSpeed
        return d["framework"]
    extra = "".join(f", {k} {d[k]}" for k in ("tp", "pipe") if d.get(k))
    text = f"ZeRO-{d['stage']}, dp {d.get('dp', 1)}{extra}, {d['precision']} saved"
    return f"{d['framework']}, {text}" if d.get("framework") else text


OPT = "zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
BOPT = "bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
MS = "mp_rank_00_model_states.pt"
Z3MS = "zero_pp_rank_{r}_mp_rank_00_model_states.pt"

# ---------------------------------------------------------------- ZeRO stage changed at load
for src, dst, dp, prec in [(3, 2, 2, "fp32"), (2, 3, 2, "fp32"), (1, 3, 1, "fp32"), (0, 2, 1, "fp32"),
                           (2, 1, 2, "fp32"), (2, 0, 1, "fp32"), (3, 2, 2, "bf16"), (3, 1, 1, "bf16")]:
    lay = f"z{src}-dp{dp}-{prec}"
    case(f"zero{src}-saved-stage{dst}-load-dp{dp}{'-bf16' if prec == 'bf16' else ''}", "failure",
         "zero_stage_mismatch", lay, f"{lay_text(lay)}; loaded with a stage-{dst} config",
         f"ds_config zero_optimization.stage changed {src} -> {dst} at load", args={"stage": dst})

# ---------------------------------------------------------------- data-parallel size changed
for st in (0, 1, 2, 3):
    for a, b in ((2, 1), (1, 2)):
        lay = f"z{st}-dp{a}-fp32"
        case(f"zero{st}-dp{a}-saved-load-dp{b}", "failure", "parallelism_mismatch", lay,
             f"{lay_text(lay)}; resumed on {b} rank(s)", f"data-parallel world size changed {a} -> {b}",
             args={"nproc": b})
for st in (1, 2, 3):
    lay = f"z{st}-dp2-fp32"
    case(f"zero{st}-dp2-saved-load-dp1-no-optim", "clean", "parallelism_mismatch", lay,
         f"{lay_text(lay)}; resumed on 1 rank with load_optimizer_states=False",
         "dp 2 -> 1, optimizer states not loaded (the documented workaround)", args={"nproc": 1},
         flags=["--no-load-optim"])
case("zero1-dp2-bf16-saved-load-dp1", "failure", "parallelism_mismatch", "z1-dp2-bf16",
     f"{lay_text('z1-dp2-bf16')}; resumed on 1 rank", "data-parallel world size changed 2 -> 1", args={"nproc": 1})
case("tp2-saved-load-tp1", "failure", "parallelism_mismatch", "tp2-z1-fp32",
     "tensor parallel 2 (mpu), ZeRO-1; loaded without mpu on 1 rank", "model-parallel size 2 -> 1",
     args={"nproc": 1, "tp": 0})
case("tp2-saved-load-dp2", "failure", "parallelism_mismatch", "tp2-z1-fp32",
     "tensor parallel 2 (mpu), ZeRO-1; loaded on 2 ranks as dp 2 without mpu", "tp 2 / dp 1 -> tp 1 / dp 2",
     args={"tp": 0})
case("pp2-saved-load-pp1", "failure", "parallelism_mismatch", "pp2-fp32",
     "PipelineModule, 2 stages; loaded with 1 pipeline stage on 1 rank", "pipeline stages 2 -> 1",
     args={"nproc": 1, "pipe": 1})
case("pp2-z1-saved-load-pp1", "failure", "parallelism_mismatch", "pp2-z1-fp32",
     "PipelineModule, 2 stages, ZeRO-1; loaded with 1 pipeline stage on 1 rank", "pipeline stages 2 -> 1",
     args={"nproc": 1, "pipe": 1})
case("pp2-saved-load-no-pipeline", "failure", "parallelism_mismatch", "pp2-fp32",
     "PipelineModule, 2 stages; loaded by a plain DeepSpeedEngine (no PipelineModule) on 1 rank",
     "pipeline checkpoint (layer_*-model_states.pt) loaded by a non-pipeline engine", args={"nproc": 1, "pipe": 0})
# A job script at DeepSpeed's default log level (WARNING: no engine configuration, no world size
# printed); `bash -x` echoes the launch command, the one line that says how many ranks load.
case("job-zero2-dp2-saved-load-dp1-default-log-level", "failure", "parallelism_mismatch", "z2-dp2-fp32",
     f"{lay_text('z2-dp2-fp32')}; a job script (bash -x) resumes it on 1 rank, DeepSpeed at its default log level",
     "data-parallel world size changed 2 -> 1; CORPUS_DS_LOG_LEVEL=warning", run="cmd",
     env={"CORPUS_DS_LOG_LEVEL": "warning"},
     argv=["bash", "-xc", "python -m torch.distributed.run --nproc_per_node=1 corpus/workers/load.py --stage 2 "
                          "--precision fp32 --load-dir {ckpt}"])

# ---------------------------------------------------------------- missing files / wrong paths
for id, lay, f in [("zero2-dp2-optim-shard-deleted", "z2-dp2-fp32", OPT.format(r=1)),
                  ("zero3-dp2-optim-shard-deleted", "z3-dp2-fp32", OPT.format(r=1)),
                  ("zero1-dp2-bf16-optim-shard-deleted", "z1-dp2-bf16", BOPT.format(r=1)),
                  ("zero2-dp2-model-states-deleted", "z2-dp2-fp32", MS),
                  ("zero3-dp2-model-states-deleted", "z3-dp2-fp32", Z3MS.format(r=1)),
                  ("zero0-dp1-model-states-deleted", "z0-dp1-fp32", MS),
                  # the same faults at the other precision and world size: their logs are the same
                  # text as a ZeRO stage change's (zero3-saved-stage*-bf16, zero0-saved-stage2-load-dp1)
                  ("zero2-dp2-bf16-model-states-deleted", "z2-dp2-bf16", MS),
                  ("zero1-dp1-bf16-model-states-deleted", "z1-dp1-bf16", MS),
                  ("zero2-dp1-optim-shard-deleted", "z2-dp1-fp32", OPT.format(r=0))]:
    case(id, "failure", "missing_file", lay, lay_text(lay), f"deleted {T}/{f}", inject=[("delete", f"{T}/{f}")])
case("zero2-dp1-latest-deleted", "silent", "missing_file", "z2-dp1-fp32", lay_text("z2-dp1-fp32"),
     "deleted the `latest` file; load_checkpoint(tag=None)", inject=[("delete", "latest")])
case("zero3-dp2-latest-deleted", "silent", "missing_file", "z3-dp2-fp32", lay_text("z3-dp2-fp32"),
     "deleted the `latest` file; load_checkpoint(tag=None)", inject=[("delete", "latest")])
case("zero2-dp1-latest-points-to-missing-tag", "failure", "missing_file", "z2-dp1-fp32", lay_text("z2-dp1-fp32"),
     "`latest` rewritten to 'global_step99' (no such tag dir)", inject=[("write_file", "latest", "global_step99")])
case("zero2-dp1-tag-dir-deleted-explicit-tag", "failure", "missing_file", "z2-dp1-fp32", lay_text("z2-dp1-fp32"),
     f"deleted the {T}/ directory; load_checkpoint(tag='{T}')", inject=[("delete", T)], tag=T)
case("zero2-dp1-load-parent-dir", "silent", "missing_file", "z2-dp1-fp32", lay_text("z2-dp1-fp32"),
     "--load dir is the parent of the checkpoint dir", load_dir="..")
case("zero2-dp1-load-global-step-dir", "silent", "missing_file", "z2-dp1-fp32", lay_text("z2-dp1-fp32"),
     f"--load dir is the tag dir .../{T} itself", load_dir=T)
case("zero2-dp1-load-global-step-dir-explicit-tag", "failure", "missing_file", "z2-dp1-fp32",
     lay_text("z2-dp1-fp32"), f"--load dir is the tag dir .../{T} and tag='{T}' passed", load_dir=T, tag=T)
case("hf-zero2-dp2-load-output-dir", "silent", "missing_file", "hf-z2-dp2-fp32",
     "HF Trainer nesting out/checkpoint-3/global_step3, ZeRO-2 dp 2", "loaded from the Trainer output_dir (out/)",
     load_dir="..")
case("hf-zero2-dp2-load-global-step-dir", "silent", "missing_file", "hf-z2-dp2-fp32",
     "HF Trainer nesting out/checkpoint-3/global_step3, ZeRO-2 dp 2", "loaded from out/checkpoint-3/global_step3",
     load_dir=T)
case("hf-zero3-dp2-bf16-optim-shard-deleted", "failure", "missing_file", "hf-z3-dp2-bf16",
     "HF Trainer nesting, ZeRO-3 dp 2 bf16", f"deleted checkpoint-3/{T}/{BOPT.format(r=0)}",
     inject=[("delete", f"{T}/{BOPT.format(r=0)}")])
case("pp2-layer-file-deleted", "failure", "missing_file", "pp2-fp32", "PipelineModule, 2 stages",
     f"deleted {T}/layer_06-model_states.pt", inject=[("delete", f"{T}/layer_06-model_states.pt")])
case("tp2-mp-rank-01-deleted", "failure", "missing_file", "tp2-z1-fp32", "tensor parallel 2 (mpu), ZeRO-1",
     f"deleted {T}/mp_rank_01_model_states.pt", inject=[("delete", f"{T}/mp_rank_01_model_states.pt")])

# ---------------------------------------------------------------- interrupted save
case("killed-save-zero2-load-latest", "silent", "partial_checkpoint", "killed-save-z2-dp1-fp32",
     "ZeRO-2 dp 1; the saver was SIGKILLed after writing the model states file",
     "save interrupted (worker SIGKILLed after its first file; simulates preemption): no optim shard, no `latest`")
case("killed-save-zero2-load-explicit-tag", "failure", "partial_checkpoint", "killed-save-z2-dp1-fp32",
     "ZeRO-2 dp 1; the saver was SIGKILLed after writing the model states file",
     "save interrupted (simulated preemption); resumed with explicit tag", tag=T)

from corpus.scenarios_more import more, OBSERVED  # noqa: E402
from corpus.scenarios_frameworks import frameworks  # noqa: E402

more(case, lay_text, OPT, BOPT, MS, Z3MS)
frameworks(case, lay_text)
for _s in S:   # outcomes that differed from the expectation when the fault was injected
    _s.update(OBSERVED.get(_s["id"], {}))
SCENARIOS = S
