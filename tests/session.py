"""What the suite computes once per session: the rules, the corpus classified, the load sites.

Plain cached functions (not only fixtures) so that parametrization at collection time and
the session fixtures in conftest.py share the same objects.
"""

from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"


@lru_cache(maxsize=None)
def session_rules():
    from triage.kb import load_rules

    return load_rules(ROOT / "rules", use_cache=False, examples=True)  # example files must exist


@lru_cache(maxsize=None)
def corpus_outcomes() -> tuple:
    """Every committed corpus case classified once with the session's rules."""
    from triage.eval.corpus import load_cases, run_cases

    return tuple(run_cases(CORPUS, load_cases(CORPUS), session_rules()))


@lru_cache(maxsize=None)
def load_sites() -> tuple:
    """(sites, versions) from the installed deepspeed and torch source."""
    from triage.runbook.docgen import load_sites as read

    sites, versions = read()
    return tuple(sites), versions
