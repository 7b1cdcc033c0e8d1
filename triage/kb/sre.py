"""Python's own regex parser (`re._parser`, `sre_parse` before 3.11) and its opcodes.

The parse tree is what `triage.kb.regex` translates to RE2, what `triage.kb.pump` builds
pump strings from and what `triage.stream.literals` reads required literals from: read
from the parser, never by hand, so a pattern means to them what it means to `re`.
"""

from __future__ import annotations

try:  # the parser moved in 3.11; both expose parse() and the opcodes
    import re._constants as op
    import re._parser as parser
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as op  # type: ignore[no-redef]
    import sre_parse as parser  # type: ignore[no-redef]

MAXREPEAT = op.MAXREPEAT

__all__ = ["op", "parser", "MAXREPEAT"]
