"""The report directory itself: the marker that makes a directory a pumice report, and
``--out`` made ready before a run.

A run writes into a directory a user named, so it must never delete or mix with files it
did not write: :func:`prepare_out` empties only a directory :func:`is_report` recognises
(its :data:`MARKER`, or a report from before the marker), and only of the files and
subdirectories pumice writes there; anything else is refused with
:class:`~pumice.errors.InputError`.
"""

from __future__ import annotations

from pathlib import Path

#: The file that says a directory is a pumice report (written into every report).
MARKER = ".pumice-report"
#: What a report directory holds besides the marker: the files pumice writes there.
_REPORT_SUFFIXES = (".html", ".json", ".csv", ".png")
#: A report written before the marker existed still had these files.
_LEGACY = ("index.html", "run.json")


def mark_report(out: Path) -> None:
    """Write the marker that makes ``out`` a pumice report (see :func:`prepare_out`)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text(
        "This directory is a report written by pumice simulate; the next run with this\n"
        "--out replaces what is in it.\n",
        encoding="utf-8",
    )


def is_report(path: Path) -> bool:
    """Whether ``path`` is a directory pumice wrote a report into: its marker, or the
    files of a report from before the marker (index.html and run.json)."""
    return (path / MARKER).is_file() or all((path / name).is_file() for name in _LEGACY)


def _made_by_pumice(path: Path) -> bool:
    """A report, or a directory holding only such (a grid's ``<config>/seed-N/``)."""
    if is_report(path):
        return True
    entries = list(path.iterdir())
    return bool(entries) and all(
        e.is_dir() and not e.is_symlink() and _made_by_pumice(e) for e in entries
    )


def prepare_out(out: str | Path) -> Path:
    """Make ``out`` ready to hold one run's report, before the run, and mark it: a new
    or empty directory as it is; a pumice report emptied of the files of the run before
    (its report files, and its subdirectories that pumice wrote: a what-if's or a grid's
    reports), leaving anything else alone; any other non-empty directory, or a file, is
    refused (:class:`~pumice.errors.InputError`, exit status 2), so a mistyped --out
    never deletes a user's files nor mixes a report with them."""
    import shutil

    from pumice.errors import InputError

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} is a file, not a directory", field="--out")
    if out.exists() and any(out.iterdir()):
        if not is_report(out):
            raise InputError(
                f"{out} is not empty and is not a pumice report (it has no {MARKER} file): "
                "choose a new or empty directory, or remove this one",
                field="--out",
            )
        for child in out.iterdir():
            if child.is_dir() and not child.is_symlink():
                if _made_by_pumice(child):
                    shutil.rmtree(child)
            elif child.name == MARKER or child.suffix in _REPORT_SUFFIXES:
                child.unlink()
    mark_report(out)
    return out
