"""Fill a rule's verification command with the incident's facts, shell-quoted."""

from __future__ import annotations

import posixpath

# Unknown facts stay shell variables the user can export before pasting.
PLACEHOLDERS = {"ckpt": '"$CKPT"', "tag": '"$TAG"', "config": '"$DS_CONFIG"'}


def render(template: str, facts: dict[str, str | None]) -> str:
    from shlex import quote  # here: only a report with a command to fill pays its import

    values = {
        name: quote(facts[name]) if facts.get(name) else placeholder
        for name, placeholder in PLACEHOLDERS.items()
    }
    return template.format_map(values)  # str.format's syntax; string.Formatter costs an import


def guess_checkpoint(paths: list[str]) -> dict[str, str | None]:
    """Checkpoint root and tag from paths the log mentions, if it names one."""
    for path in paths:
        parts = path.rstrip("/").split("/")
        for index, part in enumerate(parts):
            if part.startswith("global_step") and index > 0:
                return {"ckpt": "/".join(parts[:index]) or "/", "tag": part}
    for path in paths:
        if posixpath.basename(path) == "latest":
            return {"ckpt": posixpath.dirname(path), "tag": None}
    return {"ckpt": None, "tag": None}
