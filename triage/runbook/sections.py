"""A rule's runbook page as structured sections: the one source of its content.

`page(rule, ...)` returns the sections in order; `triage.runbook.rule_docs` renders them as
Markdown (docs/rules/<ID>.md) and `triage.runbook.render` for the terminal
(`ds-triage runbook`). A section marked `docs_only` (the full signature, the example
list) appears only in the docs. Content is a few block types (paragraph, list, code)
holding inline spans (text, `Code`, `Strong`, `Link`), so neither renderer invents text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from triage.kb import readable
from triage.classify.example_lines import Example
from triage.kb.model import Rule
from triage.kb.verify_steps import ordered


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Link:
    text: str
    target: str  # a path from the repository root, or an https URL


Span = Union[str, Code, Strong, Link]


@dataclass
class Para:
    spans: list[Span]
    paragraphs: bool = False  # the text holds paragraphs (blank lines); its other line breaks are wrapping


@dataclass
class Item:
    spans: list[Span]
    children: list["Block"] = field(default_factory=list)


@dataclass
class Items:
    items: list[Item]
    ordered: bool = False


@dataclass
class CodeBlock:
    lines: list[str]
    lang: str = "text"


Block = Union[Para, Items, CodeBlock]


@dataclass
class Section:
    name: str
    blocks: list[Block]
    docs_only: bool = False


# (name, docs_only) in page order; the docs show all, the terminal the others. What the person on
# call acts on comes first (what, symptoms, verify, fix), the regexes that match it last.
SECTION_ORDER = (
    ("What it means", False), ("Symptoms", False), ("How to verify", False), ("Fix", False),
    ("Why it happens", False), ("Affected releases", False), ("Prevention", False), ("References", False),
    ("False positives", False), ("Examples", True), ("Signature", True),
)
DOCS_SECTIONS = tuple(name for name, _ in SECTION_ORDER)
# Only on the pages of rules that name them (known_bug rules: rules/schema.json `releases`).
OPTIONAL_SECTIONS = ("Affected releases",)
TERMINAL_SECTIONS = tuple(name for name, docs_only in SECTION_ORDER if not docs_only)
EXCERPT_LINES = 40


def symptom(spec: dict) -> list[Span] | None:
    """What a pattern looks like in a log, readable: `AssertionError` with an empty message,
    raised in `check_ckpt_list` (`runtime/state_dict_factory.py`). None for a pattern that
    only says "any exception" (the catch-all rules)."""
    spans: list[Span] = []
    names = readable.exception_names(spec["exception"]) if "exception" in spec else []
    message = spec.get("message")
    if names:
        spans += _joined([Code(n) for n in names], " or ")
    if message == "^$":
        bare = "assert" if names == ["AssertionError"] else "raise"
        spans.append(f" with an empty message (a bare `{bare}`)" if names else "an empty exception message")
    elif message:
        texts = _shortest(readable.texts(message, limit=6))[:3]
        if texts:
            spans += [": " if names else "a message "] + _joined([Code(t) for t in texts], " or ")
    frames = list(spec.get("frames", [])) + ([spec["frame"]] if "frame" in spec else [])
    for number, frame in enumerate(frames):
        where: list[Span] = []
        if "function" in frame:
            where += _joined([Code(t) for t in readable.texts(frame["function"], limit=3)], " or ")
        if "file" in frame:
            where += [" (", Code(frame["file"]), ")"] if where else [Code(frame["file"])]
        if where:
            lead = ", through " if number else (", raised in " if spans else "an exception raised in ")
            spans += [lead] + where
    if spec.get("ranks") == "some":
        spans.append(", on some ranks only")
    elif spec.get("ranks") == "all":
        spans.append(", on every rank")
    for key, lead in (("line", "a log line "), ("run_line", "a line of the failing run ")):
        if key in spec:
            texts = _shortest(readable.texts(spec[key], limit=6))[:2]
            if texts:
                spans += [("; " if spans else "") + lead] + _joined([Code(t) for t in texts], " or ")
    if "exit_code" in spec:
        note = " (SIGKILL, often the OOM killer)" if spec["exit_code"] == -9 else ""
        spans.append(f"{'; ' if spans else ''}a rank or the launcher exits with code {spec['exit_code']}{note}")
    if spec.get("no_traceback"):
        spans.append(f"{'; ' if spans else ''}no Python traceback in the log")
    if spec.get("facts"):
        spans += [f"{'; ' if spans else ''}what it says: "] + _joined([Code(f) for f in spec["facts"]], ", ")
    if not spans:
        return None
    if names and not message and not frames and not ({"line", "run_line", "exit_code", "no_traceback", "ranks"} & set(spec)):
        spans.append(" (any message)")
    return spans


def symptoms(rule: Rule) -> list[list[Span]]:
    out: list[list[Span]] = []
    for pattern in rule.data["signature"]["patterns"]:
        found = symptom(pattern)
        if found and found not in out:
            out.append(found)
    return out


def page(rule: Rule, example: Example | None) -> list[Section]:
    """Every section of a rule's page; `example` is its first positive example's error
    lines (`triage.classify.example_lines.example_error`), or None."""
    data = rule.data
    body = {
        "What it means": [Para([data["summary"]])],
        "Symptoms": _symptoms(rule, example),
        "Why it happens": [Para([data["cause"].strip()], paragraphs=True)] + _special_cases(data),
        "Affected releases": _releases(data.get("releases")),
        "Signature": signature_blocks(data["signature"]),
        "How to verify": _verify(data),
        "Fix": [Items([_fix_item(step) for step in data["fix"]], ordered=True)],
        "Prevention": [Items([Item([text]) for text in data["prevention"]])],
        "References": [Items([Item(_reference(ref)) for ref in data["references"]])],
        "False positives": [Para([data["false_positives"].strip()])],
        "Examples": _examples(data["examples"]),
    }
    return [Section(name, body[name], docs_only) for name, docs_only in SECTION_ORDER
            if body[name] or name not in OPTIONAL_SECTIONS]


_DECIDED_BY = {
    "load": "the release that runs the failing load or conversion decides (the log's DeepSpeed version, else "
            "the installed one)",
    "save": "the release that saved the checkpoint decides (the shards' ds_version)",
    "either": "either release can carry it: the script saved with the checkpoint (its ds_version) or the "
              "installed one, whichever ran",
}


def _releases(spec: dict | None) -> list[Block]:
    """A known bug's releases per package: affected, fixed (or none yet), and how that was found."""
    if not spec:
        return []
    items = []
    for package, entry in spec.items():
        if package == "decided_by":
            continue
        fixed: list[Span] = ["fixed in ", Code(entry["fixed"])] if entry.get("fixed") else ["no fixed release yet"]
        items.append(Item([Strong(package), ": affected ", Code(entry["affected"]), "; "] + fixed
                          + [f". Checked: {' '.join(entry['checked'].split())}"]))
    return [Items(items), Para([f"Whose release: {_DECIDED_BY[spec['decided_by']]}. `ds-triage triage` compares "
                                "them with this case's releases (the version probe)."])]


