"""The delivery loop does not wait for its poll when work is there: a channel free again is used at once."""

from __future__ import annotations

from flask import Flask

from standins.argo_api import FakeArgo
from standins.drill import serve_drill
from standins.receivers import Receivers
from tests.helpers import wait_until

from .conftest import notification, post


def test_a_channel_that_finished_a_send_takes_its_next_message_without_waiting_for_the_poll(
    app: Flask, argo: FakeArgo, rx: Receivers
) -> None:
    for name in ("app-a", "app-b"):
        serve_drill(argo, name=name)
    rx.delay["/slack"] = 0.5  # app-b's Slack message is queued while app-a's is still being sent
    worker = app.extensions["driftguard"].worker
    worker.poll = 3600.0  # only a wake-up can start the second Slack send within this test
    client = app.test_client()
    for name in ("app-a", "app-b"):
        assert post(client, notification(name)).status_code == 202
    worker.start()
    try:
        wait_until(lambda: len(rx.on("/slack")) >= 2, "the second Slack message (only a wake-up sends it)")
    finally:
        worker.stop()
    assert len(rx.on("/slack")) == 2 and len(rx.on("/feishu")) == 2 and len(rx.on("/pagerduty")) == 2
