"""Search the rules by what someone on call sees: `ds-triage runbook QUERY` (pure, no I/O).

`build_index(rules)` turns each rule into searchable fields; `search(index, query)` ranks
them:

1. a rule id (`DS-Z001`, `ds-z001`, `z001`) or a category name (`zero_stage_mismatch`,
   `permission denied`) wins outright: that rule, or every rule of the category (by id);
2. otherwise each field is scored 0-100 against the query: the query's text found in the
   field (from the start of a word) 100, all its words found in any order 95, else
   rapidfuzz similarity (`partial_ratio`, or word by word for typos) times 0.9 (not for
   ids and exception names, which match literally or not at all). The
   identity fields (id, title, category, exception types, message texts, phrases,
   summary) count in full, the cause at 0.85 (it also discusses neighbouring failures).
   A rule's score is its best field; each other kind of field that matches (90 or more)
   adds `SUPPORT` to its rank, not to the score shown.
3. A rule that lists another as a special case (`special_cases`: DS-M001 lists DS-M004) is
   its general case: when both match, the general rule ranks with its best special case and before
   it. A query rarely carries the detail that singles out a special case, and the general
   page names them all. Ties then go to the lower priority (the more general rule), then
   the id.

Below `GOOD` the best match is not a good one: the caller says so and shows the closest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triage.kb import readable
from triage.kb.model import Rule

GOOD = 75
FUZZY = 0.9  # a fuzzy match never ties a literal one
CAUSE_WEIGHT = 0.85
SUPPORT = 2
MAX_RESULTS = 8
# Matched literally only: `KeyError` is 75% similar to `EOFError`, and means nothing alike.
LITERAL_FIELDS = ("id", "exception")
_ID = re.compile(r"(?i)^(?:ds-?)?([a-z])-?(\d{3})$")


@dataclass(frozen=True)
class Field:
    name: str  # id, title, category, exception, message, phrase, summary, cause
    text: str  # as shown
    norm: str  # as compared
    weight: float


@dataclass(frozen=True)
class Entry:
    rule: Rule
    fields: tuple[Field, ...]
    special_cases: frozenset[str]  # ids of the narrower rules it is the general case of


@dataclass(frozen=True)
class Result:
    rule: Rule
    score: int  # 0-100: the best field's similarity
    field: str | None  # which field matched best (None for an exact id or category)
    text: str | None  # that field's text


@dataclass(frozen=True)
class Found:
    query: str
    kind: str  # "id" | "category" | "fuzzy" | "none"
    results: list[Result]
    category: str | None = None

    @property
    def best(self) -> Result | None:
        return self.results[0] if self.results and self.kind != "none" else None


def _whole(q: str, original: str) -> bool:
    """The query's words in the original text, not joined by `_` to a word before or after them."""
    words = r"[^a-z0-9]+".join(map(re.escape, q.split()))
    return re.search(rf"(?<![a-z0-9])(?<![a-z0-9]_){words}(?![a-z0-9])(?!_[a-z0-9])", original) is not None


def normalize(text: str) -> str:
    """Lower case, `key(s)` -> `keys`, everything but letters and digits a single space:
    `weights_only=True`, `weights-only` and `Weights only` compare equal."""
    text = text.lower().replace("(s)", "s")
    return " ".join(re.findall(r"[a-z0-9]+", text))


def build_index(rules: list[Rule]) -> list[Entry]:
    return [_entry(rule) for rule in sorted(rules, key=lambda r: r.id)]


def _entry(rule: Rule) -> Entry:
    data = rule.data
    raw: list[tuple[str, str, float]] = [
        ("id", rule.id, 1.0), ("title", rule.title, 1.0), ("category", rule.category, 1.0),
        ("summary", data["summary"], 1.0), ("cause", data["cause"], CAUSE_WEIGHT),
    ]
    messages: list[str] = []
    exceptions: list[str] = []
    for pattern in data["signature"]["patterns"]:
        names = readable.exception_names(pattern["exception"]) if "exception" in pattern else []
        exceptions += [n for n in names if n not in exceptions]
        if pattern.get("message") == "^$":
            where = pattern.get("frame", {}).get("function", "")
            bare = "assert" if names == ["AssertionError"] else "raise"
            messages.append(f"{' '.join(names)} with an empty message (a bare {bare}) {readable.text(where) if where else ''}")
        for key in ("message", "line"):
            if key in pattern and pattern[key] != "^$":
                messages += [t for t in readable.texts(pattern[key]) if t not in messages]
        for frame in pattern.get("frames", []) + ([pattern["frame"]] if "frame" in pattern else []):
            if "function" in frame:
                messages += [t for t in readable.texts(frame["function"], 4) if t not in messages]
    raw += [("exception", name, 1.0) for name in exceptions]
    raw += [("message", text, 1.0) for text in messages]
    raw += [("phrase", p["text"], 1.0) for p in data["signature"].get("phrases", [])]
    fields = tuple(Field(name, " ".join(text.split()), normalize(text), weight) for name, text, weight in raw if normalize(text))
    return Entry(rule, fields, frozenset(data.get("special_cases", ())))


