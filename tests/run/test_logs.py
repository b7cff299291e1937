"""setup_logging: JSON and text lines, structured fields, klog-style verbosity."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import orjson
import pytest

from pumice.framework.decisions import Decisions
from pumice.run.logs import TRACE, level_for, log, log_decisions, setup_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root, pumice = logging.getLogger(), logging.getLogger("pumice")
    handlers, root_level, pumice_level = list(root.handlers), root.level, pumice.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(root_level)
    pumice.setLevel(pumice_level)
    logging.captureWarnings(False)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_json_lines_parse_and_carry_fields() -> None:
    out = io.StringIO()
    setup_logging("json", 0, stream=out)
    logger = logging.getLogger("pumice.run")
    log(logger, logging.INFO, "bound", pod="ns/p", node="n1", took=0.5)
    logger.warning("plain %s", "args", extra={"fields": {"queue": "q1", "msg": "clash"}})
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("failed", extra={"fields": {"kind": "Pod"}})
    first, second, third = (orjson.loads(line) for line in lines(out))
    assert first["msg"] == "bound" and first["level"] == "info"
    assert first["logger"] == "pumice.run"
    assert (first["pod"], first["node"], first["took"]) == ("ns/p", "n1", 0.5)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert first["caller"].startswith("test_logs.py:")  # the caller of log(), not logs.py
    assert second["msg"] == "plain args" and second["level"] == "warning"
    assert second["queue"] == "q1" and second["msg_"] == "clash"
    assert third["level"] == "error" and third["kind"] == "Pod"
    assert "RuntimeError: boom" in third["exc"]


def test_json_fields_of_any_type() -> None:
    import numpy as np

    out = io.StringIO()
    setup_logging("json", 0, stream=out)
    log(logging.getLogger("pumice"), logging.INFO, "x", n=np.float64(2.5), obj=object, s={1})
    line = orjson.loads(lines(out)[0])
    assert line["n"] == 2.5 and "object" in line["obj"]


def test_text_lines_with_key_values() -> None:
    out = io.StringIO()
    setup_logging("text", 0, stream=out)
    log(logging.getLogger("pumice.run"), logging.INFO, "cycle", binds=2, reason="gang short")
    (line,) = lines(out)
    assert re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z INFO  pumice\.run: cycle ", line)
    assert line.endswith('binds=2 reason="gang short"')


def test_verbosity_like_klog() -> None:
    assert [level_for(v) for v in (0, 1, 2, 3, 4, 9)] == [
        logging.INFO, logging.INFO, logging.DEBUG, logging.DEBUG, TRACE, TRACE,
    ]  # fmt: skip
    ours, theirs = logging.getLogger("pumice.cache"), logging.getLogger("urllib3.connectionpool")
    seen = {}
    for v in (0, 2, 4, 6):
        out = io.StringIO()
        setup_logging("json", v, stream=out)
        ours.info("info")
        ours.debug("cycle")
        log(ours, TRACE, "pod")
        theirs.debug("request")
        theirs.warning("retry")
        seen[v] = [orjson.loads(x)["msg"] for x in lines(out)]
    assert seen[0] == ["info", "retry"]
    assert seen[2] == ["info", "cycle", "retry"]
    assert seen[4] == ["info", "cycle", "pod", "retry"]
    assert seen[6] == ["info", "cycle", "pod", "request", "retry"]
    assert orjson.loads(lines(out)[2])["level"] == "trace"


def test_setup_again_replaces_its_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("text", 0, stream=first)
    setup_logging("json", 0, stream=second)
    logging.getLogger("pumice").info("once")
    assert first.getvalue() == ""
    assert len(lines(second)) == 1


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown log format"):
        setup_logging("yaml", 0)


def test_per_pod_lines_only_from_v4() -> None:
    d = Decisions(binds={"ns/a": "n1"}, evictions=["ns/v"], pending={"ns/pg": "gang short"})
    logger = logging.getLogger("pumice.run")
    out = io.StringIO()
    setup_logging("json", 2, stream=out)
    log_decisions(logger, d, cycle=3)
    assert out.getvalue() == ""
    setup_logging("json", 4, stream=out)
    log_decisions(logger, d, cycle=3)
    got = [orjson.loads(x) for x in lines(out)]
    assert [(g["msg"], g.get("pod", g.get("job"))) for g in got] == [
        ("bind", "ns/a"),
        ("evict", "ns/v"),
        ("waiting", "ns/pg"),
    ]
    assert all(g["cycle"] == 3 for g in got)
    assert got[0]["node"] == "n1" and got[2]["reason"] == "gang short"
