"""The admission webhook's path stays short: records written in batches off the request path."""

from __future__ import annotations

from flask import Flask

from driftguard.identity import from_admission
from notifier.identity import Recorder
from standins.apiserver import admission_review
from standins.drill import inference_live


def test_reviews_arriving_together_are_written_in_one_batch_not_one_write_each(idapp: Flask) -> None:
    store = idapp.extensions["driftguard"].identities
    batches: list[tuple[str, int]] = []
    recorder = Recorder(store, on_result=lambda outcome, n: batches.append((outcome, n)))
    obj = inference_live()
    for _ in range(20):
        ev = from_admission(admission_review(obj)["request"])
        assert ev is not None and recorder.record(ev)
    recorder.flush()
    # the writer waits ``linger`` after the first record: a write per review woke it between two
    # reviews, and its time under the GIL landed on the next answer
    assert batches == [("accepted", 20)]
