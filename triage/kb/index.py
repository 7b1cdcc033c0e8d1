"""Find, validate and cache the rules.

Parsing YAML and validating every rule against the JSON Schema costs more
than classifying a log (jsonschema alone imports in ~0.3 s), so the validated
rules are cached (marshal, per Python version) keyed by the hash of every rule file, the schema and
this package's version. A cache hit skips neither check: it is the result of
them, for exactly these bytes.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
from pathlib import Path

from triage import __version__
from triage.errors import BadRules
from triage.kb import regex
from triage.kb.model import Rule, compile_rule
from triage.record import Record

try:  # BLAKE2 from its own module: hashlib's import loads OpenSSL first, ~2.5 ms of every start
    from _blake2 import blake2b
except ImportError:  # a Python that builds it otherwise
    from hashlib import blake2b

TYPE_CHECKING = False  # typing's own, without its import (~3 ms of a cold start); type checkers read it as True
if TYPE_CHECKING:
    from triage.kb.messages import MessageIndex

REPO_ROOT = Path(__file__).resolve().parents[2]
# An installed wheel carries the rules, their examples and the JSON schemas here, laid out as in
# the repository (rules/, corpus/, docs/schemas/): see setup.py.
BUNDLED_ROOT = Path(__file__).resolve().parents[1] / "_bundled"
SCHEMA_NAME = "schema.json"


EXTRA_ENV = "DS_TRIAGE_EXTRA_RULES"  # --extra-rules, kept in the environment so serve's and stream's workers see it


def extra_rules_dirs() -> list[Path]:
    """$DS_TRIAGE_EXTRA_RULES: directories of a team's own rules, loaded beside the main set."""
    return [Path(d) for d in os.environ.get(EXTRA_ENV, "").split(os.pathsep) if d.strip()]


def data_path(relative: str | Path) -> Path:
    """A repository file or directory (corpus/, docs/...): the checkout's when this package runs
    from one, else the copy an installed wheel carries (setup.py)."""
    checkout = REPO_ROOT / relative
    return checkout if checkout.exists() or not (BUNDLED_ROOT / relative).exists() else BUNDLED_ROOT / relative


def default_rules_dir() -> Path:
    """$DS_TRIAGE_RULES, else the checkout's rules/, else the copy an installed wheel carries."""
    if os.environ.get("DS_TRIAGE_RULES"):
        return Path(os.environ["DS_TRIAGE_RULES"])
    return data_path("rules")


class RuleSet(Record):
    _fields = ("rules", "directory", "digest", "_sites", "_bare_reports")
    _hidden = ("_sites", "_bare_reports")  # read on first use

    def __init__(self, rules: list[Rule], directory: Path, digest: str):
        self.rules, self.directory, self.digest = rules, directory, digest
        self._sites: MessageIndex | None = None
        self._bare_reports: dict[str, int] | None = None

    @property
    def sites(self) -> MessageIndex:
        """The message index beside the rules (triage.kb.messages), read on first use."""
        if self._sites is None:
            from triage.kb.messages import load

            self._sites = load(self.directory)
        return self._sites

    @property
    def bare_reports(self) -> dict[str, int]:
        """Public threads counted per bare-assert site (triage.classify.bare), read on first use."""
        if self._bare_reports is None:
            from triage.classify.bare import load_reports

            self._bare_reports = load_reports(self.directory)
        return self._bare_reports

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


def rule_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise BadRules([f"{directory}: no rules directory. Pass --rules DIR or set DS_TRIAGE_RULES"])
    # os.walk: half of Path.rglob's time, which a cold classify pays
    return sorted(Path(root, name) for root, _, names in os.walk(directory) for name in names
                  if name.endswith(".yaml") and os.path.isfile(os.path.join(root, name)))


