"""Custom plugins and actions: from a --plugins-dir and from installed packages' entry
points, in every mode, and the errors a user gets for a plugin that cannot be used."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pumice.cli import main
from pumice.extensions import load_registries
from pumice.scheduler import Scheduler

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "src/pumice/examples/plugins"
DATA = ROOT / "tests/data/plugins"
SNAPSHOT = DATA / "snapshot.yaml"
PREFER_RESERVED = DATA / "prefer-reserved.yaml"

#: Volcano's default tiers, with one more plugin entry appended to the second tier.
CONFIG = """\
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - {entry}
"""

#: A node-order plugin (a plain function, no fast-path form) preferring the node whose
#: name sorts last; {name} and {extra} are filled in by the tests.
LAST_NODE = """\
import numpy as np


class LastNode:
    name = "{name}"

    def __init__(self, arguments):
        self.arguments = arguments

    def on_session_open(self, session):
        n = len(session.nodes)
        session.on("node_order", self.name, lambda task, cand: np.asarray(cand) * 1000.0 / n)
{extra}
"""


def config(tmp_path: Path, entry: str, actions: str = "enqueue, allocate, backfill") -> str:
    p = tmp_path / "conf.yaml"
    p.write_text(CONFIG.format(actions=actions, entry=entry))
    return str(p)


def plugin_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "plugins"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(textwrap.dedent(text))
    return d


def cycle(capsys, *args: str) -> tuple[int, dict, str]:
    rc = main(["cycle", str(SNAPSHOT), *args])
    captured = capsys.readouterr()
    return rc, json.loads(captured.out) if rc == 0 else {}, captured.err


def error(capsys, *args: str) -> str:
    rc, _, err = cycle(capsys, *args)
    assert rc == 2, err
    assert err.startswith("pumice: error: ") and err.count("\n") == 1
    return err


# -- the shipped example -----------------------------------------------------------------


def test_example_plugin_changes_where_the_gang_goes(capsys) -> None:
    rc, plain, _ = cycle(capsys)
    assert rc == 0
    assert plain["binds"] == {"ml/train-worker-0": "node-a", "ml/train-worker-1": "node-b"}
    rc, preferred, _ = cycle(
        capsys, "--config", str(PREFER_RESERVED), "--plugins-dir", str(EXAMPLES)
    )
    assert rc == 0
    assert preferred["binds"] == {"ml/train-worker-0": "node-c", "ml/train-worker-1": "node-c"}


def test_example_plugin_keeps_allocates_fast_path() -> None:
    """The example offers the separable node-order form: the same decisions either way,
    and with it allocate's fast path stays on."""
    from pumice.cache.build import build_snapshot
    from pumice.cache.load import load_objects
    from pumice.framework.fastpath import for_session

    scheduler = Scheduler.from_file(str(PREFER_RESERVED), EXAMPLES)
    ssn = scheduler.open(build_snapshot(load_objects([str(SNAPSHOT)])))
    assert for_session(ssn).enabled


def test_config_naming_the_example_without_its_directory_is_unknown(capsys) -> None:
    err = error(capsys, "--config", str(PREFER_RESERVED))
    assert "unknown plugin 'prefer-label'" in err and "prefer-reserved.yaml" in err


def test_example_refuses_a_missing_label(tmp_path, capsys) -> None:
    conf = config(tmp_path, "name: prefer-label\n    arguments: {value: reserved}")
    err = error(capsys, "--config", conf, "--plugins-dir", str(EXAMPLES))
    assert "conf.yaml" in err and "plugin prefer-label" in err
    assert str(EXAMPLES / "prefer_label.py") in err and "arguments.label" in err


# -- a directory ---------------------------------------------------------------------------


def test_directory_plugin_and_action_with_a_helper_module(tmp_path, capsys) -> None:
    d = plugin_dir(
        tmp_path,
        {
            "_common.py": "GREETING = 'hello from a custom action'\n",
            "last.py": LAST_NODE.format(name="last-node", extra="plugins = [LastNode]"),
            "hello.py": """\
                from ._common import GREETING


                class Hello:
                    name = "hello"

                    def __init__(self, arguments):
                        self.arguments = arguments

                    def execute(self, session):
                        session.decisions.notes.append(GREETING)


                actions = [Hello]
                """,
        },
    )
    conf = config(tmp_path, "name: last-node", actions="enqueue, allocate, hello")
    rc, out, err = cycle(capsys, "--config", conf, "--plugins-dir", str(d))
    assert rc == 0, err
    assert out["binds"] == {"ml/train-worker-0": "node-c", "ml/train-worker-1": "node-c"}
    assert "pumice: note: hello from a custom action" in err


