"""The extender plugin against a real HTTP server speaking Volcano's extender protocol."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.plugins.extender import interested_names
from pumice.scheduler import Scheduler

Answer = Callable[[dict[str, Any]], Any]


class Extender(BaseHTTPRequestHandler):
    """POST /<verb>: the JSON body is recorded, the verb's function answers (a dict, or
    (HTTP status, body bytes))."""

    def do_POST(self) -> None:
        verb = self.path.rsplit("/", 1)[-1]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        server.calls.append((verb, body, self.headers.get("Content-Type")))
        answer = server.answers.get(verb, lambda _b: {})(body)
        status, data = answer if isinstance(answer, tuple) else (200, json.dumps(answer).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def extender():
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Extender)
    server.calls = []
    server.answers = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def config(
    url: str, *, ignorable: bool = False, actions: str = "enqueue, allocate", **verbs
) -> str:
    arguments: dict[str, Any] = {"extender.urlPrefix": url, "extender.httpTimeout": "2s"}
    arguments.update({f"extender.{v}Verb": v for v in verbs.pop("verbs", [])})
    arguments.update(verbs)
    if ignorable:
        arguments["extender.ignorable"] = True
    return yaml.safe_dump(
        {
            "actions": actions,
            "tiers": [
                {"plugins": [{"name": "gang"}, {"name": "extender", "arguments": arguments}]},
                {"plugins": [{"name": "predicates"}, {"name": "proportion"}]},
            ],
        }
    )


def url(server: Any) -> str:
    return f"http://127.0.0.1:{server.server_port}"


def cycle(objects: list[dict], text: str):
    scheduler = Scheduler.create(parse_config(yaml.safe_load(text)))
    return scheduler.cycle(build_snapshot([SourcedObject(o, "test") for o in objects]))


def two_nodes_one_pod(**pod_args) -> list[dict]:
    return [queue(), node("n1"), node("n2"), podgroup("pg"), pod("p", group="pg", **pod_args)]


def test_the_predicate_refuses_the_nodes_the_extender_refuses(extender) -> None:
    extender.answers["predicate"] = lambda b: {
        "status": "gpu busy" if b["node"]["Name"] == "n1" else "",
        "code": 3 if b["node"]["Name"] == "n1" else 0,
    }
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["predicate"]))
    assert out.binds == {"default/p": "n2"}
    verb, body, kind = extender.calls[0]
    assert (verb, kind) == ("predicate", "application/json")
    task = body["task"]
    assert (task["Name"], task["Namespace"], task["Job"]) == ("p", "default", "default/pg")
    assert task["Resreq"]["MilliCPU"] == 1000 and task["Resreq"]["Memory"] == 1024**3
    assert task["Status"] == 1  # Volcano's Pending
    assert body["node"]["Allocatable"]["MilliCPU"] == 4000


def test_a_pod_refused_everywhere_says_what_the_extender_said(extender) -> None:
    extender.answers["predicate"] = lambda _b: {"status": "no licence left"}
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["predicate"])).to_json()
    assert out["binds"] == {}
    assert "2 were refused by the extender: no licence left" in out["pending"]["default/pg"]


def test_the_extenders_scores_steer_the_choice(extender) -> None:
    extender.answers["prioritize"] = lambda b: {
        "nodeScore": {n["Name"]: (100 if n["Name"] == "n2" else 0) for n in b["nodes"]}
    }
    assert cycle(two_nodes_one_pod(), config(url(extender))).binds == {"default/p": "n1"}
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["prioritize"]))
    assert out.binds == {"default/p": "n2"}


def test_the_enqueue_vote_keeps_a_refused_job_pending(extender) -> None:
    extender.answers["jobEnqueueable"] = lambda b: {"status": -1 if b["job"]["Name"] == "no" else 1}
    need = {"cpu": "1"}  # (a job without minResources is admitted without a vote)
    objects = [queue(), node("n1"), podgroup("no", phase="Pending", min_resources=need),
               pod("a", group="no"), podgroup("yes", phase="Pending", min_resources=need),
               pod("b", group="yes")]  # fmt: skip
    out = cycle(objects, config(url(extender), verbs=["jobEnqueueable", "jobEnqueued"])).to_json()
    assert out["podgroups"]["default/no"]["phase"] == "Pending"
    assert out["podgroups"]["default/yes"]["phase"] != "Pending"
    enqueued = [b["job"]["Name"] for v, b, _ in extender.calls if v == "jobEnqueued"]
    assert enqueued == ["yes"]


def test_an_overused_queue_gets_nothing(extender) -> None:
    extender.answers["queueOverused"] = lambda b: {"overused": b["queue"]["Name"] == "default"}
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["queueOverused"]))
    assert out.binds == {}


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_failed_call_refuses_unless_ignorable() -> None:
    down = closed_port()
    out = cycle(two_nodes_one_pod(), config(down, verbs=["predicate"])).to_json()
    assert out["binds"] == {}
    assert "refused by the extender: predicate with extender at URL" in out["pending"]["default/pg"]
    out = cycle(two_nodes_one_pod(), config(down, ignorable=True, verbs=["predicate"]))
    assert out.binds == {"default/p": "n1"}


def test_a_non_200_answer_is_a_failure(extender) -> None:
    extender.answers["predicate"] = lambda _b: (500, b"oops")
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["predicate"])).to_json()
    assert "failed predicate with extender at URL" in out["pending"]["default/pg"]
    assert "code 500" in out["pending"]["default/pg"]


def test_an_answer_over_ten_mebibytes_is_a_failure(extender) -> None:
    extender.answers["predicate"] = lambda _b: (200, b'{"padding": "' + b"a" * (10 << 20) + b'"}')
    out = cycle(two_nodes_one_pod(), config(url(extender), verbs=["predicate"])).to_json()
    assert "answer over 10 MiB" in out["pending"]["default/pg"]


def test_without_a_managed_resource_the_pod_is_not_asked_about(extender) -> None:
    extender.answers["predicate"] = lambda _b: {"status": "no"}
    text = config(
        url(extender), verbs=["predicate"], **{"extender.managedResources": ["nvidia.com/gpu"]}
    )
    assert cycle(two_nodes_one_pod(), text).binds == {"default/p": "n1"}
    assert extender.calls == []
    objects = [queue(), node("n1", nvidia_gpu="1"), podgroup("pg"), pod("p", group="pg", gpu="1")]
    assert cycle(objects, text).binds == {}
    assert extender.calls and extender.calls[0][0] == "predicate"


def test_a_failed_session_open_leaves_the_extender_out_of_the_cycle(extender) -> None:
    extender.answers["onSessionOpen"] = lambda _b: (503, b"")
    extender.answers["predicate"] = lambda _b: {"status": "no"}
    text = config(url(extender), verbs=["onSessionOpen", "predicate", "onSessionClose"])
    assert cycle(two_nodes_one_pod(), text).binds == {"default/p": "n1"}
    assert [v for v, _b, _k in extender.calls] == ["onSessionOpen"]


def test_session_open_tells_the_jobs_nodes_and_queues_and_close_follows(extender) -> None:
    text = config(url(extender), verbs=["onSessionOpen", "onSessionClose"])
    cycle(two_nodes_one_pod(), text)
    verbs = [v for v, _b, _k in extender.calls]
    assert verbs == ["onSessionOpen", "onSessionClose"]
    opened = extender.calls[0][1]
    assert set(opened["Nodes"]) == {"n1", "n2"}
    assert set(opened["Jobs"]) == {"default/pg"} and set(opened["Queues"]) == {"default"}
    assert opened["Jobs"]["default/pg"]["Tasks"]
    assert extender.calls[1][1] == {}


def test_the_extender_chooses_the_victims(extender) -> None:
    extender.answers["preemptable"] = lambda b: {
        "status": 1,
        "victims": [t for t in b["evictees"] if t["Name"] == "low-b"],
    }
    low = [pod(f"low-{k}", group="low", node="n1", cpu="1", priority=1) for k in "ab"]
    objects = [
        queue(), node("n1", cpu="2"), podgroup("low", min_member=1, phase="Running"),
        podgroup("high", min_member=1), *low, pod("high", group="high", cpu="1"),
    ]  # fmt: skip
    text = yaml.safe_dump({"actions": "preempt", "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "extender", "arguments": {
            "extender.urlPrefix": url(extender), "extender.preemptableVerb": "preemptable"}}]},
        {"plugins": [{"name": "predicates"}]}]})  # fmt: skip
    assert cycle(objects, text).evictions == ["default/low-b"]
    evictor = next(b for v, b, _ in extender.calls if v == "preemptable")["evictor"]
    assert evictor["Name"] == "high"


def test_a_verb_without_a_url_is_refused() -> None:
    text = yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [
        {"name": "extender", "arguments": {"extender.predicateVerb": "predicate"}}]}]})  # fmt: skip
    with pytest.raises(InputError, match=r"extender\.urlPrefix"):
        Scheduler.create(parse_config(yaml.safe_load(text)))


@pytest.mark.parametrize(
    ("managed", "requested", "expected"),
    [
        # volcano pkg/scheduler/plugins/extender/extender_test.go, TestIsInterested
        ([], ["cpu"], True),
        (["nvidia.com/gpu"], ["cpu", "nvidia.com/gpu"], True),
        (["nvidia.com/gpu"], ["cpu", "memory"], False),
        (["nvidia.com/gpu", "amd.com/gpu"], ["cpu", "amd.com/gpu"], True),
    ],
)
def test_which_pods_interest_an_extender(managed, requested, expected) -> None:
    assert interested_names(managed, requested) is expected