def _special_cases(data: dict) -> list[Block]:
    cases = data.get("special_cases")
    return [Para([f"Narrower causes with their own rules: {', '.join(cases)}."])] if cases else []


def conditions(spec: dict) -> list[list[Span]]:
    """Each condition of a pattern, boost or unless entry, as a sentence fragment."""
    out: list[list[Span]] = []
    if "exception" in spec:
        out.append(["the exception type is ", Code(spec["exception"])])
    if "message" in spec:
        if spec["message"] == "^$":
            out.append(["its message is empty (a bare `assert` or `raise`)"])
        else:
            out.append(["its message contains a match for ", Code(spec["message"])])
    frames = list(spec.get("frames", [])) + ([spec["frame"]] if "frame" in spec else [])
    for frame in frames:
        parts: list[list[Span]] = []
        if "file" in frame:
            parts.append(["file ", Code(frame["file"])])
        if "function" in frame:
            parts.append(["function ", Code(frame["function"])])
        if "code" in frame:
            parts.append(["source line matching ", Code(frame["code"])])
        out.append(["its traceback passes through a frame with "] + [s for p in _joined(parts, [", "]) for s in p])
    if "ranks" in spec:
        out.append(["it was raised on some but not all of the log's ranks" if spec["ranks"] == "some"
                    else "it was raised on every rank the log shows"])
    if "line" in spec:
        out.append(["a log line contains a match for ", Code(spec["line"])])
    if "run_line" in spec:
        out.append(["a line of the run that failed (since the last engine or launcher start) contains a match for ",
                    Code(spec["run_line"])])
    if "exit_code" in spec:
        note = " (SIGKILL, often the OOM killer)" if spec["exit_code"] == -9 else ""
        out.append([f"a rank or the launcher exited with code {spec['exit_code']}{note}"])
    if "no_traceback" in spec:
        out.append(["the log holds no Python traceback" if spec["no_traceback"] else "the log holds a Python traceback"])
    for fact in spec.get("facts", ()):
        from triage.analysis.facts import KNOWN  # standard library only

        out.append(["what the error says holds ", Code(fact), f" ({KNOWN[fact.partition(':')[0]]})"])
    return out


def _and(spec: dict) -> list[Span]:
    return [s for part in _joined(conditions(spec), [" and "]) for s in part]


