"""The config file: ${ENV} expansion, validation at start-up, routes."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftguard.errors import ConfigError
from driftguard.report import AppInfo, DriftReport
from notifier.channels import build_channels
from notifier.config import load_config, parse_config
from notifier.render import Templates

PD = "0123456789abcdef0123456789abcdef"


def test_env_expansion_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEISHU_URL", "https://open.feishu.cn/open-apis/bot/v2/hook/abc")
    monkeypatch.setenv("PD_KEY", PD)
    f = tmp_path / "c.yaml"
    f.write_text(
        'channels:\n  f: {type: feishu, url: "${FEISHU_URL}"}\n  pd: {type: pagerduty, routing_key: "${PD_KEY}"}\n'
    )
    cfg = load_config(str(f), argocd_url="https://argocd.example.com")
    assert cfg.channels["f"].url.endswith("/hook/abc") and cfg.locale == "zh-CN"
    assert cfg.routes[0].channels == ("f", "pd") and cfg.argocd_url == "https://argocd.example.com"
    channels = build_channels(cfg, Templates())
    assert channels["pd"].url == "https://events.pagerduty.com/v2/enqueue"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("raw", "setting"),
    [
        ({"channels": {"x": {"type": "feishu", "url": "${NOT_SET_ANYWHERE}"}}}, "NOT_SET_ANYWHERE"),
        ({"channels": {}}, "config.channels"),
        (
            {"channels": {"x": {"type": "feishu", "url": "https://a.example.com", "bogus": 1}}},
            "config.channels.x",
        ),
        (
            {
                "channels": {"x": {"type": "feishu", "url": "https://a.example.com"}},
                "routes": [{"channels": ["y"]}],
            },
            "config.routes[0].channels",
        ),
        (
            {
                "channels": {"x": {"type": "feishu", "url": "https://a.example.com"}},
                "routes": [{"channels": ["x"], "match": {"classes": ["controller"]}}],
            },
            "config.routes[0].match.classes",
        ),
        (
            {
                "channels": {"x": {"type": "feishu", "url": "https://a.example.com"}},
                "routes": [{"channels": ["x"], "severity": "huge"}],
            },
            "config.routes[0].severity",
        ),
        (
            {"channels": {"x": {"type": "feishu", "url": "https://a.example.com"}}, "locale": "fr"},
            "config.locale",
        ),
        ({"channels": {"x": {"type": "teams", "url": "https://a.example.com"}}}, "config.channels.x.type"),
        ({"channels": {"x": {"type": "feishu", "url": "https://a.example.com"}}, "extra": 1}, "config"),
    ],
)
def test_mistakes_stop_start_up_naming_the_setting(raw: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as exc:
        build_channels(parse_config(raw), Templates())
    assert exc.value.setting == setting


def test_missing_or_broken_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DRIFTGUARD_NOTIFIER_CONFIG"):
        load_config("")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.yaml"))
    (tmp_path / "bad.yaml").write_text("channels: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(tmp_path / "bad.yaml"))


def test_routes_match_apps_projects_namespaces_and_classes() -> None:
    cfg = parse_config(
        {
            "channels": {
                "a": {"type": "feishu", "url": "https://a.example.com"},
                "b": {"type": "feishu", "url": "https://b.example.com"},
            },
            "routes": [
                {
                    "match": {"apps": ["*-production"], "classes": ["human"]},
                    "channels": ["a"],
                    "severity": "critical",
                },
                {"match": {"projects": ["shop"]}, "channels": ["b"]},
            ],
        }
    )
    prod = DriftReport(AppInfo("pay-production", project="pay"))
    assert cfg.targets(prod, {"human"}) == {"a": "critical"}
    assert cfg.targets(prod, {"missing"}) == {}
    assert cfg.targets(DriftReport(AppInfo("x", project="shop")), {"prune-candidate"}) == {"b": "info"}


def test_broken_template_override_fails_at_start_up(tmp_path: Path) -> None:
    (tmp_path / "slack.en.j2").write_text("{% macro header(r) %}{{ r.nope.deeper }}{% endmacro %}")
    with pytest.raises(ConfigError, match=r"template slack\.en\.j2 is broken"):
        Templates(str(tmp_path))
    (tmp_path / "slack.en.j2").write_text("{% macro header(r %}")
    with pytest.raises(ConfigError, match="DRIFTGUARD_NOTIFIER_TEMPLATES"):
        Templates(str(tmp_path))


def test_a_good_override_is_used(tmp_path: Path) -> None:
    src = (Path(__file__).resolve().parents[2] / "notifier/templates/pagerduty.en.j2").read_text()
    (tmp_path / "pagerduty.en.j2").write_text(
        src.replace("{% macro title(d) %}", "{% macro title(d) %}OVERRIDDEN ")
    )
    t = Templates(str(tmp_path))
    from notifier.digest import digest
    from notifier.render import view

    assert "OVERRIDDEN x" in t.render("pagerduty", "en", "title", digest(view(DriftReport(AppInfo("x")))))


def test_an_override_changed_in_place_is_compiled_again_and_the_stock_ones_are_not(tmp_path: Path) -> None:
    """Templates of one process share their compiled code (notifier/render.py ``_COMPILED``), keyed
    by jinja on the source's checksum: the same file with new text is never served stale."""
    from notifier import render

    src = (Path(__file__).resolve().parents[2] / "notifier/templates/pagerduty.en.j2").read_text()
    override = tmp_path / "pagerduty.en.j2"
    override.write_text(src.replace("{% macro title(d) %}", "{% macro title(d) %}FIRST "))
    Templates(str(tmp_path))
    compiled = len(render._COMPILED)
    Templates(str(tmp_path))
    assert len(render._COMPILED) == compiled, "the same sources compiled again"
    override.write_text(src.replace("{% macro title(d) %}", "{% macro title(d) %}SECOND "))
    t = Templates(str(tmp_path))
    from notifier.digest import digest
    from notifier.render import view

    assert "SECOND x" in t.render("pagerduty", "en", "title", digest(view(DriftReport(AppInfo("x")))))
    override.write_text("{% macro title(d) %}{{ d.nope.deeper }}{% endmacro %}")
    with pytest.raises(ConfigError, match=r"template pagerduty\.en\.j2 is broken"):
        Templates(str(tmp_path))


def test_time_zone_is_an_iana_name_defaulting_to_utc() -> None:
    from notifier.config import parse_config

    channels = {"s": {"type": "slack", "url": "https://hooks.example.com/x"}}
    assert parse_config({"channels": channels}).time_zone == "UTC"
    assert parse_config({"channels": channels, "timeZone": "Asia/Shanghai"}).time_zone == "Asia/Shanghai"
    with pytest.raises(ConfigError, match=r"config\.timeZone.*not a known IANA time zone"):
        parse_config({"channels": channels, "timeZone": "Mars/Olympus"})