def test_a_module_that_fails_to_import(tmp_path, capsys) -> None:
    d = plugin_dir(tmp_path, {"broken.py": "import os\nimport no_such_module_for_pumice\n"})
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "broken.py") in err
    assert "cannot import: ModuleNotFoundError" in err and "no_such_module_for_pumice" in err
    assert "(line 2)" in err


def test_a_module_with_a_syntax_error(tmp_path, capsys) -> None:
    d = plugin_dir(tmp_path, {"typo.py": "class Broken(\n"})
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "typo.py") in err and "SyntaxError" in err and "line 1" in err


def test_a_corrected_directory_loads_after_a_failure(tmp_path, capsys) -> None:
    d = plugin_dir(tmp_path, {"last.py": "raise RuntimeError('not yet')\n"})
    assert "RuntimeError: not yet" in error(capsys, "--plugins-dir", str(d))
    plugin_dir(
        tmp_path, {"last.py": LAST_NODE.format(name="last-node", extra="plugins = [LastNode]")}
    )
    rc, out, err = cycle(
        capsys, "--config", config(tmp_path, "name: last-node"), "--plugins-dir", str(d)
    )
    assert rc == 0, err
    assert set(out["binds"].values()) == {"node-c"}


def test_a_name_clash_with_a_built_in(tmp_path, capsys) -> None:
    d = plugin_dir(
        tmp_path, {"mine.py": LAST_NODE.format(name="binpack", extra="plugins = [LastNode]")}
    )
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "mine.py") in err and "'binpack'" in err and "built-in plugin" in err
    assert "LastNode" in err


def test_a_name_clash_between_two_files(tmp_path, capsys) -> None:
    one = LAST_NODE.format(name="last-node", extra="plugins = [LastNode]")
    d = plugin_dir(tmp_path, {"a.py": one, "b.py": one})
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "b.py") in err and f"the plugin from {d / 'a.py'}" in err
    assert "'last-node'" in err


def test_a_constructor_that_raises_on_bad_arguments(tmp_path, capsys) -> None:
    strict = (
        LAST_NODE.format(name="strict", extra="plugins = [Strict]")
        .replace("class LastNode:", "class Strict:")
        .replace(
            "        self.arguments = arguments",
            "        if 'threshold' not in arguments:\n"
            "            raise ValueError('threshold is required')\n"
            "        self.arguments = arguments",
        )
    )
    d = plugin_dir(tmp_path, {"strict.py": strict})
    conf = config(tmp_path, "name: strict\n    arguments: {limit: 3}")
    err = error(capsys, "--config", conf, "--plugins-dir", str(d))
    assert "conf.yaml" in err and "plugin strict" in err and str(d / "strict.py") in err
    assert "cannot be built from its arguments: ValueError: threshold is required" in err
    assert "(line 9)" in err
    # Not configured, not built: the same directory is fine for other configurations.
    assert cycle(capsys, "--plugins-dir", str(d))[0] == 0


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("x = 1\n", ["lists no classes", "plugins = [...]"]),
        ("plugins = 'Last'\n", ["'plugins' must be a list of classes"]),
        ("plugins = [len]\n", ["expected a plugin class"]),
        ("class P:\n    pass\nplugins = [P]\n", ["plugin class P", "has no `name`"]),
        (
            "class P:\n    name = 'p'\n    def __init__(self, a):\n        pass\nplugins = [P]\n",
            ["plugin p (class P)", "on_session_open"],
        ),
        (
            "class P:\n    name = 'p'\n    def on_session_open(self, s):\n        pass\n"
            "plugins = [P]\n",
            ["plugin p (class P)", "constructor must take one argument"],
        ),
        (
            "class A:\n    name = 'a'\n    def __init__(self, a):\n        pass\nactions = [A]\n",
            ["action a (class A)", "execute"],
        ),
    ],
)
def test_a_class_of_the_wrong_shape(tmp_path, capsys, text: str, needles: list[str]) -> None:
    d = plugin_dir(tmp_path, {"shape.py": text})
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "shape.py") in err
    for needle in needles:
        assert needle in err


def test_a_missing_directory(tmp_path, capsys) -> None:
    err = error(capsys, "--plugins-dir", str(tmp_path / "nope"))
    assert "nope" in err and "does not exist" in err


# -- entry points --------------------------------------------------------------------------


def install(tmp_path: Path, monkeypatch, module: str, text: str, entry: str) -> None:
    """A package installed on sys.path: ``module``.py and a dist-info announcing
    ``entry`` (``name = module:Class``) in the group pumice.plugins."""
    site = tmp_path / "site"
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / f"{module}.py").write_text(text)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[pumice.plugins]\n{entry}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, module, raising=False)


