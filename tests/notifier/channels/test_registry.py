"""The channel extension point: everything the notifier knows of a channel comes from its registered class.

A new channel is its module, one line in ``FACTORIES`` (notifier/channels/__init__.py), its
template pair and its tests (docs/development.md, "Add a channel"); these tests fail when a
registered class lacks what the rest of the notifier reads from it, or a shipped template pair
has no class.
"""

from __future__ import annotations

import pytest

from driftguard.errors import ConfigError
from notifier.channels import FACTORIES, build_channels
from notifier.channels.slack import SlackChannel
from notifier.config import LOCALES, parse_config
from notifier.preview import main as preview
from notifier.render import STOCK, Templates


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_registered_class_says_what_the_worker_and_preview_read(name: str) -> None:
    cls = FACTORIES[name]
    assert getattr(cls, "type", None) == name
    assert isinstance(getattr(cls, "idempotent", None), bool)
    assert isinstance(getattr(cls, "per_incident", None), bool)
    assert getattr(cls, "default_locale", None) in LOCALES


def test_every_registered_channel_has_its_templates_and_every_template_pair_a_channel() -> None:
    assert set(Templates().macros()) == set(FACTORIES)
    for name in FACTORIES:
        for locale in LOCALES:
            assert (STOCK / f"{name}.{locale}.j2").is_file(), (name, locale)


def test_a_registered_channel_without_templates_stops_start_up() -> None:
    """Not a KeyError at the first alert: start-up names the two files to add."""
    config = parse_config(
        {"channels": {"p": {"type": "carrier-pigeon", "url": "https://receiver.example.com/h"}}}
    )
    with pytest.raises(ConfigError) as exc:
        build_channels(config, Templates(), {**FACTORIES, "carrier-pigeon": SlackChannel})
    assert exc.value.setting == "config.channels.p.type"
    assert "carrier-pigeon.en.j2 and carrier-pigeon.zh-CN.j2" in str(exc.value)
    assert set(
        build_channels(
            parse_config({"channels": {"s": {"type": "slack", "url": "https://receiver.example.com/h"}}}),
            Templates(),
        )
    ) == {"s"}


def test_preview_offers_exactly_the_registered_channels(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        preview(["--managed-resources", "m.json", "--app", "a.json", "--channel", "carrier-pigeon"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'carrier-pigeon'" in err
    assert all(f"'{name}'" in err for name in FACTORIES), err


def test_only_a_channel_that_keeps_incidents_gets_one_alert_per_incident_kind() -> None:
    """PagerDuty keeps one incident per kind; the chat channels do not (notifier/alerts/plan.py reads this)."""
    assert {n for n, cls in FACTORIES.items() if getattr(cls, "per_incident", False)} == {"pagerduty"}
