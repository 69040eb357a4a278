"""Small English for the explanations: counts and lists said as a person would ("twice",
"positions 1 and 4"), never "2 time(s)" or "(positions 13)" for one."""
from __future__ import annotations

from typing import Sequence


def times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def listing(items: Sequence[object]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1] if words else ""


def counted(n: int, singular: str, plural: str = "") -> str:
    """'1 sentence', '3 sentences'."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def occurrences(positions: Sequence[int]) -> str:
    """How often a token occurs and where: 'once (position 3)', 'twice (positions 1 and 4)'."""
    where = "position" if len(positions) == 1 else "positions"
    return f"{times(len(positions))} ({where} {listing(positions)})"