def load_rules(directory: str | Path | None = None, *, extra: list[str | Path] | None = None, use_cache: bool = True,
               examples: bool = False, linear: bool = False) -> RuleSet:
    """The validated rules of `directory`, plus those of each `extra` directory (default:
    $DS_TRIAGE_EXTRA_RULES), all under `directory`'s schema, ids unique across them; with `examples`,
    their example files must exist too; with `linear`, every regex must pass the pump test
    (triage.kb.pump: seconds, so lint only)."""
    directory = Path(directory) if directory else default_rules_dir()
    dirs = [directory, *(Path(d) for d in (extra_rules_dirs() if extra is None else extra))]
    files = [path for d in dirs for path in rule_files(d)]
    schema_path = directory / SCHEMA_NAME
    if not schema_path.is_file():
        raise BadRules([f"{schema_path}: the rule schema is missing"])
    contents = {path: path.read_bytes() for path in files}
    digest = _digest(schema_path.read_bytes(), contents, dirs)
    cache = _cache_path(digest)
    data = _read_cache(cache) if use_cache else None
    if data is None or examples or linear:
        data = validate_files(schema_path, contents, dirs, examples=examples, linear=linear)
        if use_cache:
            _write_cache(cache, data)
    for entry in data:
        regex.remember(entry.get("regex", {}))
    rules = [compile_rule(entry["rule"], entry["path"]) for entry in data]
    return RuleSet(rules, directory, digest)


def validate_files(schema_path: Path, contents: dict[Path, bytes], dirs: list[Path], *,
                   examples: bool = False, linear: bool = False) -> list[dict]:
    """Full validation: every problem in every file, then BadRules if any. A rule's example files
    are named from the parent of the rules directory that holds it (the repository root)."""
    import jsonschema  # slow to import: only on a cache miss or `rules lint`

    from triage.kb.source import RuleFileError, load_source
    from triage.kb.validate import (cross_rule_problems, example_file_problems, linear_problems, schema_problems,
                                    semantic_problems)

    try:
        schema = json.loads(schema_path.read_text())
    except ValueError as exc:
        raise BadRules([f"{schema_path}: invalid JSON: {exc}"]) from None
    validator = jsonschema.Draft202012Validator(schema)
    problems: list[str] = []
    sources = []
    for path, raw in contents.items():
        shown = _shown(path)
        root = next(d for d in dirs if path.is_relative_to(d)).parent
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{shown}:1: not UTF-8 ({exc.reason} at byte {exc.start}). Save the file as UTF-8")
            continue
        try:
            source = load_source(shown, text)
        except RuleFileError as exc:
            problems.append(f"{shown}:{exc.line}: {exc.problem}")
            continue
        found = schema_problems(source, validator)
        if not found:
            found = semantic_problems(source, root) + (example_file_problems(source, root) if examples else [])
            if not found and linear:
                found = linear_problems(source)
        if found:
            problems.extend(found)
        else:
            sources.append(source)
    if not problems:
        problems = cross_rule_problems(sources)
    if problems:
        raise BadRules(problems)
    from triage.kb.validate import REGEX_FIELDS, regex_fields

    return [{"path": s.path, "rule": s.data,
             "regex": regex.plans((pattern, REGEX_FIELDS[key][0]) for _, key, pattern in regex_fields(s.data))}
            for s in sources]


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _digest(schema: bytes, contents: dict[Path, bytes], dirs: list[Path]) -> str:
    digest = blake2b(f"{__version__} {regex.PLAN_VERSION}".encode(), digest_size=16)
    digest.update(schema)
    for path, raw in contents.items():
        home = next(i for i, d in enumerate(dirs) if path.is_relative_to(d))  # which set, then where in it
        digest.update(f"{home}:{path.relative_to(dirs[home])}".encode() + b"\0")
        digest.update(blake2b(raw, digest_size=16).digest())
    return digest.hexdigest()[:24]


def _cache_path(digest: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # marshal, not JSON: ~1 ms to read instead of ~5 (it is what .pyc files hold); its format
    # may change between Python versions, hence one file per version
    return Path(base) / "ds-triage" / f"rules-{digest}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"


def _read_cache(path: Path) -> list[dict] | None:
    try:
        with open(path, "rb") as handle:
            data = marshal.loads(handle.read())  # marshal.load(handle) reads it piece by piece: ~30x slower
    except (OSError, ValueError, EOFError, TypeError):  # missing, or cut short / corrupt: rebuilt
        return None
    return data if isinstance(data, list) else None


def _write_cache(path: Path, data: list[dict]) -> None:
    # Best effort: a read-only home must not stop a diagnosis.
    import tempfile  # a cache miss only; most runs read the cache

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".rules-")
        with os.fdopen(fd, "wb") as handle:
            marshal.dump(data, handle)
        os.replace(tmp, path)
    except (OSError, ValueError):  # ValueError: a value marshal cannot write (YAML gives none)
        pass
