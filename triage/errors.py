"""User-facing errors and the exit codes they map to (docs/exit-codes.md)."""

# Exit codes are a contract with scripts and pipelines: never renumber them.
EXIT_FOUND = 0  # a checkpoint-load cause was identified
EXIT_UNKNOWN = 1  # ran fine, no checkpoint-load failure recognised
EXIT_USAGE = 2  # bad command line (argparse uses 2 as well)
EXIT_BAD_INPUT = 3  # the log could not be read: missing, binary, unreadable
EXIT_BAD_RULES = 4  # the knowledge base is invalid (a rule file, the schema)
EXIT_UNTRUSTED = 5  # a real load refused: a file it would open is not verified safe (--trust-checkpoint)
EXIT_TIMEOUT = 6  # a real load or converter ran past --timeout; it and every process it started were killed
EXIT_MISSING = 7  # an optional part is not installed or cannot start (batch: pyspark, Java; --reproduce,
#                   repair --apply: torch, DeepSpeed): the command cannot be used here
EXIT_INTERNAL = 70  # a bug in ds-triage itself (EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
# `ds-triage probe` reads the other way round: 0 when the checkpoint shows nothing wrong.
EXIT_PROBE_CLEAN = 0  # every probe refuted its problem or could not tell
EXIT_PROBE_FOUND = 1  # at least one probe confirmed a problem


class TriageError(Exception):
    """An error the user can act on; printed as one line, never a traceback."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadInput(TriageError):
    exit_code = EXIT_BAD_INPUT


class BadRules(TriageError):
    exit_code = EXIT_BAD_RULES

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class UsageError(TriageError):
    exit_code = EXIT_USAGE


class MissingDependency(TriageError):
    """An optional part a command needs is not installed or cannot start: the command cannot be used here."""

    exit_code = EXIT_MISSING


class TimedOut(TriageError):
    """A real DeepSpeed load or converter ran past its time limit and was killed, with its children."""

    exit_code = EXIT_TIMEOUT
