"""Command help from docstrings, as the terminal's width wraps it: the docstrings' own line
breaks inside a paragraph would otherwise stay in rich's wrapped column and leave ragged lines.
List items and indented lines keep their breaks."""

from __future__ import annotations

import inspect
import re

import typer

_KEEP_BREAK = re.compile(r"\s|[-*•]\s|\d+[.)]\s|[A-Z0-9_]+\s{2}")


def unwrapped(doc: str) -> str:
    """``doc`` with each paragraph's lines joined, except before a list item or an indented
    line."""
    out: list[str] = []
    for para in doc.strip().split("\n\n"):
        lines = para.split("\n")
        joined = [lines[0]]
        for line in lines[1:]:
            if _KEEP_BREAK.match(line) or _KEEP_BREAK.match(joined[-1]) and joined[-1][:1] == " ":
                joined.append(line)
            else:
                joined[-1] = f"{joined[-1]} {line.strip()}"
        out.append("\n".join(joined))
    return "\n\n".join(out)


def unwrap_help(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) its docstring, unwrapped, as its
    help, unless it states one."""
    for info in app.registered_commands:
        doc = inspect.getdoc(info.callback) if info.callback else None
        if info.help is None and doc:
            info.help = unwrapped(doc)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            unwrap_help(group.typer_instance)
