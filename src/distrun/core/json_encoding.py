"""How distrun encodes JSON: compact for the files it reads back, indented only where it is small.

Python's `json` uses its C encoder only without `indent` (and only for a whole `dumps`, not
`iterencode`); with `indent` it falls back to a pure-Python encoder about 3-4x slower. A
1024 x 8 plan is 13.5 MB of indented JSON: 0.5 s to encode that way, against about 0.15 s
compact. So plan.json and the other files that grow with the job are written compact (no one
reads them by hand; `distrun plan` and `job show` show them), and what a user is shown is
indented only while that stays cheap.
"""

from __future__ import annotations

import json
from typing import Any

# Above this many bytes of compact JSON (a plan of about 1,200 processes), `shown_json` prints
# it compact: indenting 1 MB in pure Python takes ~0.05 s, a 1024 x 8 plan (8-9 MB compact)
# over 1 s, for a text no one reads by eye (`jq .` indents it when wanted). Below it, the
# usual indented form, which is what people do read.
MAX_INDENTED_BYTES = 1 << 20

_COMPACT = (",", ":")


def compact_json(data: Any, *, sort_keys: bool = False) -> bytes:
    """`data` as compact UTF-8 JSON, encoded by the C encoder: for files distrun reads back."""
    return json.dumps(data, separators=_COMPACT, sort_keys=sort_keys).encode("utf-8")


def shown_json(data: Any) -> str:
    """`data` as JSON for a user (`-o json`): indented by 2 when small, compact when large.

    Values JSON has no type for (a datetime, a path) are shown as their str().
    """
    compact = json.dumps(data, separators=_COMPACT, default=str)
    if len(compact) > MAX_INDENTED_BYTES:
        return compact
    return json.dumps(data, indent=2, default=str)
