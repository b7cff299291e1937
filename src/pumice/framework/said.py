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
reader, whose values may be held as :class:`Said` until read; :meth:`Reasons.held`
lends what is held to a reader that keeps it for later (the simulator's metrics).

A backlog that waits is mostly refused for one reason said with one cycle's figures:
such a group is held as one :class:`Layer`, by reference (the jobs it covers and the
function that says why, with the cycle's figures captured once), not one value per job:
a parked backlog then costs a cycle nothing per job, and each sentence is made when
read.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
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


class Layer(Mapping[str, str]):
    """Many jobs' sentences said by one function, held by reference: ``say(job)`` for
    each of ``jobs`` (whose uids are ``uids``) whose ``keep`` flag is set (``index``:
    uid -> position), made on first read and kept.

    Contract: ``jobs``, ``uids``, ``keep`` and ``index`` are not changed once given
    (the caller hands over lists it made for this layer, or ones it replaces rather
    than changes), and ``say`` reads nothing that changes (it captured the cycle's
    figures), so every read says what the cycle would have said."""

    __slots__ = ("_index", "_jobs", "_keep", "_len", "_made", "_say", "_uids")

    def __init__(
        self,
        jobs: Sequence[Any],
        uids: Sequence[str],
        keep: Sequence[bool],
        index: Mapping[str, int],
        say: Callable[[Any], str],
        count: int,
    ) -> None:
        self._jobs = jobs
        self._uids = uids
        self._keep = keep
        self._index = index
        self._say = say
        self._len = count
        self._made: dict[str, str] = {}

    def __getitem__(self, uid: str) -> str:
        text = self._made.get(uid)
        if text is not None:
            return text
        i = self._index.get(uid)
        if i is None or not self._keep[i]:
            raise KeyError(uid)
        text = self._made[uid] = self._say(self._jobs[i])
        return text

    def __contains__(self, uid: object) -> bool:
        i = self._index.get(uid)  # type: ignore[call-overload]
        return i is not None and bool(self._keep[i])

    def __iter__(self) -> Iterator[str]:
        return itertools.compress(self._uids, self._keep)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"Layer({dict(self.items())!r})"

    def same_jobs(self, other: Layer) -> bool:
        """Whether ``other`` holds the sentences of the same jobs (made of the same
        jobs, with the same ones kept)."""
        return self._uids is other._uids and self._keep == other._keep


class Reasons(MutableMapping[str, str]):
    """Job uid -> why it waits (``Decisions.pending``): read as strings, held as they
    were written (strings, or :class:`Said` rendered on first read and kept), and
    :class:`Layer` s held by reference (:meth:`lay`).

    Contract: a layer's jobs are not written one by one as well (the layers and the
    values written are of different jobs)."""

    __slots__ = ("_held", "_layers")

    def __init__(
        self, held: Mapping[str, Text] | None = None, layers: Sequence[Layer] = ()
    ) -> None:
        self._held: dict[str, Text] = dict(held) if held else {}
        self._layers: tuple[Layer, ...] = tuple(layers)

    def __getitem__(self, uid: str) -> str:
        v = self._held.get(uid)
        if v is None:
            for layer in self._layers:
                if uid in layer:
                    return layer[uid]
            raise KeyError(uid)
        if type(v) is str:
            return v
        text = self._held[uid] = str(v)
        return text

    def __setitem__(self, uid: str, text: Text) -> None:
        self._held[uid] = text

    def __delitem__(self, uid: str) -> None:
        del self._held[uid]

    def __iter__(self) -> Iterator[str]:
        if not self._layers:
            return iter(self._held)
        return itertools.chain(self._held, *self._layers)

    def __len__(self) -> int:
        n = len(self._held)
        for layer in self._layers:
            n += len(layer)
        return n

    def __contains__(self, uid: object) -> bool:
        if uid in self._held:
            return True
        return any(uid in layer for layer in self._layers)

    def lay(self, layer: Layer) -> None:
        """Hold ``layer``'s jobs and sentences, by reference."""
        self._layers = (*self._layers, layer)

    def __repr__(self) -> str:
        return f"Reasons({dict(self.items())!r})"

    def hold(self, pairs: Iterable[tuple[str, Text]]) -> None:
        """Set many at once (``update``, without a call per job: a backlog's
        explanations are handed over in every cycle)."""
        self._held.update(pairs)

    def held(self) -> tuple[dict[str, Text], tuple[Layer, ...]]:
        """What is held: the values written, and the layers (read-only to the caller),
        for a reader that keeps layers as layers."""
        return self._held, self._layers

    def copy(self) -> Reasons:
        return Reasons(self._held, self._layers)


__all__ = ["Layer", "Reasons", "Said", "Text", "join"]
