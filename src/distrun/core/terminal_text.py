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

# Bytes that may start something a terminal obeys: C0 controls but \b \t \n \r, DEL, and 0xC2
# (the lead byte of the UTF-8 encoded C1 controls U+0080-U+009F).
_CONTROL_BYTES = bytes([*range(0x00, 0x08), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, 0xC2])
_OTHER_BYTES = _CONTROL_BYTES.replace(b"\x1b", b"")
_SGR = re.compile(rb"\[[0-9;:]{0,64}m")  # after an ESC: colours and text attributes, kept
_OTHER = re.compile(rb"[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]|\xc2[\x80-\x9f]")


def _caret(match: re.Match[bytes]) -> bytes:
    found = match.group()
    if found[0] == 0xC2:
        return b"^[" + bytes([found[1] - 0x40])
    return b"^?" if found[0] == 0x7F else b"^" + bytes([found[0] + 0x40])


def neutral(data: bytes) -> bytes:
    """`data` with every control sequence but colours made harmless, as bytes.

    Speed matters: the live stream passes every byte through here. Text without any control
    byte is found so by one `translate` in C and returned as it is; ESC sequences are handled
    per ESC (split in C), the rarer other controls by one regular expression pass.
    """
    if len(data.translate(None, _CONTROL_BYTES)) == len(data):
        return data
    if b"\x1b" in data:
        parts = data.split(b"\x1b")
        pieces = [parts[0]]
        for part in parts[1:]:
            pieces.append(b"\x1b" if _SGR.match(part) else b"^[")
            pieces.append(part)
        data = b"".join(pieces)
    if len(data.translate(None, _OTHER_BYTES)) != len(data):
        data = _OTHER.sub(_caret, data)
    return data


def neutral_text(text: str) -> str:
    """The same for text (messages, summaries)."""
    return neutral(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