def signature_blocks(signature: dict) -> list[Block]:
    """The full signature: every pattern's conditions, boosts, phrases, `unless` (docs only)."""
    patterns = []
    for pattern in signature["patterns"]:
        head: list[Span] = ([Strong(pattern["name"]), ", c"] if pattern.get("name") else ["C"])
        head.append(f"onfidence {pattern.get('confidence', 0.8):g}:")
        patterns.append(Item(head, [Items([Item(c) for c in conditions(pattern)])]))
    blocks: list[Block] = [
        Para(["Any one of these patterns fires the rule; every condition of a pattern must hold "
              "(exception, message and frames for one same exception)."]),
        Items(patterns, ordered=True),
    ]
    if signature.get("boosts"):
        blocks.append(Para(["Boosts (each adds its weight of what is left to 1):"]))
        blocks.append(Items([Item([f"+{b['weight']:g} when "] + _and(b) + ([f": {b['why']}"] if b.get("why") else []))
                             for b in signature["boosts"]]))
    if signature.get("phrases"):
        blocks.append(Para(["Phrases (matched fuzzily against exception messages and error lines):"]))
        blocks.append(Items([Item([Code(p["text"]), f", weight {p['weight']:g}, at least "
                                   f"{p.get('min_similarity', 88):g}% similar"]) for p in signature["phrases"]]))
    if signature.get("unless"):
        blocks.append(Para(["Ruled out when:"]))
        blocks.append(Items([Item(_and(u)) for u in signature["unless"]]))
    return blocks


def _symptoms(rule: Rule, example: Example | None) -> list[Block]:
    blocks: list[Block] = []
    found = symptoms(rule)
    if found:
        blocks.append(Para(["Any one of these in the log:"]))
        blocks.append(Items([Item(spans) for spans in found]))
    if example is not None:
        where: Span = Link(example.source, example.link) if example.link else example.source
        blocks.append(Para(["Example, from ", where, ":"]))
        blocks.append(CodeBlock(list(example.lines)))
    return blocks or [Para(["See the signature below."])]


def _verify(data: dict) -> list[Block]:
    steps = [Item([Code(step["command"])], [Para([step["shows"]])]) for step in ordered(data["verify"])]
    blocks: list[Block] = [
        Para(["Read-only; ", Code("{ckpt}"), ", ", Code("{tag}"), " and ", Code("{config}"),
              " are the checkpoint directory, its tag and your ds_config."]),
        Items(steps, ordered=True),
    ]
    extra: list[Span] = []
    if data.get("probes"):
        extra += ["Probes: "] + _joined([Code(p) for p in data["probes"]], ", ") + ["."]
    if data.get("repairs"):
        extra += [" " if extra else ""] + ["Repairs: "]
        extra += _joined([Code(f"ds-triage repair {r}") for r in data["repairs"]], ", ") + ["."]
    if extra:
        blocks.append(Para(extra))
    return blocks


def _fix_item(step: dict) -> Item:
    safety = [" (safe)"] if step["safety"] == "safe" else [" (", Strong("unsafe"), f": {step['why']})"]
    return Item([step["title"]] + safety, [Para([step["detail"]])] if step.get("detail") else [])


def _reference(ref: dict) -> list[Span]:
    if "source" in ref:
        spans: list[Span] = [Code(ref["source"]), ": ", Code(ref["function"])]
        if "url" in ref:
            spans += [" (", Link(ref["url"], ref["url"]), ")"]
    else:
        spans = [Link(ref["url"], ref["url"])]
    if ref.get("note"):
        spans.append(f": {ref['note']}")
    return spans


def _examples(examples: list[dict]) -> list[Block]:
    blocks: list[Block] = []
    listed: list[Item] = []
    for example in examples:
        note = f": {example['note']}" if example.get("note") else ""
        if "file" in example:
            listed.append(Item([f"{example['expect']}: ", Link(example["file"], example["file"]), note]))
            continue
        lines = example["log"].rstrip("\n").splitlines()
        if len(lines) > EXCERPT_LINES:
            lines = lines[:EXCERPT_LINES] + [f"... ({len(lines) - EXCERPT_LINES} more lines in the rule file)"]
        origin = " (the site's template, values filled in)" if example.get("source") == "template" else ""
        listed.append(Item([f"{example['expect']}: inline excerpt{origin}{note}"]))
        # The excerpt after the list, not inside it: Python-Markdown (mkdocs) does not
        # nest fenced code in list items; GitHub reads it the same either way.
        blocks += [Items(listed), CodeBlock(lines)]
        listed = []
    if listed:
        blocks.append(Items(listed))
    return blocks


def _shortest(texts: list[str]) -> list[str]:
    """Drop a text that contains another (`RuntimeError: X` beside `X`, `bf16_X` beside `X`)."""
    return [t for t in texts if not any(o != t and o in t for o in texts)]


def _joined(spans: list, sep: str) -> list:
    out: list = []
    for index, span in enumerate(spans):
        if index:
            out.append(sep)
        out.append(span)
    return out

