"""The message index: what each catalogued raise site prints, as text a paste can be searched for.

`triage.kb.sites` reads every raise/assert on the checkpoint load path from the DeepSpeed and
torch source, with its exception type and message template, and `triage.kb.site_history` holds
those of older releases and of the projects around DeepSpeed (triage.kb.projects);
`triage.kb.coverage` names the rules that explain each site. Every site with text enough is in
the index, covered or not: it is recognised from its message alone either way, and a rule
covering it is what gives it a category. Reading that source needs both packages installed and takes seconds, so
`ds-triage rules docs` writes the result beside the rules as `rules/load-site-messages.json`
(one site a line; `--check` fails while it is stale), and classifying only reads that file.

Each site is searched for as its template cut at its placeholders into literal `pieces`, folded
(`fold`): compatibility characters made plain (NFKC: a translated IDE's full-width `：`),
quotes made one, white space dropped (a wrap at 80 columns, a screenshot's lost spacing) and
lower case. `triage.classify.messages` searches pastes, folded the same way, for those pieces.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from triage.record import Frozen

INDEX_NAME = "load-site-messages.json"
# A site is in the index when its template keeps at least MIN_TEXT folded characters of text
# (`Old version: {v} {why}` keeps 11); one with fewer than DISTINCT_TEXT (`{where}: names no
# holder` keeps 14) is recognised only where its exception type stands before the message.
# A logged or collected message, which no exception type ever stands before, needs DISTINCT_TEXT.
MIN_TEXT = 10
DISTINCT_TEXT = 24

# {expr}, {expr!r:>8}, {} and %s, %(name)d, %.3f: the parts a raise fills in.
_PLACEHOLDER = re.compile(r"\{[^{}]{0,300}\}|%(?:\([^)]{0,100}\))?[-#0 +]{0,4}\d{0,3}(?:\.\d{1,3})?[sdrifgexXc]")
_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({c: "'" for c in "\"`\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u00b4\u2032"})


def fold(text: str) -> str:
    """Text as the index compares it: NFKC, one quote character, no white space, lower case."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _SPACE.sub("", text.translate(_QUOTES)).lower()


def pieces(template: str | None) -> list[str]:
    """The folded literal pieces of a message template, in order; [] when it has no text."""
    if not template or _is_code(template):
        return []
    return _literal_pieces(template)


def _literal_pieces(template: str) -> list[str]:
    parts = [fold(part) for part in _PLACEHOLDER.split(_unwrapped(template.replace("%%", "%")))]
    return [part for part in parts if part]


def _unwrapped(template: str) -> str:
    """The template without the log-line prefixes a log's normalizer strips (`ERROR: `, `[ERROR] `):
    a logged message that writes its own level shows without it once the log is read."""
    from triage.logs.normalize import PREFIX

    while (match := PREFIX.match(template)) and match.end() and not template.startswith("{"):
        template = template[match.end():]
    return template


def _is_code(template: str) -> bool:
    """sites.py renders a message that is no string at all (`_get_wo_message(str(e))`,
    `','.join(errors)`) as the expression itself: it names code, not text the log shows."""
    import ast  # generation time only: classify never renders templates

    try:
        node = ast.parse(template, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.BinOp))


class SiteMessage(Frozen):
    _fields = ("source", "function", "line", "exception", "template", "pieces", "rules")

    def __init__(self, source: str, function: str, line: int, exception: str, template: str,
                 pieces: tuple[str, ...], rules: tuple[str, ...]):
        self.source = source  # deepspeed/utils/zero_to_fp32.py, megatron-lm/megatron/training/checkpointing.py
        self.function, self.line = function, line  # line 0: a site only the site history holds (no line kept)
        # as raised: ValueError, pickle.UnpicklingError, type(e); "(logged)", "(collected)": a message
        # logged before a failure, or collected into a list a raise joins (triage.kb.site_walk)
        self.exception = exception
        self.template, self.pieces = template, pieces
        self.rules = rules  # the rules covering the site (triage.kb.coverage)

    @property
    def text_length(self) -> int:
        return sum(map(len, self.pieces))

    @property
    def needs_type(self) -> bool:
        """Too little text to name the site alone: the paste must show the exception type too."""
        return self.text_length < DISTINCT_TEXT

    @property
    def opens_with_placeholder(self) -> bool:
        return bool(_PLACEHOLDER.match(self.template))

    @property
    def short_exception(self) -> str:
        return self.exception.rsplit(".", 1)[-1]

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line} {self.function}"


