"""Which quoting context of bash each `${{...}}` reference of a command stands in, and how a
value is written there so that bash hands the program exactly its text.

Where bash reads a value decides how it must be written: bare, inside "double quotes", inside
'single quotes', inside $'...', inside an unquoted or a quoted here-document. Other places
(`backticks`, `${VAR...}`, `$(( arithmetic ))`) re-read or evaluate what they hold, so no
writing makes every value safe there: only a plain word (letters, digits, `@%+=:,./-_`) or
nothing is written there, anything else is refused; a comment takes any value without a newline.

Pure functions over the command text: a small scanner of bash's quoting rules, not a parser.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Context(Enum):
    BARE = "bare"
    DOUBLE = "double quotes"
    SINGLE = "single quotes"
    ANSI_C = "$'...' quotes"
    HEREDOC = "a here-document"
    QUOTED_HEREDOC = "a quoted here-document"
    COMMENT = "a comment"
    BACKTICK = "`backticks`"
    PARAMETER = "a ${...} expansion"
    ARITHMETIC = "an arithmetic expression"


# Contexts that re-read or evaluate their text: they win over any quoting inside them.
_REREAD = (Context.COMMENT, Context.BACKTICK, Context.PARAMETER, Context.ARITHMETIC)
# Never shell syntax in any context (shlex's set of characters it leaves unquoted).
_PLAIN = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
_HEREDOC_START = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|(\\?)([^\s;&|<>()'\"]+))")


class UnsafePlacement(ValueError):
    """A value that no writing in its context hands the program as exactly its text."""

    def __init__(self, context: Context) -> None:
        super().__init__(context.value)
        self.context = context


@dataclass(frozen=True)
class _Heredoc:
    delimiter: str
    strip_tabs: bool
    quoted: bool


@dataclass
class _Frame:
    kind: Context  # BARE for the top level and for the inside of $( ... )
    depth: int = 0  # ( or { opened inside this frame and not closed yet
    heredoc: _Heredoc | None = None


def contexts(command: str, spans: Sequence[tuple[int, int]]) -> list[Context]:
    """The context of each span (start, end) of `command`; spans are sorted, do not overlap, and
    each is read as one opaque word (a `${{...}}` reference), never as the characters it holds."""
    scanner = _Scanner(command)
    found: list[Context] = []
    for start, end in spans:
        scanner.advance_to(start)
        found.append(scanner.context())
        scanner.skip_to(end)
    return found


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.stack = [_Frame(Context.BARE)]
        self.pending: list[_Heredoc] = []  # here-documents whose bodies start at the next newline

    def context(self) -> Context:
        kinds = [frame.kind for frame in self.stack]
        for kind in _REREAD:
            if kind in kinds:
                return kind
        return kinds[-1]

    def skip_to(self, end: int) -> None:
        self.i = end

    def advance_to(self, target: int) -> None:
        while self.i < target:
            self.step()

    def step(self) -> None:
        top, text, i = self.stack[-1], self.text, self.i
        c, two = text[i], text[i : i + 2]
        if top.heredoc is not None:
            if self._heredoc_step(top, top.heredoc):
                return
            if top.kind == Context.QUOTED_HEREDOC or c not in "\\$`":
                self.i += 1
                return
        if top.kind == Context.SINGLE:
            self._close_if(c == "'")
        elif top.kind == Context.COMMENT:
            if c == "\n":
                self.stack.pop()  # the newline itself is read by the context below
            else:
                self.i += 1
        elif c == "\\":
            self.i += 2
        elif top.kind == Context.ANSI_C:
            self._close_if(c == "'")
        elif (top.kind, c) in ((Context.BACKTICK, "`"), (Context.DOUBLE, '"')):
            self._close_if(True)
        elif text.startswith("$((", i):
            self._open(Context.ARITHMETIC, 3)
        elif two == "$(":
            self._open(Context.BARE, 2)
        elif two == "${":
            self._open(Context.PARAMETER, 2)
        elif c == "`":
            self._open(Context.BACKTICK, 1)
        elif top.kind in (Context.DOUBLE, Context.HEREDOC):
            self.i += 1
        elif top.kind == Context.PARAMETER:
            self._nested(top, c, "{", "}")
        elif top.kind == Context.ARITHMETIC:
            self._nested(top, c, "(", ")")
        else:
            self._bare(top, c, two)

    def _open(self, kind: Context, width: int) -> None:
        self.stack.append(_Frame(kind))
        self.i += width

    def _close_if(self, closes: bool) -> None:
        if closes:
            self.stack.pop()
        self.i += 1

    def _nested(self, top: _Frame, c: str, opening: str, closing: str) -> None:
        if c in "'\"" and top.kind == Context.PARAMETER:
            self._open(Context.SINGLE if c == "'" else Context.DOUBLE, 1)
            return
        if c == opening:
            top.depth += 1
        elif c == closing:
            if top.depth == 0:
                self.stack.pop()
                if closing == ")" and self.text.startswith("))", self.i):
                    self.i += 1
            else:
                top.depth -= 1
        self.i += 1

    def _bare(self, top: _Frame, c: str, two: str) -> None:
        text, i = self.text, self.i
        word_start = i == 0 or text[i - 1] in " \t\n;&|()"
        if two == "$'":
            self._open(Context.ANSI_C, 2)
        elif c == "'":
            self._open(Context.SINGLE, 1)
        elif c == '"':
            self._open(Context.DOUBLE, 1)
        elif c == "#" and word_start:
            self._open(Context.COMMENT, 1)
        elif two == "((" and word_start:
            self._open(Context.ARITHMETIC, 2)
        elif c in "()" and len(self.stack) > 1:
            if c == "(":
                top.depth += 1
            elif top.depth:
                top.depth -= 1
            else:
                self.stack.pop()
            self.i += 1
        elif two == "<<" and not text.startswith("<<<", i) and (match := _HEREDOC_START.match(text, i)):
            strip, single, double, backslash, plain = match.groups()
            word = single if single is not None else double if double is not None else plain
            self.pending.append(
                _Heredoc(word, strip == "-", single is not None or double is not None or bool(backslash))
            )
            self.i = match.end()
        elif c == "\n" and self.pending:
            self._start_heredoc()
            self.i += 1
        else:
            self.i += 1

    def _start_heredoc(self) -> None:
        here = self.pending.pop(0)
        kind = Context.QUOTED_HEREDOC if here.quoted else Context.HEREDOC
        self.stack.append(_Frame(kind, heredoc=here))

    def _heredoc_step(self, top: _Frame, here: _Heredoc) -> bool:
        """At a line's start, end the here-document on its delimiter line; True when it moved."""
        text, i = self.text, self.i
        if i == 0 or text[i - 1] != "\n":
            return False
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        line = text[i:end]
        if (line.lstrip("\t") if here.strip_tabs else line) != here.delimiter:
            return False
        self.stack.remove(top)
        self.i = end + 1
        if self.pending:  # the line's next here-document starts right away
            self._start_heredoc()
        return True


def escape_value(value: str, context: Context) -> str:
    """`value` written for `context` so that bash hands the program exactly its text.

    Raises UnsafePlacement where no writing of this value is safe (see the module's note)."""
    if context == Context.BARE:
        return shlex.quote(value)  # one word, whatever it holds
    if context == Context.SINGLE:
        return value.replace("'", "'\"'\"'")  # close the quotes around a quoted ', open again
    if context == Context.DOUBLE:
        return re.sub(r'([\\$`"])', r"\\\1", value)  # the four characters special inside "..."
    if context == Context.ANSI_C:
        return value.replace("\\", "\\\\").replace("'", "\\'")
    if context == Context.HEREDOC and "\n" not in value:  # a newline could end the document
        return re.sub(r"([\\$`])", r"\\\1", value)
    if context in (Context.QUOTED_HEREDOC, Context.COMMENT) and "\n" not in value:
        return value  # read as it is, up to the end of the line
    if not value or _PLAIN.fullmatch(value):
        return value
    raise UnsafePlacement(context)
