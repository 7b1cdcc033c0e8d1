"""Log text -> Incident: normalize, parse tracebacks and summaries, lift facts."""

from __future__ import annotations

from triage.logs import facts, torchrun
from triage.logs.incident import Incident
from triage.logs.normalize import Line, normalize
from triage.logs.tracebacks import parse_chains


def parse(text: str, *, truncated: bool = False, decode_errors: int = 0, cuts: tuple = ()) -> tuple[Incident, list[Line]]:
    lines = normalize(text, cuts)
    root, exit_codes = torchrun.parse_summary(lines)
    chains = parse_chains(lines)
    ranks = sorted({line.rank for line in lines if line.rank is not None} | set(r for r in exit_codes if r >= 0))
    incident = Incident(
        chains=chains,
        line_count=len(lines),
        ranks=ranks,
        root_cause_rank=root,
        exit_codes=exit_codes,
        truncated=truncated,
        decode_errors=decode_errors,
    )
    facts.extract(lines, incident)
    return incident, lines
