"""The committed corpus, read the way the tests need it."""

from pathlib import Path

from triage.kb.source import load_yaml

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def manifest() -> list[dict]:
    path = CORPUS / "manifest.yaml"
    if not path.exists():
        return []
    return load_yaml(path.read_text()) or []


def log_text(entry: dict) -> str:
    return (CORPUS / entry["log"]).read_text(encoding="utf-8", errors="replace")


def failure_logs() -> dict[str, str]:
    return {e["id"]: log_text(e) for e in manifest() if e["kind"] == "failure"}
