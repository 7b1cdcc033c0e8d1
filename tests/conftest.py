import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"


def pytest_configure(config):
    """A suite started in the background (bash `cmd &` without job control) inherits SIGINT ignored,
    and passes that on: the children the Ctrl-C tests interrupt would never see it. Each process
    here (xdist workers too) takes Python's own handler back, which exec resets to the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # One build of DeepSpeed's CPU shm op for the whole suite: triage's own real loads (and every
    # process they start) use the corpus runs' cache, not torch's default one, which would be
    # compiled a second time while the tests that need it wait on torch's build lock.
    from corpus.generate import EXT_CACHE

    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXT_CACHE))


def pytest_collection_modifyitems(items):
    """The tests of real DeepSpeed runs first: run in parallel (`dev.py test` passes `-n auto
    --dist worksteal`), a minute-long test collected last would run alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def rules():
    from tests.session import session_rules

    return session_rules()


@pytest.fixture(scope="session")
def corpus_outcomes():
    """Every committed corpus log classified once per session (triage.eval.evaluate.Outcome)."""
    from tests.session import corpus_outcomes as outcomes

    return list(outcomes())


@pytest.fixture(scope="session")
def load_sites():
    """(sites, versions): the checkpoint load path's raise sites, parsed once per session."""
    from tests.session import load_sites as sites

    return sites()


@pytest.fixture(scope="session")
def rule_cache(tmp_path_factory) -> str:
    """One rule cache (XDG_CACHE_HOME) for the session's runs: the validated rules are compiled
    once (about a second) instead of once a run. It is keyed by every rule file's content and
    written atomically (triage/kb/index.py), so runs with other rules or at once share it safely."""
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def cli(rule_cache):
    """Run `python -m triage ...` as a user would; returns CompletedProcess."""

    def run(*args, stdin: bytes | None = None, env: dict | None = None, timeout: float = 120):
        full_env = dict(os.environ, XDG_CACHE_HOME=rule_cache, NO_COLOR="1")
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "triage", *map(str, args)],
            input=stdin, capture_output=True, cwd=ROOT, env=full_env, timeout=timeout,
        )

    return run


def corpus_log(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8", errors="replace")
