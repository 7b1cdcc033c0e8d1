"""Which rules cover which raise sites on the checkpoint load path (triage.kb.sites).

A rule *names* a site's function when one of its `references` names the site's file
(`source: deepspeed/<file>` or `torch/<file>`) and a `function` that matches the site's
qualified name (`SDLoaderBase.check_ckpt_list`) or its bare name (`check_ckpt_list`).
`function` may be an fnmatch glob: `DeepSpeedZeroOptimizer.*`, `merge_*`, `*`.

Naming the function is not explaining the failure: a function raises for several causes
(`_load_global_state` refuses a gradient-clipping mismatch beside its version checks). A rule
*covers* a site only when it also describes that very raise (issue 42, item 5): one of its
patterns has a `message` regex (a `line` regex, for a message logged before a failure) that matches
the site's template filled with values (triage.kb.fill), its `exception` (if any) naming the site's
type, or a frame whose `code` regex matches the site's own source line, or, for a bare `assert` or
`raise`, an empty-message pattern (`message: '^$'`) with a frame in the site's file and function:
all its traceback shows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fnmatch import fnmatchcase


def site_source(site) -> str:
    """The site's file as a rule reference names it: deepspeed/runtime/engine.py."""
    return f"{site.package}/{site.file}"


def function_matches(pattern: str, qualname: str) -> bool:
    bare = qualname.rsplit(".", 1)[-1]
    return fnmatchcase(qualname, pattern) or fnmatchcase(bare, pattern)


def reference_covers(reference: dict, site) -> bool:
    source, function = reference.get("source"), reference.get("function")
    if not source or not function or source != site_source(site):
        return False
    return function_matches(function, site.function)


def rules_naming(site, rules) -> list[str]:
    """Ids of the rules (sorted) with a reference that names this site's file and function."""
    return sorted({rule.id for rule in rules
                   if any(reference_covers(ref, site) for ref in rule.data.get("references", []))})


# A message regex that also matches this says nothing about one site's message (`.`, `Error`).
_UNRELATED = "something else went wrong while training step 2 ran"


def _type_fits(regex, exception: str) -> bool:
    if regex is None or not exception[:1].isupper():
        return True  # no type named, or the site re-raises what it caught (`raise e`, `type(e)(...)`)
    return bool(regex.fullmatch(exception) or regex.fullmatch(exception.rsplit(".", 1)[-1]))


def _names_message(cond, site) -> bool:
    # A message logged before a failure (Megatron prints why, then exits) is never an exception's
    # message: a log line is all a rule can name it by.
    regex = cond.line if site.kind == "logged" and cond.message is None else cond.message
    if regex is None or not site.message or regex.search(_UNRELATED):
        return False
    if not _type_fits(cond.exception, site.exception):
        return False
    from triage.kb.fill import fillings

    # A regex may ask for one value of a placeholder (`can't find \*_model_states\.pt files` of
    # `can't find {glob_pattern} files`): its own literal words are tried as values too.
    for text, spans in fillings(site.message, literal_words(regex.pattern)):
        found = regex.search(text)
        if found is not None and _own_text(text, found.span(), spans) >= min(OWN_TEXT, _own_text(text, None, spans)):
            return True
    return False


# Characters (not spaces) of the template's own text a covering regex must match, all of them
# when it has fewer: `^AutoEP\b` names a family of messages; a word matched in a filled-in value names none.
OWN_TEXT = 6


def _own_text(text: str, span: tuple[int, int] | None, spans: list[tuple[int, int]]) -> int:
    """How many characters of the template's own text (not a filled-in value) the match holds."""
    start, end = span or (0, len(text))
    return sum(len(text[max(start, a):min(end, b)].replace(" ", "")) for a, b in spans)


