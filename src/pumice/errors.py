"""The one error type for bad input.

Every problem a user can fix in their files (a malformed manifest, an unknown plugin,
an invalid quantity, a cycle in queue parents) is raised as :class:`InputError`, naming
where it was found. The CLI turns it into one line on stderr and exit code 2; nothing is
applied when it is raised. A message that shows a user's value uses :func:`shown` (or
:func:`shown_text` for names), which is short whatever the value is.
"""

from __future__ import annotations

from collections.abc import Mapping

#: How many characters of a user's value a message shows at most.
SHOWN_LIMIT = 80
#: Numbers with more digits than this are shown by their size (a number of 5,000
#: digits has no ``str``, and would drown the message).
_DIGITS = 40


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """``value`` as ``repr`` writes it, for an error message: at most about ``limit``
    characters, on one line, and never failing.

    The text is built piece by piece and stops once ``limit`` is reached, so a value
    that is huge, deeply nested or shares itself (YAML aliases) costs no more than a
    short one: the whole ``repr`` is never made and then cut."""
    out: list[str] = []
    room = _Room(limit)
    _show(value, out, room, 0)
    text = "".join(out)
    if room.cut:
        text = text[: max(limit - 3, 1)] + "..."
    return text.replace("\n", "\\n").replace("\r", "\\r")


def shown_text(value: object, limit: int = SHOWN_LIMIT) -> str:
    """A name for a message: a string as it is (cut, newlines escaped), anything else
    as :func:`shown` writes it."""
    if isinstance(value, str):
        text = value if len(value) <= limit else value[: max(limit - 3, 1)] + "..."
        return text.replace("\n", "\\n").replace("\r", "\\r")
    return shown(value, limit)


class _Room:
    """What is left of a message's budget of characters."""

    __slots__ = ("cut", "left")

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = False

    def take(self, out: list[str], text: str) -> bool:
        """Append ``text``; False once the budget is spent (the caller stops)."""
        if self.left <= 0:
            self.cut = True
            return False
        out.append(text[: self.left + 1])
        self.left -= len(text)
        if self.left < 0:
            self.cut = True
            return False
        return True


def _show(value: object, out: list[str], room: _Room, depth: int) -> bool:
    if isinstance(value, bool) or value is None:
        return room.take(out, repr(value))
    if isinstance(value, int):
        if value.bit_length() > _DIGITS * 3.33:
            digits = int(value.bit_length() * 0.30103) + 1
            return room.take(out, f"<a number of about {digits} digits>")
        return room.take(out, repr(value))
    if isinstance(value, float):
        return room.take(out, repr(value))
    if isinstance(value, str):
        return room.take(out, repr(value[: room.left + 2]))
    if isinstance(value, bytes):
        return room.take(out, repr(value[: room.left + 2]))
    if isinstance(value, Mapping):
        if depth >= 3:
            return room.take(out, "{...}")
        if not room.take(out, "{"):
            return False
        for i, (k, v) in enumerate(value.items()):
            if i and not room.take(out, ", "):
                return False
            if not (_show(k, out, room, depth + 1) and room.take(out, ": ")):
                return False
            if not _show(v, out, room, depth + 1):
                return False
        return room.take(out, "}")
    if isinstance(value, list | tuple | set | frozenset):
        ends = "[]" if isinstance(value, list) else "()" if isinstance(value, tuple) else "{}"
        if depth >= 3:
            return room.take(out, f"{ends[0]}...{ends[1]}")
        if not room.take(out, ends[0]):
            return False
        for i, item in enumerate(value):
            if i and not room.take(out, ", "):
                return False
            if not _show(item, out, room, depth + 1):
                return False
        return room.take(out, ends[1])
    return room.take(out, f"<{type(value).__name__}>")


def one_line(text: str) -> str:
    """``text`` on one line: line breaks become ``\\n`` (a name holding a newline
    still shows it) and nothing else changes."""
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")


class InputError(ValueError):
    """A user-fixable problem in the input, located by file, object and field."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        obj: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.obj = obj
        self.field = field
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.obj:
            where.append(self.obj)
        if self.field:
            where.append(f"field {self.field}")
        prefix = ": ".join(where)
        text = f"{prefix}: {self.message}" if prefix else self.message
        return one_line(text)

    def located(
        self, *, file: str | None = None, obj: str | None = None, field: str | None = None
    ) -> InputError:
        """Return a copy with missing location parts filled in (inner detail wins)."""
        return InputError(
            self.message,
            file=self.file or file,
            obj=self.obj or obj,
            field=self.field or field,
        )
