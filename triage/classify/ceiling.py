"""An upper bound of rapidfuzz's partial_ratio from character counts, so that a log none of
whose lines can reach a phrase's cutoff never imports rapidfuzz (~8 ms of a cold classify).

partial_ratio(a, b) aligns the shorter string (n characters) with substrings of the longer
one at most n long and scores 100 * 2 * LCS / (n + len(window)). A common subsequence holds
no more of each character than both sides do, so LCS <= the overlap of their character
counts; any substring at most n long lies inside some window of exactly n, whose overlap is
at least as large. With X the largest overlap of a window of n, every alignment scores at
most 100 * 2 * min(len, X) / (n + len) <= 100 * 2 * X / (n + X): that is the ceiling.
"""

from __future__ import annotations


def ceiling(a: str, b: str) -> float:
    """A score fuzz.partial_ratio(a, b) cannot exceed (tests/test_fuzzy_ceiling.py checks it)."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    n = len(short)
    if n == 0:
        return 100.0  # rapidfuzz's own answer varies with the other side; never rule it out
    need: dict[str, int] = {}
    for ch in short:
        need[ch] = need.get(ch, 0) + 1
    have = dict.fromkeys(need, 0)
    overlap = best = 0
    for i, ch in enumerate(long):  # a window of n slides along: one character in, one out
        if ch in need:
            count = have[ch]
            have[ch] = count + 1
            if count < need[ch]:
                overlap += 1
        if i >= n:
            out = long[i - n]
            if out in need:
                count = have[out] - 1
                have[out] = count
                if count < need[out]:
                    overlap -= 1
        if overlap > best:
            best = overlap
    return 200.0 * best / (n + best)
