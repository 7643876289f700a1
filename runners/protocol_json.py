"""Reads a runner-protocol line as JSON the way ptecheck's reader (serde_json) reads it, so that
both ends of the protocol accept and refuse the same lines (docs/runner-protocol.md, §4).

Python's json module, left to itself, takes more than serde_json: bare NaN and Infinity,
1e400 (as inf), unpaired surrogate escapes, a byte order mark, UTF-16 text and nesting up to
about a thousand levels; and it reads -0 as the integer 0. `loads` refuses each of those and
reads -0 as -0.0. Standard library only, so it is tested without torch:
`python3 runners/test_protocol_json.py`.
"""

import json
import re

# serde_json refuses the 128th array or object nested in another.
MAX_NESTING = 127

_INF = float("inf")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _not_json_constant(name):
    raise ValueError("%s is not a JSON value" % name)


def _json_float(text):
    """A number with a fraction or an exponent; out of float64's range it is refused, not read
    as inf."""
    x = float(text)
    if x in (_INF, -_INF):
        raise ValueError("number %s out of range" % text[:32])
    return x


def _json_int(text):
    """An integer: `-0` is the float -0.0, and one outside both int64 and uint64 a float
    (refused out of float64's range)."""
    if text == "-0":
        return -0.0
    v = int(text)
    if -(1 << 63) <= v < (1 << 64):
        return v
    return _json_float(text)


def _check_tree(doc):
    """Refuses nesting past MAX_NESTING and a string (or member name) holding a lone surrogate."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                raise ValueError("an unpaired surrogate escape")
            continue
        if depth > MAX_NESTING:
            raise ValueError("recursion limit exceeded")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and _LONE_SURROGATE.search(key):
                raise ValueError("an unpaired surrogate escape")
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1))
            elif isinstance(item, str):
                stack.append((item, depth))


def loads(line):
    """The JSON value of `line` (bytes or str), refused with ValueError as serde_json would."""
    # Strict UTF-8: bytes that are not UTF-8 (surrogates encoded in them included) are refused,
    # and a str starting with a byte order mark is refused by json itself.
    text = line.decode("utf-8") if isinstance(line, (bytes, bytearray)) else line
    try:
        doc = json.loads(text, parse_constant=_not_json_constant, parse_int=_json_int,
                         parse_float=_json_float)
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
    # Only a text with that many brackets can nest that deep, and only an escape can make a
    # lone surrogate: most lines need no walk.
    if text.count("[") + text.count("{") > MAX_NESTING or "\\u" in text:
        _check_tree(doc)
    return doc
