"""Explanations written when read: a waiting job's reason as the facts it quotes.

Every cycle says why each waiting job waits (``Decisions.pending``). Most of those
sentences are never read: the simulator reads them when it samples, ``pumice cycle``
and ``pumice run`` when they print or write them, while a backlog of hundreds of jobs
is explained again in every cycle, with figures (what the cluster can take, what a
queue holds) that move with every pod that starts or ends. So the stages that explain
a backlog hand over a :class:`Said`: a function and the facts it quotes, captured as
they stand in the cycle (values that are never changed afterwards), rendered once, on
the first read. The sentence is the one the cycle would have written then.

:class:`Reasons` is ``Decisions.pending``: a mapping of job uid to sentence for every
reader, whose values may be held as :class:`Said` until read; :meth:`Reasons.said`
lends the held values to a reader that keeps them for later (the simulator's metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any


class Said:
    """A sentence made when first read: ``render(*facts)``, kept once made.

    Contract: ``facts`` are not changed after the ``Said`` is made (a list or array
    the cycle goes on changing must be copied first), and ``render`` reads nothing
    else that changes, so the sentence is the same whenever it is read."""

    __slots__ = ("_facts", "_render", "_text")

    def __init__(self, render: Callable[..., str], *facts: Any) -> None:
        self._render = render
        self._facts = facts
        self._text: str | None = None

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = self._render(*self._facts)
            self._facts = ()  # (the sentence is all that is needed now)
        return text

    def __repr__(self) -> str:
        return f"Said({str(self)!r})"


#: A sentence, or one to be made when read.
Text = str | Said


def _joined(sep: str, parts: tuple[Text, ...]) -> str:
    return sep.join(map(str, parts))


def join(sep: str, parts: list[Text]) -> Text:
    """``sep.join(parts)``, made when read if any part is."""
    for p in parts:
        if type(p) is not str:
            return Said(_joined, sep, tuple(parts))
    return sep.join(parts)  # type: ignore[arg-type]


class Reasons(MutableMapping[str, str]):
    """Job uid -> why it waits (``Decisions.pending``): read as strings, held as they
    were written (strings, or :class:`Said` rendered on first read and kept)."""

    __slots__ = ("_held",)

    def __init__(self, held: Mapping[str, Text] | None = None) -> None:
        self._held: dict[str, Text] = dict(held) if held else {}

    def __getitem__(self, uid: str) -> str:
        v = self._held[uid]
        if type(v) is str:
            return v
        text = self._held[uid] = str(v)
        return text

    def __setitem__(self, uid: str, text: Text) -> None:
        self._held[uid] = text

    def __delitem__(self, uid: str) -> None:
        del self._held[uid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, uid: object) -> bool:
        return uid in self._held

    def __repr__(self) -> str:
        return f"Reasons({dict(self.items())!r})"

    def hold(self, pairs: Iterable[tuple[str, Text]]) -> None:
        """Set many at once (``update``, without a call per job: a backlog's
        explanations are handed over in every cycle)."""
        self._held.update(pairs)

    def said(self) -> dict[str, Text]:
        """The values as held, for a reader that keeps them and reads few (the
        caller does not change the dict)."""
        return self._held

    def copy(self) -> Reasons:
        return Reasons(self._held)


__all__ = ["Reasons", "Said", "Text", "join"]
