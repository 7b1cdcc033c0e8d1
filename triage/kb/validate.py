"""Check rule files: the JSON Schema, then what a schema cannot say.

Every problem reads `path:line: what is wrong. What to do.` (as semgrep and
pySigma do), so a rule author fixes it without reading this code.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

from triage.kb.source import RuleSource
from triage.kb.verify_steps import checkpoint_tool
from triage.repair.registry import ACTIONS as REPAIR_ACTIONS

TEMPLATE_FIELDS = {"ckpt", "tag", "config"}
# A verification command must not change anything: the on-call engineer will
# paste it on the host that holds the only copy of the checkpoint.
# a command that unpickles with code execution allowed: must carry runs_checkpoint_code: true
_RUNS_PICKLE = re.compile(r"weights_only\s*=\s*False")
_WRITES = re.compile(
    r"(?:^|[\s;&|(])(?:rm|mv|cp|chmod|chown|chgrp|dd|truncate|tee|touch|mkdir|rmdir|ln|shred|install|rsync|sed\s+-i|perl\s+-i)\b"
    r"|(?<![0-9&])>(?!&)|\btorch\.save\b|\.unlink\(|open\([^)]*['\"][wa]"
)
_CONDITION_REGEX_KEYS = ("exception", "message", "line", "run_line")
# A reference's `function`: a dotted name (Class.method, function), or an fnmatch glob
# over one (DeepSpeedZeroOptimizer.*, merge_*_slices, _load_[a-z]*); triage.kb.coverage
# matches it against the qualified and the bare name of each load-path raise site.
_FUNCTION_REF = re.compile(r"[A-Za-z_*?\[][A-Za-z0-9_.*?\[\]!-]*")


def schema_problems(source: RuleSource, validator) -> list[str]:
    problems = []
    for error in sorted(validator.iter_errors(source.data), key=lambda e: list(map(str, e.absolute_path))):
        line = source.line_of(error.absolute_path)
        problems.append(f"{source.path}:{line}: {_describe(error)}")
    return problems


def _describe(error) -> str:
    where = "/".join(map(str, error.absolute_path)) or "the rule"
    kind = error.validator
    if kind == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        field = missing[0] if missing else error.message
        if field == "releases":
            return (f"{where} lacks 'releases', which a known_bug rule needs. Add the affected releases and the "
                    "fixing release per package, read from the releases' sources (rules/README.md, `releases`)")
        return f"{where} lacks '{field}'. Add it (rules/README.md lists every field)"
    if kind in ("additionalProperties", "unevaluatedProperties"):
        known = ", ".join(sorted(error.schema.get("properties", {})))
        return f"{where}: {error.message}. Remove it or fix its spelling (known: {known})"
    if kind == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return f"{where}: {error.instance!r} is not allowed. Use one of: {allowed}"
    if kind == "pattern":
        return f"{where}: {error.instance!r} does not match {error.validator_value}. {error.schema.get('description', '')}".rstrip(". ")
    if kind in ("oneOf", "anyOf"):
        return f"{where}: {error.message[:160]}. Give exactly one of the alternatives the schema lists"
    hint = error.schema.get("description") if isinstance(error.schema, dict) else None
    return f"{where}: {error.message[:200]}" + (f". Expected: {hint}" if hint else "")


def example_file_problems(source: RuleSource, repo_root: Path) -> list[str]:
    """Example files that are not there: checked by `rules lint` and the suite, never when
    classifying (a copy of the rules may travel without the corpus)."""
    return [f"{source.path}:{source.line_of(('examples', index, 'file'))}: example file {example['file']} does not "
            "exist. Give a path from the repository root"
            for index, example in enumerate(source.data["examples"])
            if "file" in example and not (repo_root / example["file"]).is_file()]


def semantic_problems(source: RuleSource, repo_root: Path) -> list[str]:
    """Checks on one schema-valid rule."""
    rule = source.data
    out: list[str] = []

    def report(json_path, text):
        out.append(f"{source.path}:{source.line_of(json_path)}: {text}")

    stem = Path(source.path).stem
    if not stem.startswith(rule["id"]):
        report(("id",), f"id {rule['id']} does not match the file name {stem}. Name the file {rule['id']}-<slug>.yaml")
    _check_regexes(rule, report)
    _check_facts(rule, report)
    for index, check in enumerate(rule["verify"]):
        command = check["command"]
        where = ("verify", index, "command")
        if _RUNS_PICKLE.search(command) and not check.get("runs_checkpoint_code"):
            report(where, "the command calls torch.load(weights_only=False), which runs the file's pickled code. "
                   "Prefer weights_only=True (with torch.serialization.safe_globals for DeepSpeed's classes), or "
                   "mark it runs_checkpoint_code: true so it is shown with a warning, after the safe commands")
        if _WRITES.search(command):
            report(where, f"verification command may write: {command!r}. Verification must be read-only; move it to fix")
        tool = checkpoint_tool(command)
        if tool:
            report(where, f"verification command {command!r} {tool}. Pasted on a hostile checkpoint it runs the "
                   "checkpoint's own commands (a git alias, hook or core.fsmonitor; a Makefile; a package script), "
                   "and -c overrides cannot cover every setting. Read the files instead (head -c, ls, "
                   "`ds-triage probe {ckpt}/{tag}`), or move it to fix")
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(command) if f is not None}
        except ValueError as exc:
            report(where, f"bad template {command!r}: {exc}. Write braces as {{{{ }}}}")
            continue
        unknown = fields - TEMPLATE_FIELDS
        if unknown:
            report(where, f"unknown placeholder(s) {sorted(unknown)}. Use {sorted(TEMPLATE_FIELDS)}")
    for index, reference in enumerate(rule["references"]):
        function = reference.get("function")
        if function is not None and not _FUNCTION_REF.fullmatch(function):
            report(("references", index, "function"),
                   f"function {function!r} is not a function name or glob. Write Class.method or function, "
                   "without parentheses or arguments; globs * ? [...] are allowed (DeepSpeedZeroOptimizer.*)")
        if function is not None and "source" not in reference:
            report(("references", index, "function"),
                   "function without source. Add the file that defines it: source: deepspeed/runtime/engine.py")
    for index, action in enumerate(rule.get("repairs", [])):
        if action not in REPAIR_ACTIONS:
            report(("repairs", index), f"repair action {action!r} does not exist. Use one of {sorted(REPAIR_ACTIONS)} "
                   "(triage/repair/registry.py), or add the action there first")
    from triage.kb.releases import problems as release_problems  # packaging: only when validating

    for json_path, text in release_problems(rule):
        report(json_path, text)
    expects = {example["expect"] for example in rule["examples"]}
    if "match" not in expects:
        report(("examples",), "no positive example (expect: match). Add a real log this rule must rank first")
    if "no-match" not in expects:
        report(("examples",), "no negative example (expect: no-match). Add a real log this rule must not fire on")
    return out


# How the matcher runs each regex field (triage.classify.match): the flags it compiles it
# with and the call it makes.
REGEX_FIELDS = {
    "exception": (0, "fullmatch"),
    "message": (0, "search"),
    "line": (re.MULTILINE, "search"),
    "run_line": (re.MULTILINE, "search"),
    "function": (0, "fullmatch"),
    "code": (0, "search"),
}


def regex_fields(rule: dict):
    """(json path, field, pattern) of every regex in a rule's signature."""
    signature = rule["signature"]
    for group in ("patterns", "boosts", "unless"):
        for index, conditions in enumerate(signature.get(group, [])):
            path = ("signature", group, index)
            for key in _CONDITION_REGEX_KEYS:
                if key in conditions:
                    yield path + (key,), key, conditions[key]
            frames = [(("frames", i), frame) for i, frame in enumerate(conditions.get("frames", []))]
            if "frame" in conditions:
                frames.append((("frame",), conditions["frame"]))
            for where, frame in frames:
                for key in ("function", "code"):
                    if key in frame:
                        yield path + where + (key,), key, frame[key]


