from __future__ import annotations

import xml.etree.ElementTree as ET

from airflow_dist_training.evaluation.gate import Champion, evaluate_gate, parse_gate_spec
from airflow_dist_training.evaluation.report import render_html, render_markdown, render_svg
from airflow_dist_training.evaluation.schema import parse_evaluation


def _decision(with_champion: bool = True) -> dict:
    challenger = parse_evaluation(
        {"metrics": {"accuracy": 0.93, "loss": 0.21}, "slices": {"de": {"accuracy": 0.88}}}, "e.json"
    )
    champion = Champion(
        id="local-group/2",
        evaluation=parse_evaluation({"metrics": {"accuracy": 0.91, "loss": 0.25}}, "c.json"),
        evaluation_uri="/reg/2/evaluation.json",
        version=2,
    )
    spec = parse_gate_spec(
        {
            "accuracy": {"min": 0.9, "no_regression": True},
            "loss": {"direction": "lower_is_better", "max": 0.2},
        }
    )
    return evaluate_gate(
        challenger, spec, champion if with_champion else None, challenger_uri="/out/evaluation.json"
    )


def test_markdown_lists_verdict_checks_and_metric_table() -> None:
    md = render_markdown(_decision(), title="T")
    assert md.startswith("# T\n\n**Quality gate: REJECTED**\n")
    assert "- Champion: `local-group/2`" in md
    assert "- FAIL loss: 0.21 <= 0.2 (max)" in md
    assert "| accuracy | 0.93 | 0.91 | +0.02 |" in md
    assert "| loss | 0.21 | 0.25 | -0.04 |" in md
    assert "| accuracy@de | 0.88 | — | — |" in md


def test_svg_is_well_formed_with_bars_for_both_models() -> None:
    svg = render_svg(_decision())
    root = ET.fromstring(svg)
    rects = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    # 2 legend swatches + accuracy (2 bars) + loss (2 bars) + accuracy@de (challenger only)
    assert len(rects) == 2 + 2 + 2 + 1
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert "accuracy: 0.93" in titles and "accuracy: 0.91" in titles


def test_html_is_self_contained_and_escaped() -> None:
    decision = _decision(with_champion=False)
    decision["challenger"]["model"] = "<script>alert(1)</script>"
    page = render_html(decision)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # no external resources
    assert "Quality gate: REJECTED" in page and "<svg" in page
    assert "none (first approved model in the group)" in page
