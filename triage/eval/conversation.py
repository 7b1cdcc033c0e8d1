"""`ds-triage eval --conversation` (issue 43, item 5): the chat's deciding questions, answered for real.

Every corpus case with a checkpoint here: kept (corpus/kept.py: the committed archives, unpacked
with the case's fault steps) or rebuilt (a direct DeepSpeed case without a step before its load:
its layout's trained baseline copied and its fault injected, as tests/probe_checkpoints.py and
`eval --with-checkpoints --committed-logs` make them). For each, a scripted user
(triage/evidence/scripted.py) reads the chat's deciding question (triage/evidence/question.py),
runs the asked command on that checkpoint through /run's policy and runner (read-only, no shell;
as the job's user when the case loaded as another one and this runs as root), pastes the output
and gets the next question, up to ANSWERS times. The paths the log names (the case dir its
generator run used) are this copy's; CKPT and TAG, when the log names none, are the dir its
load_checkpoint is given (a Trainer's newest checkpoint-N) and the tag it loads, as the person at
that checkpoint knows them. A case that cannot be made or talked through counts as not right.

Scored: top-1 after 0, 1 and 2 answers (the last one given, when the chat stopped asking sooner),
the questions asked, and the goal: top-1 >= TOP1_GOAL after at most ANSWERS answers on the cases
where the log alone is wrong (top-1 not the label) or ambiguous (its log is the same text as a
case of another cause: triage/eval/ambiguity.py), and no healthy checkpoint diagnosed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from triage import progress
from triage.eval.evaluate import UNKNOWN, Gate

TOP1_GOAL = 0.97
ANSWERS = 2
KINDS = ("failure", "silent", "clean")
GENERATED = "/tmp/ds-triage-corpus"  # where the corpus generator made a case whose command names no dir


@dataclass
class Talk:
    id: str
    source: str  # "kept" (an archive in corpus/checkpoints) or "rebuilt" (from a trained baseline)
    expected: str | None  # the category; None: a healthy checkpoint
    answers: list[str] = field(default_factory=list)  # the top category after 0, 1, ... answers
    statuses: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    hard: str = ""  # "wrong", "same log" (why the log alone does not decide it), "not made" or "failed"
    error: str = ""

    def top(self, n: int) -> str:
        return self.answers[min(n, len(self.answers) - 1)] if self.answers else UNKNOWN

    def right(self, n: int) -> bool:
        return self.expected is not None and self.top(n) == self.expected

    @property
    def diagnosed(self) -> bool:  # a healthy checkpoint given a cause (no conversation at all: no proof)
        return self.expected is None and (bool(self.error) or self.top(ANSWERS) != UNKNOWN)

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "expected": self.expected, "answers": self.answers,
                "statuses": self.statuses, "asked": self.asked, "hard": self.hard or None,
                "diagnosed": self.diagnosed, "error": self.error}


@dataclass
class ConversationEval:
    talks: list[Talk]
    seconds: float

    def failing(self, hard: bool = False) -> list[Talk]:
        return [t for t in self.talks if t.expected is not None and (t.hard or not hard)]

    def top1(self, talks: list[Talk]) -> list[int]:
        return [sum(t.right(n) for t in talks) for n in range(ANSWERS + 1)]

    @property
    def healthy(self) -> list[Talk]:
        return [t for t in self.talks if t.expected is None]

    @property
    def gates(self) -> list[Gate]:
        hard, diagnosed = self.failing(hard=True), [t.id for t in self.healthy if t.diagnosed]
        right = self.top1(hard)[-1]
        met = bool(hard) and right / len(hard) >= TOP1_GOAL
        return [
            Gate("conversation_top1", met, f"where the log alone is wrong or ambiguous, top-1 after at most "
                 f"{ANSWERS} answers {right}/{len(hard)} {'>=' if met else '<'} {TOP1_GOAL}"),
            Gate("conversation_healthy", not diagnosed, f"{len(diagnosed)} of {len(self.healthy)} healthy "
                 "checkpoints diagnosed" + (f" ({', '.join(diagnosed)})" if diagnosed else "")),
        ]

    def to_json(self) -> dict:
        failing, hard = self.failing(), self.failing(hard=True)

        def figures(talks: list[Talk]) -> dict:
            n = len(talks)
            return {"cases": n, "top1": self.top1(talks),
                    "top1_rate": [round(r / n, 4) if n else None for r in self.top1(talks)],
                    "mean_questions": round(sum(len(t.asked) for t in talks) / n, 3) if n else None}
        return {"cases": len(self.talks), "kept": sum(t.source == "kept" for t in self.talks),
                "answers": ANSWERS, "failing": figures(failing), "wrong_or_ambiguous": figures(hard),
                "healthy": len(self.healthy), "healthy_diagnosed": sum(t.diagnosed for t in self.healthy),
                "seconds": round(self.seconds, 1),
                "gates": {"passed": all(g.passed for g in self.gates), "top1_goal": TOP1_GOAL,
                          "checks": [g.to_json() for g in self.gates]},
                "talks": [t.to_json() for t in self.talks]}


# ---------------------------------------------------------------- the cases and their checkpoints

def cases(ids=None) -> list[tuple[dict, str]]:
    """(manifest case, "kept" | "rebuilt") for every case of KINDS with a checkpoint here (or `ids`)."""
    from corpus import kept
    from corpus.layouts import LAYOUTS

    from triage.eval.checkpoints import _manifest

    manifest = list(_manifest().values())
    archived = {c["id"] for c in kept.committed_cases(manifest, kinds=KINDS) if kept.archive_of(c["id"]).exists()}
    out = []
    for case in manifest:
        entry = kept._entry(case["id"])
        rebuilt = "@" not in case["id"] and entry.get("layout") and not entry.get("pre") \
            and not LAYOUTS[entry["layout"]].get("framework")
        if case["kind"] in KINDS and (case["id"] in archived or rebuilt) and (ids is None or case["id"] in ids):
            out.append((case, "kept" if case["id"] in archived else "rebuilt"))
    return out


def same_log() -> set[str]:
    """The labelled corpus cases whose log is the same text as a case of another cause's
    (triage/eval/ambiguity.py): no log-only answer is right for all of them."""
    from triage.eval.ambiguity import fingerprint, same_log_groups
    from triage.eval.corpus import load_cases, read_case_log
    from triage.kb.index import data_path

    corpus = str(data_path("corpus"))
    labelled = [(c.id, c.expected_category, fingerprint(read_case_log(corpus, c).text, c.id))
                for c in load_cases(corpus) if c.kind in ("failure", "silent")]
    return {case_id for group in same_log_groups(labelled) for case_id, _ in group}


def run(ids=None, work: Path | None = None, baselines: Path | None = None, rules=None, log=None) -> ConversationEval:
    """Make each case's checkpoint in `work` (a temporary dir by default, removed), the rebuilt ones from
    the trained baselines in `baselines` (default: those of `eval --with-checkpoints`, trained when
    missing), and hold the conversation on it."""
    from triage.eval import checkpoints
    from triage.kb import load_rules

    generate, _, _, table = checkpoints._generator()
    rules = rules or load_rules()
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    chosen, shared = cases(ids), same_log()
    started = time.monotonic()
    with _workspace(work) as work, contextlib.redirect_stdout(sys.stderr):  # the corpus code prints
        base = Path(baselines) if baselines else checkpoints.default_baselines()
        _trained([table[c["id"]]["layout"] for c, source in chosen if source == "rebuilt"], base, work)
        talks = []
        with progress.meter("eval: conversations held", len(chosen), unit="cases") as shown:
            for case, source in chosen:
                talks.append(_talk(case, source, case["id"] in shared, (work, base, generate, table), rules, log))
                shown.update()
    return ConversationEval(talks, time.monotonic() - started)


@contextlib.contextmanager
def _workspace(work: Path | None):
    """`work`, or a temporary dir removed afterwards; traversable by the users the cases loaded as."""
    from triage.eval.checkpoints import _remove

    path = Path(work) if work else Path(tempfile.mkdtemp(prefix="ds-triage-conversation-"))
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    try:
        yield path
    finally:
        if work is None:
            _remove(path)


def _trained(layouts: list[str], base: Path, work: Path) -> None:
    """The baselines of `layouts` in `base`: kept ones reused, missing ones trained (under its lock)."""
    from corpus import generate, runner

    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run training the same baselines: wait for it
        runner.EXT_DIR["path"] = str(generate.EXT_CACHE)
        if not all((base / f"{name}.json").exists() for name in layouts):
            generate.warm_up_ops(work)
        generate.build_bases(layouts, base)


def _talk(case: dict, source: str, shared: bool, making: tuple, rules, log) -> Talk:
    """making: (work dir, baselines dir, corpus.generate, the generator's scenarios by id)."""
    from corpus import kept

    from triage.eval import checkpoints
    from triage.evidence.scripted import answerer, converse

    talk = Talk(case["id"], source, None if case["kind"] == "clean" else case["expected_category"])
    work, base, generate, table = making
    try:
        if source == "kept":
            root = kept.unpack(case, work / case["id"])
            loaded = kept.given(case, root, loaded=True)
        else:
            ckpt, loaded, _, _ = checkpoints._made_without_load(table[case["id"]], case, generate, work, base)
            root = next(p for p in (ckpt, *ckpt.parents) if p.name == table[case["id"]]["layout"])
    except (Exception, SystemExit) as exc:  # a case that could not be made: scored as not right
        talk.error, talk.hard = f"not made: {exc}", "not made" if talk.expected else ""
        log(f"{case['id']}: {talk.error}")
        return talk
    user = re.match(r"--as-user (\d+)(?::(\d+))?", " ".join(checkpoints.as_user(case)))
    loaded = _resumed(loaded)
    run = answerer(os.path.commonpath([root, loaded]), (int(user.group(1)), int(user.group(2) or user.group(1)))
                   if user else None, _filler(case, root, loaded))
    made = _made(case)

    def pasted(command: str) -> str:  # as the host the log was made on shows it: the log's paths, not this copy's
        return run(command).replace(str(root), made)
    try:
        dialogue = converse((Path(kept.CORPUS) / case["log"]).read_text(errors="replace"), rules, pasted, ANSWERS)
    except Exception as exc:  # a bug in reading an answer: this case is not right, and says why
        talk.error = f"the conversation failed: {type(exc).__name__}: {exc}"
        talk.hard = "failed" if talk.expected else ""
        log(f"{case['id']}: {talk.error}")
        return talk
    talk.answers, talk.statuses, talk.asked = dialogue.answers, dialogue.statuses, dialogue.asked
    if talk.expected is not None:  # answers[0]: the log's own top-1
        talk.hard = "wrong" if talk.top(0) != talk.expected else "same log" if shared else ""
    return talk


def _resumed(path: Path) -> Path:
    """The dir DeepSpeed's load_checkpoint is given: `path`, or when it is a Trainer's output dir (no
    `latest`, no tag, checkpoint-N dirs) the newest checkpoint-N, as transformers' resume picks it."""
    if not path.is_dir() or (path / "latest").exists() or any(path.glob("global_step*")):
        return path
    steps = [p for p in path.glob("checkpoint-*") if p.is_dir() and p.name[len("checkpoint-"):].isdigit()]
    return max(steps, key=lambda p: int(p.name[len("checkpoint-"):])) if steps else path


def _made(case: dict) -> str:
    """The case dir its generator run used (the paths its log names)."""
    from corpus import kept

    pair, name = kept.pair_of(case["id"]), case["id"].split("@")[0]
    named = re.search(rf"(/[^\s'\"]*/{re.escape(name)})(?![^/\s'\"])", case.get("command", ""))
    return named.group(1) if named else "/".join([GENERATED] + ([pair] if pair else []) + [name])


def _filler(case: dict, root: Path, loaded: Path):
    """The asked command as the person at this copy types it: the generator's paths (the case dir its
    command names) are this copy's;
    CKPT the dir its load_checkpoint was given, TAG the tag it loads (its --tag, else what `latest` names)."""
    made = _made(case)
    tag = re.search(r"--tag\s+(\S+)", case.get("command", ""))
    latest = next((p / "latest" for p in (loaded, root) if (p / "latest").is_file()), None)
    tag = tag.group(1) if tag else latest.read_text().strip() if latest else "TAG"

    def fill(command: str) -> str:
        command = command.replace(made, str(root))
        return re.sub(r"\bTAG\b", tag, re.sub(r"\bCKPT\b", str(loaded), command))
    return fill
