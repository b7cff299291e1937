"""Build pumice's scheduling core with mypyc into a directory of its own.

The compiled modules are written next to a copy of ``src``, so running with
``PYTHONPATH=BUILD_DIR`` imports the compiled ``.so`` files in place of the ``.py``
ones while the source tree and the installed package stay untouched. Kept out of the
package: it needs mypy, mypyc and a C compiler, none of which pumice needs to run.

Usage: ``python tools/mypyc_build.py [BUILD_DIR]`` (default ``build/compiled``), run
with the venv's python after ``pip install mypy`` (mypyc comes with it).
``PUMICE_SRC=DIR`` builds another source tree; ``MYPYC_OPT_LEVEL`` (default 3) sets
the C compiler's optimisation. Not adopted; see "A compiled core (mypyc)" in
docs/performance.md for what it gave.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# The packages of the scheduling core that are compiled.
PACKAGES = ("api", "framework", "actions", "plugins")

# Modules of those packages left interpreted, and why (see docs/performance.md).
LEFT_OUT: dict[str, str] = {
    "pumice/framework/session.py": (
        "actions hang their own attributes on the session and forget_cycle clears its "
        "__dict__; a compiled class has no __dict__"
    ),
    "pumice/api/node.py": (
        "NodeTable.copy makes its copy with NodeTable.__new__(NodeTable), which on a "
        "compiled class runs __init__ and fails for want of its arguments"
    ),
    "pumice/framework/plugin.py": (
        "Registry is subclassed by pumice.extensions, which is interpreted, and "
        "interpreted classes cannot inherit from compiled ones"
    ),
    "pumice/framework/limits.py": "QueueRefusal subclasses str, which mypyc cannot compile",
    "pumice/framework/best_effort.py": (
        "a local variable annotated twice (by_role in BestEffortRoom.can_complete) "
        "stops mypyc with an internal error"
    ),
}

# Type errors do not stop the build (mypyc refuses any), but they are not harmless:
# compiled code checks the declared types at run time, so a tuple passed where
# ``list[str]`` is declared fails there. Build a tree on which ``mypy src`` passes.
MYPY_CONFIG = """\
[mypy]
ignore_missing_imports = True
follow_imports = silent
ignore_errors = True
"""

SETUP = """\
import os
import sys
from setuptools import setup
from mypyc.build import mypycify

paths = sys.argv.pop(1).split(",")
setup(
    name="pumice_compiled",
    ext_modules=mypycify(
        ["--config-file", "mypy.ini", *paths],
        opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"),
    ),
)
"""


# Class attributes that pumice reads off plugin and action classes (the registry and
# the extension loader do). mypyc turns a plain ``name = "drf"`` in a class body into
# an instance attribute, so the class itself answers with a descriptor; declared
# ``ClassVar`` they stay on the class. The build copy is patched so; the source has
# plain assignments.
CLASS_VARS = {"name": "str", "argument_keys": "tuple[str, ...]"}
_CLASS_VAR = re.compile(r"^    (" + "|".join(CLASS_VARS) + ") = ")


def declare_class_vars(path: Path) -> bool:
    """Annotate ``path``'s class-level ``name`` and ``argument_keys`` as ClassVar."""
    lines = path.read_text().splitlines(keepends=True)
    in_class = changed = False
    for i, line in enumerate(lines):
        if line[:1] not in ("", " ", "\n", "#", ")", "]"):
            in_class = line.startswith("class ")
        found = _CLASS_VAR.match(line)
        if in_class and found:
            key = found.group(1)
            lines[i] = f"    {key}: ClassVar[{CLASS_VARS[key]}] = " + line[found.end() :]
            changed = True
    if changed:
        text = "".join(lines)
        text = text.replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing import ClassVar\n",
            1,
        )
        path.write_text(text)
    return changed


# ``valid_until = timeless`` in a class body: Python binds the function as a method;
# mypyc stores it as an instance attribute's default, called then without ``self``.
# The build copy defines the method instead.
_TIMELESS = re.compile(r"^    valid_until = timeless\b.*$", re.MULTILINE)
_TIMELESS_METHOD = '    def valid_until(self, _ssn: object) -> float:\n        return float("inf")'


def define_timeless(path: Path) -> bool:
    """Turn ``path``'s ``valid_until = timeless`` into a method of the same answer."""
    text = path.read_text()
    patched, count = _TIMELESS.subn(_TIMELESS_METHOD, text)
    path.write_text(patched)
    return count > 0


def sources(src: Path) -> list[str]:
    """The core's modules to compile, as paths relative to ``src``."""
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((src / "pumice" / package).glob("*.py")):
            relative = path.relative_to(src).as_posix()
            if relative not in LEFT_OUT:
                found.append(relative)
    return found


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    build = Path(sys.argv[1] if len(sys.argv) > 1 else root / "build" / "compiled")
    build = build.resolve()
    if build.exists():
        shutil.rmtree(build)
    src = Path(os.environ.get("PUMICE_SRC", root / "src"))
    shutil.copytree(src, build, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    (build / "mypy.ini").write_text(MYPY_CONFIG)
    (build / "mypyc_setup.py").write_text(SETUP)
    paths = sources(build)
    patched = [p for p in paths if declare_class_vars(build / p)]
    print(f"declared ClassVar attributes in {len(patched)} modules", file=sys.stderr)
    patched = [p for p in paths if define_timeless(build / p)]
    print(f"defined valid_until methods in {len(patched)} modules", file=sys.stderr)
    started = time.monotonic()
    command = [sys.executable, "mypyc_setup.py", ",".join(paths), "build_ext", "--inplace"]
    done = subprocess.run(command, cwd=build)
    took = time.monotonic() - started
    print(f"compiled {len(paths)} modules into {build} in {took:.0f} s", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
