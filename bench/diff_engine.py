#!/usr/bin/env python3
"""Drift engine vs deepdiff.DeepDiff and jsonpatch.make_patch on the same 3,200 Deployment pairs.

Each pair: a realistic Deployment (4 containers with env, ports, probes, resources, volumes) and
its live twin with managedFields, server defaults and ~1 % of its fields drifted. The engine does
more than the baselines (keyed lists, ignore rules, classification, attribution, redaction).
Targets: >= 50x faster than DeepDiff, >= 5x faster than jsonpatch.make_patch.
"""

from __future__ import annotations

import copy
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jsonpatch
from deepdiff import DeepDiff

from driftguard.diff import diff_objects
from driftguard.drift import DriftEngine
from driftguard.ignore import IgnoreRule, IgnoreRules
from driftguard.manifests import resource_key

PAIRS = 3200


def deployment(i: int) -> dict[str, Any]:
    containers = []
    for c in range(4):
        containers.append(
            {
                "name": f"c{c}",
                "image": f"registry.example.com/team/app{i}-{c}:1.{c}.0",
                "args": ["--port=8080", f"--shard={i % 7}", "--log=json"],
                "env": [{"name": f"VAR_{k}", "value": f"value-{i}-{k}"} for k in range(8)],
                "ports": [
                    {"name": "http", "containerPort": 8080 + c},
                    {"name": "metrics", "containerPort": 9090 + c},
                ],
                "resources": {
                    "limits": {"cpu": "2", "memory": "4Gi"},
                    "requests": {"cpu": "500m", "memory": "1Gi"},
                },
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080 + c}, "periodSeconds": 10},
                "volumeMounts": [{"name": "config", "mountPath": f"/etc/app{c}"}],
            }
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"app-{i}",
            "namespace": f"ns-{i % 64}",
            "labels": {"app": f"app-{i}", "team": "t"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": f"app-{i}"}},
            "template": {
                "metadata": {"labels": {"app": f"app-{i}"}},
                "spec": {
                    "containers": containers,
                    "volumes": [{"name": "config", "configMap": {"name": f"app-{i}"}}],
                },
            },
        },
    }


def live_of(desired: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    live = copy.deepcopy(desired)
    live["metadata"].update(
        {"uid": "u", "resourceVersion": "1", "generation": 3, "creationTimestamp": "2026-11-01T00:00:00Z"}
    )
    live["metadata"]["managedFields"] = [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "time": "2026-11-29T13:00:00Z",
            "fieldsV1": {"f:spec": {"f:template": {}}},
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": "2026-11-29T13:30:00Z",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        },
        {
            "manager": "kubectl-patch",
            "operation": "Update",
            "time": "2026-11-29T14:02:07Z",
            "fieldsV1": {
                "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"c0"}': {"f:image": {}}}}}}
            },
        },
    ]
    live["status"] = {"replicas": 3, "readyReplicas": 3, "observedGeneration": 3}
    spec = live["spec"]["template"]["spec"]
    for c in spec["containers"]:
        c["imagePullPolicy"] = "IfNotPresent"  # server defaults
    # ~1 % of ~190 leaf fields drifted: two changes per pair
    if rng.random() < 0.5:
        spec["containers"][0]["image"] += "-hotfix"
    else:
        spec["containers"][1]["env"][3]["value"] = "patched"
    live["spec"]["replicas"] = rng.choice([3, 4, 5])
    return live


def timed(fn: Any, pairs: list[tuple[dict[str, Any], dict[str, Any]]], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for d, lv in pairs:
            fn(d, lv)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    rng = random.Random(7)
    pairs = []
    for i in range(PAIRS):
        d = deployment(i)
        pairs.append((d, live_of(d, rng)))
    engine = DriftEngine(
        IgnoreRules(
            [
                IgnoreRule(
                    group="apps", kind="Deployment", managed_fields_managers=("kube-controller-manager",)
                )
            ]
        )
    )

    def run_engine(d: dict[str, Any], lv: dict[str, Any]) -> Any:
        return engine.resource(resource_key(d), d, lv)

    def walk(a: Any, b: Any) -> int:  # the physical floor: touch every node once
        if isinstance(a, dict):
            return sum(walk(v, b.get(k) if isinstance(b, dict) else None) for k, v in a.items())
        if isinstance(a, list):
            return sum(walk(v, b[i] if isinstance(b, list) and i < len(b) else None) for i, v in enumerate(a))
        return int(a != b)

    t_engine = timed(run_engine, pairs, 5)
    t_diff = timed(diff_objects, pairs, 5)
    t_walk = timed(walk, pairs, 3)
    t_patch = timed(jsonpatch.make_patch, pairs, 3)
    t_deep = timed(lambda d, lv: DeepDiff(d, lv), pairs[:400], 1) * (PAIRS / 400)
    print(f"pairs: {PAIRS} Deployments with managedFields, ~1% of fields drifted")
    print(f"driftguard engine (diff+ignore+classify+redact): {t_engine * 1000:8.1f} ms")
    print(f"driftguard diff alone:                           {t_diff * 1000:8.1f} ms")
    print(f"plain recursive walk (floor):                    {t_walk * 1000:8.1f} ms")
    print(f"jsonpatch.make_patch:                            {t_patch * 1000:8.1f} ms")
    print(f"deepdiff.DeepDiff (400 pairs, scaled):           {t_deep * 1000:8.1f} ms")
    print(f"ratio DeepDiff / engine:         {t_deep / t_engine:7.1f}x  (target >= 50x)")
    print(f"ratio make_patch / engine:       {t_patch / t_engine:7.1f}x  (target >= 5x)")
    print(f"ratio engine / plain walk:       {t_engine / t_walk:7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
