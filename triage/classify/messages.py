"""Recognise a catalogued raise site from its message alone, with or without the rest.

The message index (`triage.kb.messages`) holds what every raise site on the load path prints.
A paste that holds a site's message (folded alike: no white space, one quote character, NFKC,
lower case) names that site even without its exception type, its frames or the `raise` line;
each rule that covers the site becomes a hypothesis. Their order: a rule whose own message
regex matches the text comes before the rules that only cover the site, and the type, the
frames through the site's file and the rule's boosts (surrounding lines) raise confidence.

Where the text was reformatted beyond folding (a typo, a truncated or reworded message),
`find_sites_fuzzy` compares the index's pieces with rapidfuzz, weaker, and only where no rule
fired in a failure or a paste (triage.classify.partial): FUZZY_THRESHOLD says how the
similarity it needs was measured.

The index fills in for what a paste lacks; it does not overrule a whole traceback: where the
exception's frames are all there and a covering rule fired on them, the rules that did not
fire stay out (triage.classify.partial.site_hypotheses).
"""

from __future__ import annotations

import bisect
from triage.kb.messages import SiteMessage, fold
from triage.record import Record

GAP = 1000  # folded characters one placeholder may fill (a path, a list of keys)
LAST_LINES = 40  # a paste's message without its type is near its end
NEIGHBOURS = 3  # lines around an error-ish line: a message wrapped at 80 columns
MAX_BLOCK_LINES = 800
ANCHOR_TRIES = 8
# Bounds on the folded text searched, whatever the log holds: each site's anchor is looked for
# in all of it, so its size times the ~300 sites is the cost. The corpus's largest block is 5,160
# characters; a message of 100,000 (a list of 2,000 keys) is read that far; past 1,000,000 in
# all (200 exceptions of 5,000), a block is left out.
MAX_BLOCK_CHARS = 100_000
MAX_HAYSTACK = 1_000_000
FUZZY_BLOCK_CHARS = 10_000  # of each block, compared with rapidfuzz: a paste's message is shorter

# Confidence of a hypothesis from the index: below a rule's own patterns (0.6 - 0.95), at or
# above triage.classify.match.MIN_CONFIDENCE (0.35) always: a known site is never `unknown`.
STRONG = 0.55  # the rule's own message regex matches the text too
UNSHOWN = 0.03  # less, for each condition of that pattern the text cannot show (a frame, a line)
WEAK = 0.42  # the rule covers the site, its message regexes do not match (or it has none)
TYPED = 0.08  # the exception type is the site's
OTHER_TYPE = -0.05  # another type stands before the message
FRAMED = 0.08  # a frame of the exception is in the site's file
IN_FUNCTION = 0.04  # ... and in the site's function
ELSEWHERE = -0.05  # the exception has frames, none in the site's file
FUZZY = -0.05  # the text only resembles the message
FLOOR = 0.36  # above MIN_CONFIDENCE, whatever lowered it

# partial_ratio similarity at which reformatted text counts as a site's message. Measured, not
# guessed (tests/test_site_messages.py measures it again): the most similar text any site finds
# in the corpus's 11 negative and 91 clean logs scores 75.7 ("loading 2 zero partition checkpoints
# for rank 1" against "Missing ZeRO optimizer checkpoint for rank {rank}"); 82 keeps 6 points
# above that. At 82, of the catalogue's messages (placeholders filled): one typo in 20 characters
# 100% found, one word changed 92%, the last quarter cut off 82%, the last half 50%.
FUZZY_THRESHOLD = 82.0


class Block(Record):
    """Consecutive normalized lines (or one exception's `Type: message`), folded into one string."""

    _fields = ("start", "text", "raw", "line_nos", "offsets", "exc")

    def __init__(self, start: int, text: str, raw: str, line_nos: list[int], offsets: list[int], exc: object = None):
        self.start = start  # offset of the block in the joined haystack
        self.text = text  # folded
        self.raw = raw  # the lines joined by a space, unfolded: what a rule's message regex reads
        self.line_nos = line_nos  # Line.no of each line
        self.offsets = offsets  # folded offset (in text) where each line starts
        self.exc = exc  # the RaisedException, for an exception block


class SiteHit(Record):
    _fields = ("site", "block", "line_no", "type_state", "framed", "similarity")

    def __init__(self, site: SiteMessage, block: Block, line_no: int | None, type_state: str, framed: int,
                 similarity: float = 100.0):
        self.site, self.block, self.line_no = site, block, line_no
        self.type_state = type_state  # "same" | "absent" | "other"
        self.framed = framed  # -1: frames, none in the site's file; 0: no frames; 1: one in its file; 2: in its function
        self.similarity = similarity  # < 100: a fuzzy hit