def test_entry_point_plugin(tmp_path, monkeypatch, capsys) -> None:
    install(
        tmp_path,
        monkeypatch,
        "pumice_ep_last",
        LAST_NODE.format(name="ep-last", extra=""),
        "ep-last = pumice_ep_last:LastNode",
    )
    rc, out, err = cycle(capsys, "--config", config(tmp_path, "name: ep-last"))
    assert rc == 0, err
    assert set(out["binds"].values()) == {"node-c"}


def test_entry_point_that_fails_to_import(tmp_path, monkeypatch, capsys) -> None:
    install(
        tmp_path,
        monkeypatch,
        "pumice_ep_broken",
        "raise ImportError('needs libfoo')\n",
        "ep-broken = pumice_ep_broken:Plugin",
    )
    err = error(capsys)
    assert "entry point ep-broken = pumice_ep_broken:Plugin" in err
    assert "package pumice_ep_broken 1.0" in err and "ImportError: needs libfoo" in err


def test_entry_point_name_clash_with_a_directory(tmp_path, monkeypatch, capsys) -> None:
    install(
        tmp_path,
        monkeypatch,
        "pumice_ep_twin",
        LAST_NODE.format(name="twin", extra=""),
        "twin = pumice_ep_twin:LastNode",
    )
    d = plugin_dir(
        tmp_path, {"twin.py": LAST_NODE.format(name="twin", extra="plugins = [LastNode]")}
    )
    err = error(capsys, "--plugins-dir", str(d))
    assert str(d / "twin.py") in err and "'twin'" in err
    assert "entry point twin = pumice_ep_twin:LastNode" in err


def test_entry_point_name_must_be_the_class_name(tmp_path, monkeypatch, capsys) -> None:
    install(
        tmp_path,
        monkeypatch,
        "pumice_ep_alias",
        LAST_NODE.format(name="real-name", extra=""),
        "alias = pumice_ep_alias:LastNode",
    )
    err = error(capsys)
    assert "entry point alias = pumice_ep_alias:LastNode" in err and "'real-name'" in err


# -- every mode, and worker processes ------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["simulate", "--no-progress", "--out", "o"], ["bench", "basic", "--json", "o"]]
)
def test_simulate_and_bench_take_plugins_dir(tmp_path, capsys, command: list[str]) -> None:
    """The option reaches the scheduler the command builds (first, before any work)."""
    clash = LAST_NODE.format(name="gang", extra="plugins = [LastNode]")
    d = plugin_dir(tmp_path, {"mine.py": clash})
    assert main([*command, "--plugins-dir", str(d)]) == 2
    err = capsys.readouterr().err
    assert str(d / "mine.py") in err and "'gang'" in err


def _one_cycle(scheduler: Scheduler, _index: int, _progress) -> dict[str, str]:
    """A what-if worker's job, cut down to one cycle of the test snapshot."""
    from pumice.cache.build import build_snapshot
    from pumice.cache.load import load_objects

    return scheduler.cycle(build_snapshot(load_objects([str(SNAPSHOT)]))).binds


def test_what_if_workers_use_the_extended_registries() -> None:
    """Worker processes get the scheduler as sim/command.py hands it over (forked on
    Linux): its plugins from the directory decide there too."""
    from pumice.sim.parallel import run_parallel

    scheduler = Scheduler.from_file(str(PREFER_RESERVED), EXAMPLES)
    results = run_parallel(_one_cycle, scheduler, 2, 2)
    assert [set(binds.values()) for binds in results] == [{"node-c"}, {"node-c"}]


def test_scheduler_pickles_for_spawned_workers() -> None:
    """With ``spawn`` (macOS, Windows) a worker unpickles the scheduler in a fresh
    interpreter, where the directory's private modules do not exist: the registries
    load the directory again."""
    scheduler = Scheduler.from_file(str(PREFER_RESERVED), EXAMPLES)
    script = (
        "import pickle, sys\n"
        "from pumice.cache.build import build_snapshot\n"
        "from pumice.cache.load import load_objects\n"
        "s = pickle.loads(sys.stdin.buffer.read())\n"
        f"print(sorted(set(s.cycle(build_snapshot(load_objects([{str(SNAPSHOT)!r}]))).binds.values())))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(scheduler),
        capture_output=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout.decode().strip() == "['node-c']"


def test_load_registries_lists_builtins_and_extensions() -> None:
    plugins, actions = load_registries(EXAMPLES)
    assert {"prefer-label", "binpack", "gang"} <= plugins.names()
    assert {"allocate", "enqueue"} <= actions.names()
    assert "prefer-label" not in load_registries().plugins.names()
