"""Tests for triage.kb.sites against the real installed deepspeed/torch source (no mocks)."""
import ast
import os
import re
import subprocess
import sys
from functools import lru_cache

import pytest

from triage.kb import sites as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@lru_cache(maxsize=None)
def all_sites():
    return tuple(S.load_path_sites())


def roots():
    return {"deepspeed": S.package_dir("deepspeed"), "torch": S.package_dir("torch")}


def find(file, function=None, pattern=None, package="deepspeed"):
    out = [s for s in all_sites() if s.package == package and s.file == file]
    if function is not None:
        out = [s for s in out if s.function == function]
    if pattern is not None:
        out = [s for s in out if s.message is not None and re.search(pattern, s.message)]
    return out


def test_bare_assert_in_check_ckpt_list():
    hits = [s for s in find("runtime/state_dict_factory.py", "SDLoaderBase.check_ckpt_list")
            if s.code == "assert len(self.ckpt_list) > 0"]
    assert len(hits) == 1
    s = hits[0]
    assert s.kind == "assert" and s.exception == "AssertionError" and s.message is None
    # the mp_world_size assert next to it keeps its f-string message with placeholders
    mp = find("runtime/state_dict_factory.py", "SDLoaderBase.check_ckpt_list", r"is different from saved mp_world_size")
    assert mp and "{len(self.ckpt_list)}" in mp[0].message


def test_engine_load_path_has_reasonable_number_of_sites():
    eng = find("runtime/engine.py")
    assert 8 <= len(eng) <= 80, len(eng)
    funcs = {s.function for s in eng}
    assert {"DeepSpeedEngine.load_checkpoint", "DeepSpeedEngine._load_zero_checkpoint",
            "DeepSpeedEngine.load_module_state_dict"} <= funcs
    # save-path functions must not leak in
    assert not any("save" in f for f in funcs)
    dp = find("runtime/engine.py", "DeepSpeedEngine._load_zero_checkpoint", r"used a DP world size of")
    assert dp and dp[0].exception == "ZeRORuntimeException"
    assert "{self.loaded_checkpoint_dp_world_size}" in dp[0].message
    uc = find("runtime/engine.py", "DeepSpeedEngine.load_checkpoint", r"^Invalid for universal checkpoint")
    assert uc and uc[0].exception == "ValueError"


def test_engine_follows_calls_one_level():
    followed = [s for s in find("runtime/engine.py") if s.via is not None]
    assert any(s.function == "DeepSpeedEngine._get_zero_param_shapes"
               and s.via == "DeepSpeedEngine._load_zero_checkpoint" for s in followed)
    assert all(s.via is None for s in all_sites() if s.file != "runtime/engine.py")


def test_zero_to_fp32_expected_files_raise():
    hits = find("utils/zero_to_fp32.py", "parse_optim_states", r"^Expected \{world_size\} of '\*_optim_states\.pt'")
    assert len(hits) == 1 and hits[0].exception == "ValueError"
    assert "but found {total_files} files" in hits[0].message
    msgs = {s.message for s in find("utils/zero_to_fp32.py")}
    assert "Unable to find 'latest' file at {latest_path}" in msgs
    assert "unknown zero stage {zero_stage}" in msgs
    assert "can't find model states file at '{file}'" in msgs


def test_zero_optimizer_version_and_stage_sites():
    v = find("runtime/zero/stage_1_and_2.py", "DeepSpeedZeroOptimizer._load_global_state", r"Empty ds_version")
    assert v and v[0].kind == "assert"
    bf = find("runtime/bf16_optimizer.py", "BF16_Optimizer._load_legacy_checkpoint", r"Empty ds_version")
    assert bf
    z3 = find("runtime/zero/stage3.py", "DeepSpeedZeroOptimizer_Stage3.load_state_dict", r"elastic checkpointing")
    assert z3 and z3[0].exception == "NotImplementedError"


def test_torch_sites():
    mod = find("nn/modules/module.py", "Module.load_state_dict", r"^Error\(s\) in loading state_dict for \{\}",
               package="torch")
    assert mod and mod[0].exception == "RuntimeError"
    opt = find("optim/optimizer.py", "Optimizer.load_state_dict", r"doesn't match the size of optimizer's group",
               package="torch")
    assert opt and opt[0].exception == "ValueError"
    wo = [s for s in find("serialization.py", "load", package="torch") if "UnpicklingError" in s.exception]
    assert wo and wo[0].message == "_get_wo_message(str(e))"
    glob = find("_weights_only_unpickler.py", "Unpickler.load", r"^Unsupported global: GLOBAL \{full_path\}",
                package="torch")
    assert glob
    mmap = find("serialization.py", "load", r"^mmap can only be used with files saved with", package="torch")
    assert mmap


def test_every_site_line_holds_that_code():
    r = roots()
    cache = {}
    for s in all_sites():
        path = os.path.join(r[s.package], s.file)
        if path not in cache:
            with open(path, encoding="utf-8") as fh:
                src = fh.read()
            nodes = {}
            for n in ast.walk(ast.parse(src)):
                if isinstance(n, ast.Raise):
                    nodes.setdefault(n.lineno, set()).add("raise")
                elif isinstance(n, ast.Assert):
                    nodes.setdefault(n.lineno, set()).add("assert")
                elif isinstance(n, ast.Call):  # a logged or collected message; sys.exit("why")
                    nodes.setdefault(n.lineno, set()).update(("logged", "collected", "raise"))
            cache[path] = (src.splitlines(), nodes)
        lines, nodes = cache[path]
        assert lines[s.line - 1].strip() == s.code, s
        assert s.kind in nodes.get(s.line, ()), s
        code = {"raise": r"\b(raise|exit)\b", "assert": r"\bassert\b", "logged": r"\(",
                "collected": r"\.(append|insert)\("}[s.kind]
        assert re.search(code, s.code), s


