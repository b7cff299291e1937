"""The usage plugin: measured load from NodeMetrics and from a Prometheus source."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from tests.kit import node, pod, podgroup, queue

from pumice.api.node_metrics import NodeMetricsRecord, synthetic_node_metrics
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.framework.session import open_session
from pumice.plugins import default_registry
from pumice.run.prometheus import PrometheusSource
from pumice.scheduler import Scheduler

NOW = 1_700_000_000.0

CONFIG = """
actions: allocate
tiers:
- plugins:
  - name: usage
    arguments:
      thresholds: {cpu: 80, mem: 80}
"""


def metrics(name: str, cpu: str, memory: str, at: float = NOW) -> dict:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": stamp,
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def decide(objects: list[dict], config: str = CONFIG, now: float = NOW):
    scheduler = Scheduler.create(parse_config(yaml.safe_load(config)))
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objects], now=now)
    return scheduler.cycle(snapshot)


def test_a_node_over_the_cpu_threshold_takes_no_pod_and_the_job_says_why() -> None:
    objects = [queue(), node("busy"), metrics("busy", "3600m", "1Gi"), podgroup("pg"),
               pod("p", group="pg")]  # fmt: skip
    out = decide(objects).to_json()
    assert out["binds"] == {}
    assert "the CPU load of the node exceeds the upper limit" in out["pending"]["default/pg"]


def test_a_measurement_older_than_five_minutes_no_longer_counts() -> None:
    objects = [queue(), node("busy"), metrics("busy", "3600m", "1Gi", at=NOW - 301),
               podgroup("pg"), pod("p", group="pg")]  # fmt: skip
    assert decide(objects).binds == {"default/p": "busy"}
    objects[2] = metrics("busy", "3600m", "1Gi", at=NOW - 299)
    assert decide(objects).binds == {}


def test_the_answers_stand_until_the_oldest_measurement_grows_stale() -> None:
    objects = [
        queue(), node("n1"), node("n2"), metrics("n1", "100m", "1Gi", at=NOW - 100),
        metrics("n2", "100m", "1Gi", at=NOW - 10), podgroup("pg"), pod("p", group="pg"),
    ]  # fmt: skip
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objects], now=NOW)
    ssn = open_session(snapshot, parse_config(yaml.safe_load(CONFIG)), default_registry())
    (plugin,) = [p for p in ssn.plugins if p.name == "usage"]
    assert NOW + 200 <= plugin.valid_until(ssn) < NOW + 200.001


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"thresholds": {"cpu": 101}}, "thresholds.cpu"),
        ({"usage.weight": -1}, "usage.weight"),
        ({"estimator": {"request_ratio": 1.5}}, "estimator.request_ratio"),
        ({"estimator": {"risk_factor": 0.5}}, "estimator.risk_factor"),
        ({"estimator": {"be_mem": "bad"}}, "estimator.be_mem"),
    ],
)
def test_an_out_of_range_argument_is_refused_naming_it(arguments: dict, field: str) -> None:
    text = yaml.safe_dump(
        {"actions": "allocate", "tiers": [{"plugins": [{"name": "usage", "arguments": arguments}]}]}
    )
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        Scheduler.create(parse_config(yaml.safe_load(text)))


def test_pods_placed_in_the_cycle_count_as_load_of_their_node() -> None:
    """Two single-pod jobs, two equally loaded nodes: the first pod's estimate makes its
    node the more loaded one, so the second goes to the other node."""
    objects = [queue(), node("n1"), node("n2"), metrics("n1", "400m", "1Gi"),
               metrics("n2", "400m", "1Gi"), podgroup("a"), podgroup("b"),
               pod("pa", group="a", cpu="2"), pod("pb", group="b", cpu="2")]  # fmt: skip
    binds = decide(objects).binds
    assert sorted(binds.values()) == ["n1", "n2"]


def test_synthetic_metrics_follow_the_requests_of_the_pods_on_each_node() -> None:
    objects = [queue(), node("n1"), node("n2"), podgroup("pg", phase="Running"),
               pod("r", group="pg", node="n1", cpu="2", memory="2Gi")]  # fmt: skip
    snapshot = build_snapshot([SourcedObject(o, "test") for o in objects], now=NOW)
    made = {
        m["metadata"]["name"]: m["usage"] for m in synthetic_node_metrics(snapshot.nodes, 0.5, NOW)
    }
    assert made["n1"] == {"cpu": "1000m", "memory": str(1024**3)}
    assert made["n2"] == {"cpu": "0m", "memory": "0"}


# -- the Prometheus source ------------------------------------------------------------------


class Prometheus(BaseHTTPRequestHandler):
    """Answers ``/api/v1/query`` like Prometheus: CPU and memory percentages by node
    (``instance``), from ``self.server.loads``; records the queries."""

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)["query"][0]
        self.server.queries.append(query)  # type: ignore[attr-defined]
        if self.server.broken:  # type: ignore[attr-defined]
            self.send_response(503)
            self.end_headers()
            return
        node = query.split('instance="', 1)[1].split('"', 1)[0]
        cpu, memory = self.server.loads[node]  # type: ignore[attr-defined]
        value = cpu if "node_cpu_seconds_total" in query else memory
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"instance": node}, "value": [NOW, str(value)]}]}}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def prometheus():
    server = HTTPServer(("127.0.0.1", 0), Prometheus)
    server.loads = {"n1": (85.5, 40.0), "n2": (10.0, 20.0)}  # type: ignore[attr-defined]
    server.queries = []  # type: ignore[attr-defined]
    server.broken = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_prometheus_source_reads_each_nodes_average_load(prometheus) -> None:
    address = f"http://127.0.0.1:{prometheus.server_port}"
    source = PrometheusSource({"type": "prometheus", "address": address}, lambda: ["n1", "n2"],
                              clock=lambda: NOW)  # fmt: skip
    assert source.take() is None
    source.fetch_round()
    got = source.take()
    assert got == {
        "n1": NodeMetricsRecord("n1", NOW, cpu_percent=85.5, memory_percent=40.0,
                                source="prometheus"),
        "n2": NodeMetricsRecord("n2", NOW, cpu_percent=10.0, memory_percent=20.0,
                                source="prometheus"),
    }  # fmt: skip
    assert source.take() is None  # (each round once)
    assert any('instance="n1"' in q and "node_cpu_seconds_total" in q for q in prometheus.queries)
    assert any("node_memory_MemAvailable_bytes" in q for q in prometheus.queries)
    # A failing Prometheus leaves the last answers in place.
    prometheus.broken = True
    source.fetch_round()
    assert source.errors == 2 and source.take() == got


def test_the_prometheus_load_steers_a_cycle_through_the_cache(prometheus) -> None:
    """What ``pumice run`` does: the source's round goes into the scheduler cache, the
    cycle's snapshot lends it to the usage plugin, and a new round is a change."""
    cluster = MemoryCluster(clock=lambda: NOW)
    cluster.create_all([queue(), node("n1"), node("n2"), podgroup("pg"), pod("p", group="pg")])
    cache = SchedulerCache(cluster, clock=lambda: NOW)
    address = f"http://127.0.0.1:{prometheus.server_port}"
    source = PrometheusSource({"type": "prometheus", "address": address}, lambda: ["n1", "n2"],
                              clock=lambda: NOW)  # fmt: skip
    source.fetch_round()
    before = cache.changes
    assert cache.take_node_metrics(source.take() or {}, "prometheus")
    assert cache.changes == before + 1
    scheduler = Scheduler.create(parse_config(yaml.safe_load(CONFIG)))
    # n1 is at 85.5% CPU: refused; the pod goes to n2 although n1 sorts first.
    assert scheduler.cycle(cache.snapshot()).binds == {"default/p": "n2"}
    # The same round again changes nothing.
    prometheus.loads["n1"] = (85.5, 40.0)
    source.fetch_round()
    assert not cache.take_node_metrics(source.take() or {}, "prometheus")
