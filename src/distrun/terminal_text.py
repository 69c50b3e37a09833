"""Making a job's output safe to show on the user's terminal.

A rank's output, a traceback in a summary or a name in an error message is text from the job,
and a terminal obeys escape sequences in it: OSC 52 writes the clipboard, OSC 0 the window
title, OSC 8 makes links, DCS and APC talk to the terminal itself, and cursor movement can
rewrite what is already on the screen (a "Completed" over a failure). So everything distrun
shows passes through `neutral`: colours (SGR, `ESC [ ... m`) stay, as do newlines, tabs,
backspaces and carriage returns (progress bars redraw their line with `\\r`); every other
control character is shown as caret text (`ESC` as `^[`, BEL as `^G`, the C1 controls
U+0080-U+009F as `^[` and their 7-bit letter), so the rest of the sequence prints as plain
text and does nothing. The per-rank log files keep the exact bytes; only what is shown
changes.
"""

from __future__ import annotations

import re

# One pass in C finds every control character; only those reach Python code.
_CONTROL = re.compile(
    rb"(\x1b\[[0-9;:]{0,64}m)"  # SGR: colours and text attributes, kept
    rb"|([\x00-\x07\x0b\x0c\x0e-\x1f\x7f])"  # C0 controls but \b \t \n \r, and DEL
    rb"|\xc2([\x80-\x9f])"  # C1 controls, UTF-8 encoded (U+009B is a CSI on some terminals)
)


def _caret(match: re.Match[bytes]) -> bytes:
    if match.group(1) is not None:
        return match.group(1)
    if match.group(2) is not None:
        code = match.group(2)[0]
        return b"^?" if code == 0x7F else b"^" + bytes([code + 0x40])
    return b"^[" + bytes([match.group(3)[0] - 0x40])


def neutral(data: bytes) -> bytes:
    """`data` with every control sequence but colours made harmless, as bytes."""
    return _CONTROL.sub(_caret, data)


def neutral_text(text: str) -> str:
    """The same for text (messages, summaries)."""
    return neutral(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