def literal_words(pattern: str, most: int = 24) -> tuple[str, ...]:
    r"""The words of the literal runs a regex spells out (`\S*latest_universal does` -> latest_universal, does)."""
    import re._parser as parser  # generation time only

    runs, current = [], []

    def walk(items):
        for op, arg in items:
            if op is parser.LITERAL:
                current.append(chr(arg))
                continue
            runs.append("".join(current))
            current.clear()
            if op is parser.SUBPATTERN:
                walk(arg[-1])
            elif op is parser.BRANCH:
                for branch in arg[1]:
                    walk(branch)
                    runs.append("".join(current))
                    current.clear()
            elif op in (parser.MAX_REPEAT, parser.MIN_REPEAT, parser.POSSESSIVE_REPEAT):
                walk(arg[2])

    try:
        walk(parser.parse(pattern))
    except Exception:  # noqa: BLE001 - a pattern re cannot parse (RE2 only) offers no words
        return ()
    runs.append("".join(current))
    words = dict.fromkeys(word for run in runs for word in run.split() if len(word) > 2)
    return tuple(words)[:most]


def _names_raise(cond, site) -> bool:
    source = site_source(site)
    return any(spec.code is not None and spec.code.search(site.code) and not spec.code.search(_UNRELATED)
               and (spec.file is None or source.endswith(spec.file)) for spec in cond.frames)


def _names_bare(cond, site) -> bool:
    """A bare `assert`/`raise` (no message) named by what its traceback shows: an empty message
    (`message: '^$'`), its type, and a frame in its file and function."""
    if site.message is not None or cond.message is None or not cond.message.search("") or \
            cond.message.search(_UNRELATED) or not _type_fits(cond.exception, site.exception):
        return False
    source, bare = site_source(site), site.function.rsplit(".", 1)[-1]
    return any(spec.function is not None and (spec.function.fullmatch(bare) or spec.function.fullmatch(site.function))
               and (spec.file is None or source.endswith(spec.file)) for spec in cond.frames)


def explains(rule, site) -> bool:
    """Whether one of the rule's patterns names this site's message or its exact raise."""
    # A pattern that also needs facts (a ratio, a placeholder) names a site only when they hold,
    # which no template shows: it covers nothing.
    return any(_names_message(p.conditions, site) or _names_raise(p.conditions, site) or _names_bare(p.conditions, site)
               for p in rule.patterns if not p.conditions.facts)


def rules_covering(site, rules) -> list[str]:
    """Ids of the rules (sorted) that name this site's function and explain its failure."""
    return sorted({rule.id for rule in rules
                   if any(reference_covers(ref, site) for ref in rule.data.get("references", []))
                   and explains(rule, site)})


@dataclass(frozen=True)
class FileCoverage:
    source: str
    sites: int
    covered: int

    @property
    def uncovered(self) -> int:
        return self.sites - self.covered


def coverage(sites, rules) -> list[tuple[object, list[str]]]:
    """(site, covering rule ids) for every site, in the order given."""
    rules = list(rules)
    return [(site, rules_covering(site, rules)) for site in sites]


def named_only(covered: list[tuple[object, list[str]]], rules) -> dict[tuple, list[str]]:
    """site_key -> the rules that name an uncovered site's function without explaining it: the
    sites the looser accounting (a `function` reference alone) counted as covered."""
    from triage.kb.sites import site_key

    rules = list(rules)
    out = {}
    for site, ids in covered:
        if not ids:
            naming = rules_naming(site, rules)
            if naming:
                out[site_key(site)] = naming
    return out


def per_file(covered: list[tuple[object, list[str]]]) -> list[FileCoverage]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for site, ids in covered:
        entry = counts[site_source(site)]
        entry[0] += 1
        entry[1] += bool(ids)
    return [FileCoverage(source, n, c) for source, (n, c) in sorted(counts.items())]


def uncovered_by_file(covered: list[tuple[object, list[str]]]) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for site, ids in covered:
        if not ids:
            out[site_source(site)].append(site)
    return {source: sorted(items, key=lambda s: s.line) for source, items in sorted(out.items())}


def describe_site(site) -> str:
    message = "(bare)" if site.message is None else site.message.replace("\n", "\\n")
    if len(message) > 100:
        message = message[:97] + "..."
    return f"line {site.line} in {site.function}: {site.exception}: {message}"
