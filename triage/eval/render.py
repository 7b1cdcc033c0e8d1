"""`ds-triage eval` for a person: compact aligned tables, from an Evaluation."""

from __future__ import annotations

from triage.eval.evaluate import Evaluation, Guess, Outcome
from triage.eval.releases import DIRECT, below, render_groups


def table(rows: list[list[str]], right: set[int] = frozenset(), indent: str = "  ") -> list[str]:
    """Align columns; `right` holds the indexes of right-aligned (numeric) columns."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:6.1%}" if whole else "     -"


def _guesses(guesses: tuple[Guess, ...]) -> str:
    return ", ".join(f"{g.rule_id} {g.category} {g.confidence:.2f}" for g in guesses[:3]) or "nothing fired"


def render(result: Evaluation, corpus: str, rule_count: int, set_name: str = "corpus") -> str:
    counts = result.counts
    kinds = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("failure", "silent", "negative", "clean"))
    label = "corpus" if set_name == "corpus" else f"{set_name} set"
    out = [f"{label} {corpus}: {counts['total']} logs ({kinds}); {rule_count} rules", ""]
    out += _accuracy(result) + [""] + render_groups("accuracy per release pair", result.by_release, table, _pct)
    out += render_groups("accuracy per framework", result.by_framework, table, _pct) + _yardstick(result)
    out += _confusion(result) + [""]
    out += _negatives(result) + _clean(result) + _rules(result) + [""]
    out += _misclassified(result) + [""] + _same_log(result) + [""]
    worst = result.worst
    if worst:
        out.append(f"time per log: median {result.median_ms:.1f} ms, worst {worst.seconds * 1000:.1f} ms ({worst.case.log})")
    verdict = "pass" if result.passed else "FAIL"
    out.append(f"gates: {verdict}: " + "; ".join(g.detail for g in result.gates))
    return "\n".join(out) + "\n"


def _yardstick(result: Evaluation) -> list[str]:
    """The direct loads on the newest release pair, and the rows (pairs, frameworks) below them."""
    if not result.direct_newest or not (result.by_framework or len(result.by_release) > 1):
        return []
    release, tally = result.direct_newest
    t = tally.labelled
    rows = {**result.by_release, **{k: v for k, v in result.by_framework.items() if k != DIRECT}}
    low = [f"{label} {_pct(r.labelled.top1, r.labelled.cases).strip()}" for label, r in rows.items()
           if label != release and label in below(rows, tally)]
    return [f"yardstick: DeepSpeed directly on {release}: top-1 {t.top1} of {t.cases} ({_pct(t.top1, t.cases).strip()});"
            f" below it: {', '.join(low) or 'none'}", ""]


def _accuracy(result: Evaluation) -> list[str]:
    rows = [["accuracy (failure + silent)", "cases", "top-1", "top-3", "unknown"]]
    items = [("overall", result.overall)] + sorted(result.by_category.items())
    for name, tally in items:
        rows.append([name, str(tally.cases), f"{tally.top1} {_pct(tally.top1, tally.cases)}",
                     f"{tally.top3} {_pct(tally.top3, tally.cases)}", str(tally.unknown)])
    return table(rows, right={1, 2, 3, 4}, indent="")


def _confusion(result: Evaluation) -> list[str]:
    labels = sorted(set(result.confusion) | {p for row in result.confusion.values() for p in row})
    if not labels:
        return ["confusion: no failure or silent case"]
    number = {label: str(i) for i, label in enumerate(labels, start=1)}
    rows = [["", "expected \\ predicted top-1"] + [number[p] for p in labels]]
    for i, label in enumerate(labels, start=1):
        row = result.confusion.get(label, {})
        rows.append([str(i), label] + [str(row[p]) if row.get(p) else "." for p in labels])
    right = {0} | set(range(2, len(labels) + 2))
    return ["confusion (rows: expected; columns: predicted, numbered as the rows)"] + table(rows, right=right)


def _listed(outcomes: list[Outcome]) -> list[str]:
    return table([[o.case.id, _guesses(o.guesses)] for o in outcomes], indent="    ")


def _negatives(result: Evaluation) -> list[str]:
    n, d = len(result.negatives), len(result.negatives_diagnosed)
    line = f"negatives: {d} of {n} diagnosed as a checkpoint failure" + (f" ({d / n:.1%})" if n else "")
    return [line] + _listed(result.negatives_diagnosed)


def _clean(result: Evaluation) -> list[str]:
    c, f = len(result.clean), len(result.clean_fired)
    per_million = result.clean_fp_per_million
    rate = f"; {per_million:.1f} false positives per million lines ({result.clean_lines} lines)" if per_million is not None else ""
    return [f"clean: {f} of {c} logs fired a rule{rate}"] + _listed(result.clean_fired)


def _rules(result: Evaluation) -> list[str]:
    total = len(result.rule_cases)
    if not total:
        return ["rule-level top-1: no case names an expected_rule"]
    right = total - len(result.rule_wrong)
    out = [f"rule-level top-1: {right} of {total} ({right / total:.1%})"]
    out += table([[o.case.id, f"expected {o.case.expected_rule}", f"got {o.rule_id or 'nothing'}"]
                  for o in result.rule_wrong], indent="    ")
    return out


def _misclassified(result: Evaluation) -> list[str]:
    if not result.misclassified:
        return ["misclassified: none"]
    rows = [["id", "expected", "got (top-3)"]]
    rows += [[o.case.id, o.case.expected_category or "", _guesses(o.guesses)] for o in result.misclassified]
    return [f"misclassified: {len(result.misclassified)}"] + table(rows)


def _same_log(result: Evaluation) -> list[str]:
    total, ceiling = result.overall.cases, result.top1_ceiling
    if not result.same_log:
        return [f"same log, different cause: none (log-only top-1 ceiling {ceiling} of {total})"]
    out = [f"same log, different cause: {len(result.same_log)} group(s); no log-only classifier gets more than "
           f"{ceiling} of {total} ({_pct(ceiling, total).strip()}) top-1"]
    for group in result.same_log:
        out.append("    " + ", ".join(f"{case_id} ({category})" for case_id, category in group))
    return out


def conversation(result) -> list[str]:
    """`eval --conversation` (triage.eval.conversation.ConversationEval): top-1 after each answer, the
    questions asked, what is still wrong where the log alone is, and any healthy checkpoint diagnosed."""
    data = result.to_json()
    kept = data["kept"]
    out = [f"conversation: {data['cases']} cases with a checkpoint ({kept} kept, {data['cases'] - kept} rebuilt), "
           f"each deciding question answered by running the asked command on it, in {result.seconds:.0f} s"]
    for label, key in (("failing", "failing"), ("where the log alone is wrong or ambiguous", "wrong_or_ambiguous")):
        f = data[key]
        after = ", ".join(f"{r}/{f['cases']} ({_pct(r, f['cases']).strip()})" for r in f["top1"])
        out.append(f"  {label}: top-1 after {', '.join(map(str, range(len(f['top1']))))} answers: {after}; "
                   f"mean questions {f['mean_questions']}")
    rows = [[t.id, t.hard, " -> ".join(t.answers) or "-", f"expected {t.expected}", "; ".join(t.asked) or t.error
             or "no question"] for t in result.failing(hard=True) if not t.right(data["answers"])]
    out.append(f"  not right after {data['answers']} answers where the log alone is not: {len(rows)}")
    out += table(rows, indent="    ")
    out.append(f"  healthy diagnosed: {data['healthy_diagnosed']} of {data['healthy']}")
    out += table([[t.id, " -> ".join(t.answers), t.error] for t in result.healthy if t.diagnosed], indent="    ")
    return out