def blocks(view) -> list[Block]:
    """Where a site's message may stand: each parsed exception, the last lines, the error-ish lines."""
    if getattr(view, "site_blocks", None) is None:
        view.site_blocks = _blocks(view)
    return view.site_blocks


def _blocks(view) -> list[Block]:
    out: list[Block] = []
    offset = 0
    for exc in view.exceptions:
        if offset >= MAX_HAYSTACK:
            break
        raw = f"{exc.type}: {exc.message}"
        text = fold(raw)[:MAX_BLOCK_CHARS]
        out.append(Block(offset, text, raw, [exc.log_line], [0], exc))
        offset += len(text) + 1
    if any(exc.frames for exc in view.exceptions):
        return out  # a traceback holds the message in its exception: a long log's lines need no search
    # No traceback to hold the message: it may stand near the end or on any error-ish line (with
    # the lines around it, where a wrap at 80 columns put its rest).
    lines = view.lines
    chosen: set[int] = set(range(max(0, len(lines) - LAST_LINES), len(lines)))
    for index in view.errorish_lines():
        chosen.update(range(max(0, index - NEIGHBOURS), min(len(lines), index + NEIGHBOURS + 1)))
        if len(chosen) >= MAX_BLOCK_LINES:
            break
    run: list[int] = []
    for index in sorted(chosen):
        if run and index != run[-1] + 1:
            out.append(_block(lines, run, offset))
            offset += len(out[-1].text) + 1
            run = []
            if offset >= MAX_HAYSTACK:
                return out
        run.append(index)
    if run:
        out.append(_block(lines, run, offset))
    return out


def _block(lines, run: list[int], start: int) -> Block:
    texts, offsets, at = [], [], 0
    for index in run:
        if at >= MAX_BLOCK_CHARS:
            run = run[:len(offsets)]
            break
        offsets.append(at)
        folded = fold(lines[index].text)[:MAX_BLOCK_CHARS]
        texts.append(folded)
        at += len(folded)
    return Block(start, "".join(texts)[:MAX_BLOCK_CHARS], " ".join(lines[i].text.strip() for i in run),
                 [lines[i].no for i in run], offsets)


def find_sites(view, index) -> list[SiteHit]:
    """Every site of the index (triage.kb.messages.MessageIndex) whose pieces all stand, in order, in one block."""
    found = blocks(view)
    if not found:
        return []
    haystack = "\0".join(block.text for block in found)
    starts = [block.start for block in found]
    hits = []
    for site, anchor in index.anchored:
        hit = _find(site, anchor, haystack, found, starts)
        if hit is not None:
            hits.append(hit)
    return hits


def _find(site: SiteMessage, anchor: int, haystack: str, found: list[Block], starts: list[int]) -> SiteHit | None:
    pieces = site.pieces
    at = -1
    for _ in range(ANCHOR_TRIES):
        at = haystack.find(pieces[anchor], at + 1)
        if at < 0:
            return None
        block = found[bisect.bisect_right(starts, at) - 1]
        span = _around(pieces, anchor, block.text, at - block.start)
        if span is None:
            continue
        hit = _hit(site, block, *span)
        if hit is not None:
            return hit
    return None


def _around(pieces, anchor: int, text: str, at: int) -> tuple[int, int] | None:
    """(start, end) of the pieces in order around the anchor's position, or None."""
    low = at
    for piece in reversed(pieces[:anchor]):
        found = text.rfind(piece, max(0, low - GAP - len(piece)), low)
        if found < 0:
            return None
        low = found
    high = at + len(pieces[anchor])
    for piece in pieces[anchor + 1:]:
        found = text.find(piece, high, high + GAP + len(piece))
        if found < 0:
            return None
        high = found + len(piece)
    return low, high


def _hit(site: SiteMessage, block: Block, start: int, end: int, similarity: float = 100.0) -> SiteHit | None:
    exc = block.exc
    if exc is not None:
        same = _same_type(site, exc.short_type)
        type_state = "same" if same else "other"
        framed = _framed(site, exc)
        line_no = exc.log_line
    else:
        before = block.text[max(0, start - 300):start]
        type_state = _type_before(site, before)
        framed = 0
        line_no = block.line_nos[bisect.bisect_right(block.offsets, start) - 1]
    if site.needs_type and type_state != "same":
        return None
    return SiteHit(site, block, line_no, type_state, framed, similarity)


