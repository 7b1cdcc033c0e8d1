"""classify.ceiling: never below rapidfuzz's partial_ratio, so the lines it rules out could not
have matched a phrase; and on a log with no near line, rapidfuzz is never imported."""

from __future__ import annotations

import random
import subprocess
import sys

from rapidfuzz import fuzz

from tests.conftest import CORPUS, ROOT
from triage.classify.ceiling import ceiling


def _mutations(text: str, rng: random.Random, count: int) -> list[str]:
    """The text with a few characters dropped, swapped or added, cut, or set inside a longer line."""
    out = []
    for _ in range(count):
        chars = list(text)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(chars) + 1)
            kind = rng.random()
            if kind < 0.4 and at < len(chars):
                del chars[at]
            elif kind < 0.7 and at < len(chars):
                chars[at] = rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 _:/.")
            else:
                chars.insert(at, rng.choice("abcdefghijklmnopqrstuvwxyz ,."))
        mutated = "".join(chars)
        start = rng.randrange(len(mutated) // 2 + 1)
        out += [mutated, mutated[start:start + rng.randint(5, len(mutated) + 1)],
                f"[rank{rng.randint(0, 7)}]: RuntimeError: {mutated} (step {rng.randint(1, 9999)})"]
    return out


def test_the_ceiling_is_never_below_partial_ratio(rules):
    rng = random.Random(20261204)
    phrases = sorted({p.text for rule in rules.rules for p in rule.phrases})
    assert phrases  # rules with phrases exist: the test would be empty without them
    lines: set[str] = set()
    for path in sorted((CORPUS / "cases").glob("*.log"))[::3] + sorted((CORPUS / "clean").glob("*.log"))[:3]:
        lines.update(line.strip()[:600] for line in path.read_text(errors="replace").splitlines() if line.strip())
    texts = sorted(lines) + ["", "a", "AssertionError", "Unable"]
    for phrase in phrases:
        texts += _mutations(phrase, rng, 150)
    checked = high = 0
    for phrase in phrases:
        for text in texts:
            real = fuzz.partial_ratio(phrase, text)
            assert ceiling(phrase, text) >= real - 1e-9, (phrase, text, real)
            checked += 1
            high += real >= 80
    assert checked > 10_000 and high > 100  # near matches were among them, not only far ones


def test_a_log_without_a_line_near_a_phrase_never_imports_rapidfuzz(tmp_path):
    log = CORPUS / "cases" / "zero3-saved-stage2-load-dp2.log"
    code = ("import sys; from triage.classify.classifier import classify; "
            f"report = classify(open({str(log)!r}).read()); "
            "print(report.top.rule.id, 'rapidfuzz' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    rule_id, imported = out.stdout.split()
    assert rule_id.startswith("DS-") and imported == "False"
