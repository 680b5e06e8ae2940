"""The gunicorn settings both services share."""

from __future__ import annotations

import gc

from driftguard.gunicorn_conf import post_worker_init


def test_a_booted_worker_moves_what_it_loaded_out_of_the_collectors_sight() -> None:
    assert gc.get_freeze_count() == 0
    try:
        post_worker_init(None)
        # full collections walk only what requests allocated since, not Flask, Jinja and the app
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()