def indexed(site, found: list[str] | None = None) -> bool:
    """Whether a triage.kb.sites.Site has text enough to be in the index (`found`: its pieces)."""
    found = pieces(site.message) if found is None else found
    return sum(map(len, found)) >= (MIN_TEXT if site.kind in ("raise", "assert") else DISTINCT_TEXT)


def entries(covered, versions: dict[str, str]) -> dict:
    """The index's data from triage.kb.coverage.coverage(sites, rules): every site with text enough."""
    sites = []
    for site, ids in sorted(covered, key=lambda item: (item[0].package, item[0].file, item[0].line, item[0].function,
                                                       item[0].exception, item[0].message or "")):
        found = pieces(site.message)
        if not indexed(site, found):
            continue  # kept whether a rule covers it or not: the site is recognised either way
        # a logged or collected message stands on its own line, under no `Type:` of its own
        exception = site.exception if site.kind in ("raise", "assert") else f"({site.kind})"
        sites.append({"source": f"{site.package}/{site.file}", "function": site.function, "line": site.line,
                      "exception": exception, "template": site.message, "rules": list(ids)})
    return {"read_from": dict(sorted(versions.items())), "sites": sites}


def render(data: dict) -> str:
    """The file's text: a header line, then one site a line (diffs stay readable)."""
    head = {"generated_by": "ds-triage rules docs", "from": "triage/kb/sites.py, triage/kb/site_history.json, rules/", "read_from": data["read_from"]}
    rows = ",\n".join("  " + json.dumps(site, ensure_ascii=False) for site in data["sites"])
    return "{\n" + json.dumps(head)[1:-1] + ',\n "sites": [\n' + rows + "\n]}\n"


class MessageIndex:
    """The sites of the index, and what the fuzzy search needs of them, computed once."""

    GRAM = 4  # the fuzzy search's prefilter compares 4-character grams
    MIN_PIECE = 4  # shorter pieces (",", "rank") say nothing alone: not scored by the fuzzy search

    def __init__(self, sites: list[SiteMessage]):
        self.sites = sites
        # each site with the index of its longest piece: the one searched for first
        self.anchored = [(site, max(range(len(site.pieces)), key=lambda i: len(site.pieces[i])))
                         for site in sites if site.pieces]
        self._fuzzy: list[tuple[SiteMessage, list[str], str, frozenset]] | None = None

    def __len__(self) -> int:
        return len(self.sites)

    def __iter__(self):
        return iter(self.sites)

    def fuzzy_entries(self) -> list[tuple[SiteMessage, list[str], str, frozenset]]:
        """(site, its pieces worth scoring, the longest of them, that piece's 4-grams) of each
        site with text enough to be told from other text alone."""
        if self._fuzzy is None:
            out = []
            for site in self.sites:
                scored = [p for p in site.pieces if len(p) >= self.MIN_PIECE]
                anchor = max(scored, key=len, default="")
                if site.needs_type or len(anchor) < 2 * self.GRAM:
                    continue
                grams = frozenset(anchor[i:i + self.GRAM] for i in range(len(anchor) - self.GRAM + 1))
                out.append((site, scored, anchor, grams))
            self._fuzzy = out
        return self._fuzzy


def load(directory: str | Path, every_site: bool = False) -> MessageIndex:
    """The index beside the rules; empty when a rules directory has none (a custom rule set).

    By default only the sites a rule covers: a site no rule covers gives classify no hypothesis,
    and each site costs a search of every paste. `every_site`: all of them (what recognises a
    site from its message alone, category or not)."""
    try:
        with open(Path(directory) / INDEX_NAME, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return MessageIndex([])
    # the file keeps no pieces: they are the template's (a template that is code never got in)
    return MessageIndex([SiteMessage(s["source"], s["function"], s["line"], s["exception"], s["template"],
                                     tuple(_literal_pieces(s["template"])), tuple(s["rules"]))
                         for s in data.get("sites", []) if every_site or s["rules"]])
