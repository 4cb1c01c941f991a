"""Finding JSON objects in free text (model replies), shared by the protocols' parsers. Model output is
data: it is scanned and parsed, never evaluated."""

from __future__ import annotations

__all__ = ["json_object_spans"]


def json_object_spans(text: str) -> list[str]:
    """Top-level ``{...}`` spans, skipping braces inside double- or single-quoted strings."""
    spans = []
    depth, start, quote, i, n = 0, -1, None, 0, len(text)
    while i < n:
        c = text[i]
        if quote is not None:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == '"' or (c == "'" and depth > 0):
            quote = c
        elif c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
        i += 1
    return spans
