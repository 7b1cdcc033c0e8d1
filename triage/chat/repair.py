"""/repair ACTION: `ds-triage repair` run through its own command line, never re-implemented.

First the dry run (it writes nothing): its plan is shown as the CLI prints it, and its JSON
says what applying would write, replace and back up. Only after a yes to a question that
names those paths does the chat run it again with --apply, the output pinned with --out to
the path that was confirmed.
"""

from __future__ import annotations

import json
import shlex
import sys

from triage.chat import readonly
from triage.chat.reply import Reply, reply
from triage.chat.session import CommandRun, Session

DRY_RUN_TIMEOUT = 120.0
APPLY_TIMEOUT = 3600.0  # fp32 and universal run DeepSpeed's converters: minutes on a large checkpoint


def _argv(session: Session, action: str, *extra: str) -> list[str]:
    argv = ["repair", action, session.facts["ckpt"]]
    if session.facts.get("config"):
        argv += ["--config", session.facts["config"]]
    tag = session.report.facts.get("tag") if session.report else None
    if tag:
        argv += ["--tag", tag]
    return argv + list(extra)


def _run(session: Session, argv: list[str], timeout: float) -> CommandRun:
    """Run `ds-triage ARGV` with this interpreter; recorded as the command a person would type."""
    run = readonly.execute([sys.executable, "-m", "triage", *argv], shlex.join(["ds-triage", *argv]), timeout)
    session.commands.append(run)
    return run


def plan(conv, action: str) -> Reply:
    from triage.chat.replies import command_run

    session = conv.session
    shown = _run(session, _argv(session, action), DRY_RUN_TIMEOUT)
    out = reply(*command_run(shown))
    if shown.returncode != 0:
        return out + reply("The repair cannot be planned; nothing was written.")
    as_json = readonly.execute([sys.executable, "-m", "triage", *_argv(session, action, "--json")], "",
                               DRY_RUN_TIMEOUT)
    try:
        p = json.loads(as_json.output)["plan"]
    except (ValueError, KeyError):
        return out + reply("Could not read the plan's JSON; nothing was written. Run the command yourself.")
    writes = [f"{path} (new)" for path in p["writes"]] + [f"{path} (replaced)" for path in p["replaces"]]
    writes += [f"{path} (backup)" for path in p["backups"]]
    if not writes:
        return out + reply("Nothing to write: the plan has no changes.")
    pinned = ["--out", p["out"]] if p.get("out") and p["out"] in p["writes"] else []
    question = f"Apply it? It writes: {', '.join(writes)}. [y/N]"
    return out + conv.confirm(question, lambda: _apply(session, action, pinned))


def _apply(session: Session, action: str, pinned: list[str]) -> Reply:
    from triage.chat.replies import command_run

    return reply(*command_run(_run(session, _argv(session, action, "--apply", *pinned), APPLY_TIMEOUT)))
