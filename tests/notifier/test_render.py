"""Every report renders: any class, with or without actor, values, namespace or cluster, in every channel and locale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftguard.diff import FieldChange
from driftguard.drift import CLASSES, MISSING, PRUNE_CANDIDATE, Actor, Classified, ResourceDrift
from driftguard.errors import ConfigError
from driftguard.manifests import ResourceKey
from driftguard.report import SEVERITIES, AppInfo, DriftReport, build_report
from notifier.channels import ALERT, FACTORIES, NOTICE, RESOLVE, build_channels
from notifier.config import parse_config
from notifier.digest import digest
from notifier.render import NOTICE_EVENTS, Templates, notice_view, view
from standins.drill import managed_item
from tests.helpers import examples

TEMPLATES = Templates()
LOCALES = ("zh-CN", "en")


def channels(locale: str) -> dict[str, Any]:
    """One channel of every registered type: a new channel is held to these properties as it is registered."""
    raw = {
        "locale": locale,
        "channels": {
            t: {
                "type": t,
                "url": "https://receiver.example.com/hook",
                "routing_key": "0" * 32,
                "locale": locale,
            }
            for t in FACTORIES
        },
    }
    return build_channels(parse_config(raw), TEMPLATES)


CHANNELS = {locale: channels(locale) for locale in LOCALES}

names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
text = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
actors = st.none() | st.builds(
    Actor, manager=text, operation=st.sampled_from(["", "Update", "Apply"]), time=st.none() | text
)
keys = st.builds(
    ResourceKey,
    group=st.sampled_from(["", "apps", "networking.k8s.io"]),
    kind=st.sampled_from(["Deployment", "Service", "ConfigMap", "Namespace", "Secret"]),
    namespace=st.sampled_from(["", "shop"]) | names,
    name=names,
)


@st.composite
def drifts(draw: Any) -> ResourceDrift:
    key = draw(keys)
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        cls = draw(st.sampled_from(CLASSES))
        whole = cls in (MISSING, PRUNE_CANDIDATE)
        path = "" if whole else draw(st.sampled_from(["/spec/replicas", "/metadata/labels/a~1b", "/data/x"]))
        change = FieldChange(
            path, draw(st.sampled_from(["add", "remove", "replace"])), draw(json_values), draw(json_values)
        )
        changes.append(Classified(key, change, cls, draw(actors), draw(st.sampled_from(["", "why"]))))
    return ResourceDrift(key, draw(st.sampled_from(["modified", "missing", "prune-candidate"])), changes)


apps = st.builds(
    AppInfo,
    name=names,
    namespace=st.sampled_from(["argocd", "team-a"]),
    project=st.sampled_from(["default", "shop"]),
    cluster=st.sampled_from(["", "prod-1", "https://kubernetes.default.svc"]),
    destination_namespace=st.sampled_from(["", "shop"]),
    revision=st.sampled_from(["", "0123456789abcdef" * 2]),
    sync_status=st.sampled_from(["", "OutOfSync", "Synced", "Unknown"]),
    health_status=st.sampled_from(["", "Healthy", "Degraded", "Missing"]),
    operation_phase=st.sampled_from(["", "Succeeded", "Failed", "Error"]),
)
reports = st.builds(DriftReport, app=apps, resources=st.lists(drifts(), max_size=4))


@settings(max_examples=examples(150), deadline=None)
@given(
    report=reports,
    link=st.sampled_from(["", "https://argocd.example.com/applications/argocd/x"]),
    severity=st.sampled_from(["", *SEVERITIES]),
)
def test_every_report_renders_in_every_channel_and_locale(
    report: DriftReport, link: str, severity: str
) -> None:
    v = view(report, link=link, severity=severity)
    for locale in LOCALES:
        for name, channel in CHANNELS[locale].items():
            for kind in (ALERT, RESOLVE):
                payload = channel.payload(v, kind=kind)
                body = json.dumps(payload, ensure_ascii=False)
                assert json.loads(body) == payload
                if kind == ALERT and name != "pagerduty":
                    for c in report.alerting:  # each alerting resource is named unless cut by a size limit
                        assert c.resource.name in body or "more" in body or "另有" in body


@settings(max_examples=examples(60), deadline=None)
@given(
    app=apps,
    event=st.sampled_from(NOTICE_EVENTS),
    message=text,
    lines=st.lists(text, max_size=5),
    counts=st.dictionaries(
        st.sampled_from(["Deployment", "Service", "PersistentVolumeClaim"]), st.integers(1, 500)
    ),
)
def test_every_notice_renders(
    app: AppInfo, event: str, message: str, lines: list[str], counts: dict[str, int]
) -> None:
    v = notice_view(app, event=event, message=message, lines=lines, counts=counts)
    for locale in LOCALES:
        for channel in CHANNELS[locale].values():
            body = json.dumps(channel.payload(v, kind=NOTICE), ensure_ascii=False)
            assert app.name in body


def _desired(kind: str, name: str) -> dict[str, Any]:
    api = "apps/v1" if kind == "Deployment" else "v1"
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"a": 1},
    }


@pytest.mark.parametrize(
    ("desired", "live"),
    [
        (_desired("Service", "api"), None),  # missing from the cluster
        (None, _desired("ConfigMap", "orphan")),  # about to be pruned
        (
            _desired("Deployment", "api"),
            {**_desired("Deployment", "api"), "spec": {"a": 2}},
        ),  # no managedFields
    ],
    ids=["missing", "prune-candidate", "no-managed-fields"],
)
def test_odd_but_valid_managed_resources_render(desired: Any, live: Any) -> None:
    app = {"metadata": {"name": "shop", "namespace": "argocd"}, "spec": {}, "status": {}}
    report = build_report(app, [managed_item(desired, live)])
    assert report.alerting, "the change must alert"
    v = view(report)
    for locale in LOCALES:
        for channel in CHANNELS[locale].values():
            channel.payload(v, kind=ALERT)


@pytest.mark.parametrize(
    "broken",
    [
        "{% macro change(f) %}{{ f.when.at }}{% endmacro %}",
        "{% macro change(f) %}{{ f.manager[0] }}{% endmacro %}",
        "{% macro change(f) %}{{ f.name.split('/')[1] }}{% endmacro %}",
    ],
    ids=["time-assumed", "manager-assumed", "namespace-assumed"],
)
def test_a_template_override_that_breaks_on_any_class_stops_start_up(tmp_path: Path, broken: str) -> None:
    stock = (Path(__file__).parents[2] / "notifier" / "templates" / "slack.en.j2").read_text()
    (tmp_path / "slack.en.j2").write_text(_without_change(stock) + "\n" + broken + "\n")
    with pytest.raises(ConfigError, match=r"slack\.en\.j2 is broken"):
        Templates(str(tmp_path))


def test_a_guarded_override_starts(tmp_path: Path) -> None:
    """The control for the test above: the same surgery with a macro that guards the optional fields."""
    stock = (Path(__file__).parents[2] / "notifier" / "templates" / "slack.en.j2").read_text()
    good = (
        "{% macro change(f) %}{{ f.readable }}{% if f.when %} {{ f.when.at }}{% endif %}"
        "{% if f.manager %} {{ f.manager[0] }}{% endif %}"
        "{% if '/' in f.name %} {{ f.name.split('/')[1] }}{% endif %}{% endmacro %}"
    )
    (tmp_path / "slack.en.j2").write_text(_without_change(stock) + "\n" + good + "\n")
    templates = Templates(str(tmp_path))
    assert templates.render("slack", "en", "change", view_with_actor()) == "spec.replicas k api"


def view_with_actor() -> dict[str, Any]:
    key = ResourceKey("apps", "Deployment", "shop", "api")
    c = Classified(key, FieldChange("/spec/replicas", "replace", 1, 2), "human", Actor("kubectl-edit"))
    fields: list[dict[str, Any]] = digest(
        view(DriftReport(AppInfo("x"), [ResourceDrift(key, "modified", [c])]))
    )["fields"]
    return fields[0]


def _without_change(template: str) -> str:
    """The stock template minus its ``change`` macro (up to its endmacro)."""
    start = template.index("{% macro change(f) %}")
    end = template.index("{% endmacro %}", start) + len("{% endmacro %}")
    return template[:start] + template[end:]


def _without(template: str, macro: str) -> str:
    start = template.index("{% macro " + macro + "(")
    end = template.index("{% endmacro %}", start) + len("{% endmacro %}")
    return template[:start] + template[end:]


def test_an_override_older_than_the_cause_and_resource_button_macros_starts_with_the_stock_ones(
    tmp_path: Path,
) -> None:
    stock = (Path(__file__).parents[2] / "notifier" / "templates" / "feishu.en.j2").read_text()
    older = _without(_without(stock, "cause"), "resource_button").replace(
        "Open in Argo CD", "Argo CD, please"
    )
    (tmp_path / "feishu.en.j2").write_text(older)
    templates = Templates(str(tmp_path))
    from driftguard.cause import Cause

    d = digest(view(DriftReport(AppInfo("x"), cause=Cause("render-refused", "helm rendered 0", "empty"))))
    assert templates.render("feishu", "en", "button", d) == "Argo CD, please"  # the override's own
    assert templates.render("feishu", "en", "cause", d).startswith(
        "**Cause**: render refused by driftguard (empty guard): helm rendered 0"
    )
    # a macro the override must have still stops start-up when it is missing
    (tmp_path / "feishu.en.j2").write_text(_without(older, "todo"))
    with pytest.raises(ConfigError, match=r"feishu\.en\.j2 is broken: AttributeError: no macro todo"):
        Templates(str(tmp_path))