def search(index: list[Entry], query: str, limit: int = MAX_RESULTS) -> Found:
    query = query.strip()
    exact = _exact(index, query)
    if exact is not None:
        return exact
    q = normalize(query)
    if not q:
        return Found(query, "none", [])
    scored = {entry.rule.id: _score(entry, q) for entry in index}
    by_id = {entry.rule.id: entry for entry in index}
    rank = {rule_id: s[0] + SUPPORT * s[1] for rule_id, s in scored.items()}
    # The general case ranks with its best matching special case (and before it: `parent`).
    parent = set()
    for rule_id, entry in by_id.items():
        if scored[rule_id][0] < GOOD:
            continue
        children = [rank[c] for c in entry.special_cases if c in rank and scored[c][0] >= GOOD]
        if children and max(children) >= rank[rule_id]:
            rank[rule_id] = max(children)
            parent.add(rule_id)
    order = sorted(by_id, key=lambda r: (-rank[r], r not in parent, by_id[r].rule.priority, r))
    results = [Result(by_id[r].rule, round(scored[r][0]), scored[r][2], scored[r][3]) for r in order[:limit]]
    kind = "fuzzy" if results and results[0].score >= GOOD else "none"
    return Found(query, kind, results)


def _exact(index: list[Entry], query: str) -> Found | None:
    match = _ID.match(query)
    if match:
        wanted = f"DS-{match.group(1).upper()}{match.group(2)}"
        for entry in index:
            if entry.rule.id == wanted:
                return Found(query, "id", [Result(entry.rule, 100, None, None)])
    q = normalize(query)
    categories = {normalize(e.rule.category): e.rule.category for e in index}
    if q in categories:
        category = categories[q]
        rules = [Result(e.rule, 100, None, None) for e in index if e.rule.category == category]
        return Found(query, "category", rules, category)
    return None


def _score(entry: Entry, q: str) -> tuple[float, int, str | None, str | None]:
    """(best weighted field score, how many other kinds of field match, best field name, its text).
    Kinds, not fields: a regex expanded into ten message texts is one piece of evidence."""
    best, best_field, matching = 0.0, None, set()
    for f in entry.fields:
        raw = field_score(q, f.norm, fuzzy=f.name not in LITERAL_FIELDS, original=f.text)
        if raw >= 90:
            matching.add(f.name)
        weighted = raw * f.weight
        if weighted > best:
            best, best_field = weighted, f
    if best_field is None:
        return 0.0, 0, None, None
    supporting = len(matching - {best_field.name}) if best >= 90 * CAUSE_WEIGHT else 0
    return best, supporting, best_field.name, best_field.text


def field_score(q: str, text: str, fuzzy: bool = True, original: str | None = None) -> float:
    """0-100: how well the normalized query `q` matches the normalized field `text`;
    without `fuzzy` only the text found (100) or all its words (95) count. `original`, the field
    before normalizing: a query found only inside a longer identifier there (`latest` in
    `latest_universal`) names something else, so it scores 97, below the text itself."""
    if re.search(rf"(?<![a-z0-9]){re.escape(q)}", text):
        if original is None or _whole(q, original.lower()):
            return 100.0
        return 97.0
    words = q.split()
    tokens = text.split()
    if all(any(t.startswith(w) for t in tokens) for w in words):
        return 95.0
    if not fuzzy:
        return 0.0
    from rapidfuzz import fuzz, process

    partial = fuzz.partial_ratio(q, text) if len(q) >= 4 else 0.0
    per_word = []
    for word in words:
        if len(word) <= 2:  # "dp", "9": a short word matches exactly or not at all
            per_word.append(100.0 if word in tokens else 0.0)
        else:
            hit = process.extractOne(word, tokens, scorer=fuzz.ratio)
            per_word.append(hit[1] if hit else 0.0)
    by_word = sum(per_word) / len(per_word) if per_word else 0.0
    return FUZZY * max(partial, by_word)