def test_records_are_well_formed_and_deduplicated():
    keys = set()
    for s in all_sites():
        assert s.package in ("deepspeed", "torch")
        assert s.kind in ("raise", "assert", "logged", "collected")
        assert not s.file.startswith("/") and s.file.endswith(".py")
        if s.kind == "assert":
            assert s.exception == "AssertionError"
        key = (s.package, s.file, s.function, s.exception, s.message if s.message is not None else s.code)
        assert key not in keys, s
        keys.add(key)
    assert len(all_sites()) > 150


@pytest.mark.parametrize("package,glob,regex", S.SCOPES)
def test_every_scope_names_real_functions(package, glob, regex):
    import fnmatch
    root = roots()[package]
    quals = []
    for dirpath, _d, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
            if f.endswith(".py") and fnmatch.fnmatch(rel, glob) and rel.count("/") == glob.count("/"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    quals += [q for q, _ in S.functions(ast.parse(fh.read()))]
    assert quals, (package, glob)
    if regex is None:
        return
    assert any(re.fullmatch(regex, q) or re.fullmatch(regex, q.rsplit(".", 1)[-1]) for q in quals)
    # every literal name alternative in the regex must exist (catches functions renamed upstream);
    # a trailing "_\w+" family such as "_restore_\w+" only needs one member.
    body = regex.split("\\.", 1)[-1]
    for alt in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\\w\+)?", body):
        if alt == "w":
            continue
        bare = [q.rsplit(".", 1)[-1] for q in quals]
        if alt.endswith("\\w+"):
            assert any(b.startswith(alt[:-3]) for b in bare), (glob, alt)
        else:
            assert alt in bare, (glob, alt)


def test_explicit_paths_match_default_and_no_heavy_imports():
    r = roots()
    assert tuple(S.load_path_sites(r["deepspeed"], r["torch"])) == all_sites()
    code = ("import sys, triage.kb.sites as s; s.load_path_sites(); "
            "assert 'torch' not in sys.modules and 'deepspeed' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_main_prints_table(capsys):
    assert S.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(all_sites())
    assert any("SDLoaderBase.check_ckpt_list" in line for line in out)


def test_a_raise_its_own_try_catches_is_not_a_site(tmp_path):
    import textwrap

    from triage.kb.sites import _scan_file

    (tmp_path / "mod.py").write_text(textwrap.dedent("""\
        def load(f):
            try:
                if f.changed():
                    raise OSError          # caught just below: only a warning
                raise KeyError("kept")      # not caught by this try
            except OSError:
                warn("source changed")
            raise ValueError("escapes")
        """))
    sites = _scan_file("deepspeed", str(tmp_path), "mod.py", None, False)
    assert sorted(s.exception for s in sites) == ["KeyError", "ValueError"]


@pytest.mark.parametrize("package,glob,regex", __import__("triage.kb.projects", fromlist=["x"]).DEEPSPEED_INFERENCE)
def test_the_inference_loader_scopes_name_real_functions(package, glob, regex):
    test_every_scope_names_real_functions(package, glob, regex)


def test_a_message_logged_before_a_failure_or_collected_for_a_raise_is_a_site(tmp_path):
    """Issue 42, item 1: what Megatron prints before sys.exit(), what a library warns before it
    raises, and what torch collects into error_msgs for the raise that joins them."""
    import textwrap

    from triage.kb.sites import _scan_file

    (tmp_path / "mod.py").write_text(textwrap.dedent("""\
        import sys
        def load(args, error_msgs):
            if args.bad:
                print_rank_0(f"Unable to load optimizer from checkpoint {args.load}, exiting ...")
                sys.exit()
            if args.worse:
                logger.warning("the checkpoint is older than this release")
                raise ValueError("too old")
            logger.warning("only a warning: nothing fails after it")
            error_msgs.append(f"size mismatch for {args.key}")
            if error_msgs:
                raise RuntimeError("Error(s) in loading: " + "\\\\n".join(error_msgs))
            sys.exit("cannot go on")
        """))
    sites = {(s.kind, s.exception, s.message) for s in _scan_file("deepspeed", str(tmp_path), "mod.py", None, False)}
    assert sites == {
        ("logged", "SystemExit", "Unable to load optimizer from checkpoint {args.load}, exiting ..."),
        ("logged", "ValueError", "the checkpoint is older than this release"),
        ("raise", "ValueError", "too old"),
        ("collected", "RuntimeError", "size mismatch for {args.key}"),
        ("raise", "RuntimeError", "Error(s) in loading: {'\\\\n'.join(error_msgs)}"),
        ("raise", "SystemExit", "cannot go on"),
    }


def test_torch_error_msgs_are_collected_sites():
    size = find("nn/modules/module.py", "Module._load_from_state_dict", r"^size mismatch for \{key\}", package="torch")
    assert size and size[0].kind == "collected" and size[0].exception == "RuntimeError"
    missing = find("nn/modules/module.py", "Module.load_state_dict", r"^Missing key\(s\) in state_dict", package="torch")
    assert missing and missing[0].kind == "collected"
