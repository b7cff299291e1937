"""The one error type for bad input.

Every problem a user can fix in their files (a malformed manifest, an unknown plugin,
an invalid quantity, a cycle in queue parents) is raised as :class:`InputError`, naming
where it was found. The CLI turns it into one line on stderr and exit code 2; nothing is
applied when it is raised.
"""

from __future__ import annotations


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
        return f"{prefix}: {self.message}" if prefix else self.message

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