def _same_type(site: SiteMessage, short_type: str) -> bool:
    raised = site.short_exception
    # `raise e` / `raise type(e)(...)` re-raise what was caught: any type.
    return raised == short_type or not raised[:1].isupper()


def _type_before(site: SiteMessage, before: str) -> str:
    """Whether the folded text just before the message ends with the site's `Type:`, another, or none.
    A template that opens with a placeholder (`{dir} is not a folder`) has its value between."""
    key = fold(site.short_exception) + ":"
    if before.endswith(key) or (not site.short_exception[:1].isupper() and before.endswith(":")):
        return "same"
    if _raised_as(before, fold(site.short_exception)):
        return "same"
    if site.opens_with_placeholder and (key in before or fold(site.short_exception) + "(" in before):
        return "same"  # the value (or, in a raise line, the unfilled placeholder) stands between
    return "other" if before.endswith(("error:", "exception:")) else "absent"


def _raised_as(before: str, folded_type: str) -> bool:
    """The folded text ends with the site's own raise call, `raise ValueError(f"` (a pasted source
    line, its template unfilled): that names the type as `ValueError:` does."""
    if not before.endswith("'"):
        return False
    call = before[:-1].rstrip("rfbu")  # the string's prefix: f"...", rb"..."
    return call.endswith(folded_type + "(")


def _framed(site: SiteMessage, exc) -> int:
    path = site.source  # deepspeed/utils/zero_to_fp32.py
    bare = site.function.rsplit(".", 1)[-1]
    best = -1 if exc.frames else 0
    for frame in exc.frames:
        if frame.file.endswith("/" + path) or frame.file == path:
            best = max(best, 1 + (frame.function == bare))
    return best


def confidence(hit: SiteHit, unshown: int | None) -> float:
    """`unshown`: None when no message regex of the rule matches; else how many of its pattern's
    other conditions (frames, lines) the text cannot show: a rule that needs fewer comes first."""
    value = WEAK if unshown is None else STRONG - UNSHOWN * unshown
    if hit.type_state == "same":
        value += TYPED
    elif hit.type_state == "other":
        value += OTHER_TYPE
    if hit.framed > 0:
        value += FRAMED + (IN_FUNCTION if hit.framed == 2 else 0)
    elif hit.framed < 0:
        value += ELSEWHERE
    if hit.similarity < 100:
        value += FUZZY
    return max(FLOOR, value)


def describe(hit: SiteHit) -> str:
    how = "the message" if hit.similarity >= 100 else f"text {hit.similarity:.0f}% similar to the message"
    extra = {"same": f", raised as {hit.site.short_exception}", "other": ", under another exception type",
             "absent": ", without its exception type"}[hit.type_state]
    if hit.framed > 0:
        extra += ", frames in " + ("that function" if hit.framed == 2 else "that file")
    elif hit.framed < 0:
        extra += ", frames elsewhere"
    return f"{how} of the raise in {hit.site.function} ({hit.site.source}:{hit.site.line}){extra}"


# --- reformatted text: rapidfuzz over the same blocks -------------------------------------------

PREFILTER = 0.5  # share of the longest piece's 4-grams a block must hold before rapidfuzz runs


def fuzzy_scores(view, index) -> list[tuple[float, SiteMessage, Block, int]]:
    """(similarity 0-100, site, block, where in the block) of each site with text enough, best block each.

    The similarity is rapidfuzz's partial_ratio of each piece against the folded block, averaged
    by the pieces' lengths: a typo, a changed word or a cut end costs a few points."""
    from rapidfuzz import fuzz

    found = blocks(view)
    size = index.GRAM
    texts = [block.text[:FUZZY_BLOCK_CHARS] for block in found]
    grams = [{text[i:i + size] for i in range(len(text) - size + 1)} for text in texts]
    out = []
    for site, scored, anchor, wanted in index.fuzzy_entries():
        best = None
        for block, text, have in zip(found, texts, grams):
            if len(wanted & have) < PREFILTER * len(wanted):
                continue
            total = sum(len(p) * fuzz.partial_ratio(p, text) for p in scored) / sum(map(len, scored))
            if best is None or total > best[0]:
                where = fuzz.partial_ratio_alignment(anchor, text).dest_start
                best = (total, site, block, where)
        if best is not None:
            out.append(best)
    return out


def find_sites_fuzzy(view, index, threshold: float = FUZZY_THRESHOLD) -> list[SiteHit]:
    hits = []
    for similarity, site, block, where in fuzzy_scores(view, index):
        if similarity >= threshold:
            hit = _hit(site, block, where, where, similarity)
            if hit is not None:
                hits.append(hit)
    return hits
