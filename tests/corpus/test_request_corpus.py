"""Every request the provider builds is byte-identical to the recorded corpus (``requests.json``).

A change to any request (example spec, parity case, plan task, training task, local backend) fails
here with the changed fields named. A deliberate change re-records the corpus
(``.venv/bin/python -m tests.corpus.requests``) and the diff of ``requests.json`` is reviewed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.corpus.requests import all_requests, canonical, recorded
from tests.parity.test_request_parity import diff

RE_RECORD = "re-record deliberately with: .venv/bin/python -m tests.corpus.requests"


def _render(differences: dict[str, tuple[Any, Any]]) -> str:
    return "\n".join(
        f"  {path}\n      now:      {json.dumps(now)}\n      recorded: {json.dumps(then)}"
        for path, (now, then) in differences.items()
    )


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    return all_requests()


def test_the_corpus_has_exactly_the_requests_built_now(current: dict[str, Any]) -> None:
    missing, extra = sorted(set(current) - set(recorded())), sorted(set(recorded()) - set(current))
    assert not missing and not extra, f"not recorded: {missing}; recorded but not built: {extra}; {RE_RECORD}"


def test_every_view_of_the_corpus_is_present(current: dict[str, Any]) -> None:
    kinds = {key.split("/", 1)[0] for key in current}
    assert kinds == {"plan", "parity", "plan_task", "sent", "local"}
    assert len(current) > 60  # 13 examples x 3 views + 30 parity cases + the local demo


def test_every_request_is_byte_identical_to_the_recorded_one(current: dict[str, Any]) -> None:
    corpus = recorded()
    changed = {
        key: diff(request, corpus[key])
        for key, request in current.items()
        if key in corpus and canonical(request) != canonical(corpus[key])
    }
    report = "\n".join(
        f"{key} (now vs recorded):\n{_render(d) or '  (key order or encoding)'}" for key, d in changed.items()
    )
    assert not changed, f"{len(changed)} request(s) changed:\n{report}\n{RE_RECORD}"
