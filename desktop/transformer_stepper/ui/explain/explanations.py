"""Explanation texts are content: one markdown file per stage in resources/explanations/,
named after the stage key. Placeholders `{name}` take the actual shapes and numbers; blocks
between `[[if flag]]` / `[[else]]` / `[[end]]` show only for some architectures."""
from __future__ import annotations

import re
import string
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from ...io.resources import resources_dir

_BODY = r"((?:(?!\[\[if ).)*?)"       # a block body holding no further [[if: innermost first
_BLOCK = re.compile(r"\[\[if (not )?(\w+)\]\]" + _BODY + r"(?:\[\[else\]\]" + _BODY + r")?\[\[end\]\]",
                    re.S)


def explanations_dir() -> Path:
    return resources_dir() / "explanations"


@lru_cache(maxsize=None)
def template(key: str) -> str:
    path = explanations_dir() / f"{key}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return f"*(no explanation text: {path} is missing)*"


class _Values(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(text: str, values: Mapping[str, object], flags: Mapping[str, bool]) -> str:
    def choose(match: re.Match) -> str:
        negate, flag, then, otherwise = match.groups()
        on = bool(flags.get(flag, False)) != bool(negate)
        return then if on else (otherwise or "")

    previous = None
    while previous != text:            # blocks may nest: resolve the innermost first
        previous = text
        text = _BLOCK.sub(choose, text)
    return string.Formatter().vformat(text, (), _Values(values))


def render_stage(key: str, values: Mapping[str, object], flags: Mapping[str, bool]) -> str:
    return render(template(key), values, flags)
