"""A readable evaluation report: markdown, and self-contained HTML with an inline SVG bar plot.

Pure (standard library only): no matplotlib, no external CSS or scripts, so the HTML file opens
anywhere, including from S3 or an air-gapped laptop. Input is the gate decision dict from
``airflow_dist_training.evaluation.gate.evaluate_gate``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

REPORT_MD = "evaluation_report.md"
REPORT_HTML = "evaluation_report.html"

_CHALLENGER_COLOR = "#2563eb"
_CHAMPION_COLOR = "#9ca3af"


def _rows(decision: Mapping[str, Any]) -> list[tuple[str, float, float | None]]:
    """(metric, challenger value, champion value) for every top-level and slice metric."""
    chal = decision["challenger"]
    champ = decision.get("champion") or {}
    rows = [
        (name, value, (champ.get("metrics") or {}).get(name))
        for name, value in sorted(chal["metrics"].items())
    ]
    for slice_name in sorted(chal.get("slices") or {}):
        for name in sorted(chal["slices"][slice_name]):
            base = ((champ.get("slices") or {}).get(slice_name) or {}).get(name)
            rows.append((f"{name}@{slice_name}", chal["slices"][slice_name][name], base))
    return rows


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def _delta(value: float, base: float | None) -> str:
    return "—" if base is None else f"{value - base:+.4g}"


def render_markdown(decision: Mapping[str, Any], title: str = "Model evaluation") -> str:
    champ = decision.get("champion")
    verdict = "PASSED" if decision["passed"] else "REJECTED"
    lines = [
        f"# {title}",
        "",
        f"**Quality gate: {verdict}**",
        "",
        f"- Challenger evaluation: `{decision['challenger'].get('evaluation_uri')}`",
        f"- Challenger model: `{decision['challenger'].get('model') or 'unknown'}`",
        f"- Evaluation set: `{decision['challenger'].get('evaluation_set_hash') or 'unknown'}`",
        f"- Champion: `{champ['id']}`" if champ else "- Champion: none (first approved model in the group)",
    ]
    if champ:
        lines.append(f"- Champion evaluation set: `{champ.get('evaluation_set_hash') or 'unknown'}`")
    lines += ["", "## Checks", ""]
    lines += [f"- {r}" for r in decision["reasons"]] or ["- (no checks)"]
    lines += ["", "## Metrics", "", "| metric | challenger | champion | change |", "|---|---:|---:|---:|"]
    for name, value, base in _rows(decision):
        lines.append(f"| {name} | {_fmt(value)} | {_fmt(base)} | {_delta(value, base)} |")
    lines += ["", "## Thresholds", "", "```json", _json(decision.get("thresholds", {})), "```", ""]
    return "\n".join(lines)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, sort_keys=True)


def render_svg(decision: Mapping[str, Any]) -> str:
    """Horizontal bars, one group per metric, each group scaled to its own largest magnitude.

    Metrics live on different scales (accuracy 0.9, loss 0.2, latency 40 ms), so a shared axis
    would flatten the small ones; the printed values keep the numbers exact.
    """
    rows = _rows(decision)
    has_champion = decision.get("champion") is not None
    label_w, bar_w, value_w, bar_h, gap = 220, 360, 90, 14, 12
    group_h = bar_h * (2 if has_champion else 1) + gap
    height = 40 + group_h * max(len(rows), 1)
    width = label_w + bar_w + value_w
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="challenger vs champion metrics" '
        'font-family="sans-serif" font-size="12">',
        f'<rect x="{label_w}" y="6" width="12" height="12" fill="{_CHALLENGER_COLOR}"/>'
        f'<text x="{label_w + 16}" y="16">challenger</text>',
    ]
    if has_champion:
        parts.append(
            f'<rect x="{label_w + 100}" y="6" width="12" height="12" fill="{_CHAMPION_COLOR}"/>'
            f'<text x="{label_w + 116}" y="16">champion</text>'
        )
    y = 32
    for name, value, base in rows:
        scale = max(abs(value), abs(base) if base is not None else 0.0) or 1.0
        parts.append(
            f'<text x="{label_w - 8}" y="{y + bar_h - 2}" text-anchor="end">{html.escape(name)}</text>'
        )
        bars = [(value, _CHALLENGER_COLOR)] + ([(base, _CHAMPION_COLOR)] if has_champion else [])
        for i, (v, color) in enumerate(bars):
            by = y + i * bar_h
            if v is None:
                parts.append(f'<text x="{label_w + 4}" y="{by + bar_h - 3}" fill="#6b7280">n/a</text>')
                continue
            w = max(1.0, bar_w * abs(v) / scale)
            parts.append(
                f'<rect x="{label_w}" y="{by + 1}" width="{w:.1f}" height="{bar_h - 2}" fill="{color}">'
                f"<title>{html.escape(name)}: {_fmt(v)}</title></rect>"
                f'<text x="{label_w + w + 4:.1f}" y="{by + bar_h - 3}">{_fmt(v)}</text>'
            )
        y += group_h
    parts.append("</svg>")
    return "".join(parts)


def render_html(decision: Mapping[str, Any], title: str = "Model evaluation") -> str:
    champ = decision.get("champion")
    passed = bool(decision["passed"])
    color = "#15803d" if passed else "#b91c1c"
    e = html.escape
    reasons = "".join(f'<li class="{e(r.split(" ", 1)[0].lower())}">{e(r)}</li>' for r in decision["reasons"])
    rows = "".join(
        f"<tr><td>{e(n)}</td><td>{_fmt(v)}</td><td>{_fmt(b)}</td><td>{_delta(v, b)}</td></tr>"
        for n, v, b in _rows(decision)
    )
    chal = decision["challenger"]
    facts = [
        ("Challenger evaluation", chal.get("evaluation_uri")),
        ("Challenger model", chal.get("model") or "unknown"),
        ("Evaluation set", chal.get("evaluation_set_hash") or "unknown"),
        ("Champion", champ["id"] if champ else "none (first approved model in the group)"),
    ]
    if champ:
        facts.append(("Champion evaluation set", champ.get("evaluation_set_hash") or "unknown"))
    facts_html = "".join(f"<dt>{e(k)}</dt><dd><code>{e(str(v))}</code></dd>" for k, v in facts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body{{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#111827}}
.verdict{{display:inline-block;padding:.3rem .8rem;border-radius:.3rem;color:#fff;background:{color}}}
table{{border-collapse:collapse}} td,th{{border:1px solid #d1d5db;padding:.25rem .6rem;text-align:right}}
td:first-child,th:first-child{{text-align:left}} dt{{font-weight:bold}} dd{{margin:0 0 .4rem 0}}
li.fail{{color:#b91c1c}} li.pass{{color:#15803d}} li.warn{{color:#b45309}} li.skip{{color:#6b7280}}
pre{{background:#f3f4f6;padding:.6rem}}
</style></head><body>
<h1>{e(title)}</h1>
<p class="verdict">Quality gate: {"PASSED" if passed else "REJECTED"}</p>
<dl>{facts_html}</dl>
<h2>Checks</h2><ul>{reasons}</ul>
<h2>Metrics</h2>
{render_svg(decision)}
<table><thead><tr><th>metric</th><th>challenger</th><th>champion</th><th>change</th></tr></thead>
<tbody>{rows}</tbody></table>
<h2>Thresholds</h2><pre>{e(_json(decision.get("thresholds", {})))}</pre>
</body></html>
"""