def _check_regexes(rule: dict, report) -> None:
    for path, key, pattern in regex_fields(rule):
        try:
            re.compile(pattern)
        except re.error as exc:
            report(path, f"bad regex {pattern!r}: {exc}. Escape literal ( ) [ ] . with a backslash")
            continue
        if key in ("line", "run_line") and _literal_free(pattern):  # what `stream` prefilters on raw bytes
            report(path, f"{key} /{pattern}/ has no fixed text of 4+ characters, so `ds-triage stream` cannot "
                   "prefilter it. Anchor it on a fixed piece of the message")


def _check_facts(rule: dict, report) -> None:
    """Every `facts:` entry names a signal the analyses produce (triage/analysis/facts.py)."""
    from triage.analysis.facts import problems

    signature = rule["signature"]
    for part in ("patterns", "boosts", "unless"):
        for index, spec in enumerate(signature.get(part, [])):
            for number, fact in enumerate(spec.get("facts", [])):
                problem = problems(fact)
                if problem:
                    report(("signature", part, index, "facts", number), f"{problem}")


def _literal_free(pattern: str) -> bool:
    from triage.stream.literals import required  # the prefilter's own reading of the regex

    return required(pattern) is None


def linear_problems(source: RuleSource) -> list[str]:
    """Rule regexes whose time grows faster than the text they read, on the pump strings of
    triage.kb.pump, run on the engine classify runs them on (RE2, or `re` for lookarounds and
    backreferences). Seconds per rule set: `rules lint` runs it, classify does not."""
    from triage.kb import pump
    from triage.kb.regex import compile_pattern

    out = []
    for path, key, pattern in regex_fields(source.data):
        flags, mode = REGEX_FIELDS[key]
        compiled = compile_pattern(pattern, flags)
        slow = pump.check(pattern, flags, mode, compiled=compiled)
        if slow is not None:
            engine = "RE2" if hasattr(compiled, "translated") else "Python's re (RE2 cannot run it)"
            out.append(f"{source.path}:{source.line_of(path)}: {key} regex /{pattern}/ takes super-linear time on "
                       f"{engine}, {slow}. A log can make it hang: bound or anchor it (rules/README.md, "
                       "'Linear time')")
    return out


def cross_rule_problems(sources: list[RuleSource]) -> list[str]:
    """Checks across rules: unique ids and titles, no two identical signatures, special cases
    that are other existing rules."""
    out = []
    ids = {source.data["id"] for source in sources}
    for source in sources:
        for index, other in enumerate(source.data.get("special_cases", [])):
            if other == source.data["id"] or other not in ids:
                what = "the rule itself" if other == source.data["id"] else "no rule"
                out.append(f"{source.path}:{source.line_of(('special_cases', index))}: special case {other} is {what}. "
                           "Name another rule's id")
    seen: dict[str, dict[str, str]] = {"id": {}, "title": {}, "signature": {}}
    for source in sources:
        rule = source.data
        keys = {
            "id": rule["id"],
            "title": rule["title"].lower(),
            "signature": json.dumps(rule["signature"]["patterns"], sort_keys=True),
        }
        for kind, value in keys.items():
            other = seen[kind].get(value)
            if other:
                out.append(f"{source.path}:{source.line_of((kind if kind != 'signature' else 'signature',))}: "
                           f"same {kind} as {other}. Give each rule its own {kind}")
            else:
                seen[kind][value] = source.path
    return out
