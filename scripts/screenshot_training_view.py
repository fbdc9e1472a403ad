#!/usr/bin/env python3
"""Drive the Training view in headless Chromium: read what it shows, take screenshots.

Uses the same Chrome DevTools Protocol helpers as ``screenshot_trigger_form.py`` (Debian
``chromium``, the ``websockets`` package Airflow installs) and logs in the same way (a JWT from
``POST /auth/token`` set as the UI's ``_token`` cookie).

``TrainingViewBrowser`` keeps ONE page open, so a test can watch the view update without a reload::

    async with TrainingViewBrowser(base_url, token) as browser:
        await browser.open_view(dag_id, run_id)
        state = await browser.state()          # {"epochs": {"train:loss": 3}, "verdict": ..., ...}
        await browser.screenshot(shots / "training-view-running.png")

``python scripts/screenshot_training_view.py`` (from the repository root) makes the docs' copies in
``docs/img`` from a real run (see ``main``).
"""

from __future__ import annotations

import base64
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from scripts.screenshot_trigger_form import Cdp, start_chromium, stop_chromium

# What the page shows, read from its DOM (the SVG charts carry data-points / data-epochs, each
# host's polyline its data-host / data-points, each member's its data-member / data-winner; the
# progress and ETA cells their data-*).
READ_STATE = """
(() => {
  const ticks = (svg, cls) => [...svg.querySelectorAll('text.' + cls)].map((t) => t.textContent);
  const charts = {};
  document.querySelectorAll('.job svg.metric-chart').forEach((svg) => {
    const hosts = {};  // points per host (one polyline each)
    svg.querySelectorAll('polyline[data-host]').forEach((line) => {
      hosts[line.dataset.host] = Number(line.dataset.points);
    });
    if (charts[svg.dataset.metric]) return;  // the first job's (tests of one job read it)
    charts[svg.dataset.metric] = {points: Number(svg.dataset.points), epochs: Number(svg.dataset.epochs), hosts,
      x_ticks: ticks(svg, 'x-tick'), y_ticks: ticks(svg, 'y-tick')};
  });
  const values = {};  // metrics with one value, shown as a number
  document.querySelectorAll('.job .metric-value').forEach((el) => {
    values[el.dataset.metric] = el.querySelector('.value').textContent.trim();
  });
  const jobs = [...document.querySelectorAll('.job')].map((card) => {
    const progress = card.querySelector('.progress');
    const eta = card.querySelector('.eta');
    const hosts = [...card.querySelectorAll('.kv')].find((kv) => kv.querySelector('b').textContent === 'Hosts');
    return {
      job: card.dataset.job, status: card.dataset.status,
      progress: progress ? {unit: progress.dataset.unit, done: progress.dataset.done, total: progress.dataset.total,
        text: progress.textContent.trim()} : null,
      eta: eta ? {seconds: eta.dataset.eta, text: eta.textContent.trim()} : null,
      hosts: hosts ? hosts.textContent.trim() : null,
      member: (card.querySelector('.member') || {}).textContent || null,
    };
  });
  // a mapped run's members side by side: a curve per member per metric, the winner marked
  const members = [...document.querySelectorAll('.card.members')].map((card) => {
    const memberCharts = {};
    card.querySelectorAll('svg.member-chart').forEach((svg) => {
      const curves = {};
      svg.querySelectorAll('polyline[data-member]').forEach((line) => {
        curves[line.dataset.member] = {points: Number(line.dataset.points), winner: line.dataset.winner === 'true'};
      });
      memberCharts[svg.dataset.metric] = {curves, x_ticks: ticks(svg, 'x-tick'), y_ticks: ticks(svg, 'y-tick')};
    });
    const memberValues = {};
    card.querySelectorAll('.metric-value').forEach((el) => {
      memberValues[el.dataset.metric] = el.querySelector('.value').textContent.trim();
    });
    const rows = [...card.querySelectorAll('tr[data-member]')].map((tr) => ({
      member: tr.dataset.member, winner: tr.dataset.winner === 'true',
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()),
    }));
    return {group: card.dataset.group, winner: card.dataset.winner || null, rows, charts: memberCharts,
      values: memberValues, title: card.querySelector('h2').textContent.trim()};
  });
  const job = document.querySelector('.job');
  const verdict = document.getElementById('gate-verdict');
  const version = document.getElementById('model-version');
  const runBadge = document.querySelector('#subtitle .badge');
  return {
    run_state: runBadge ? runBadge.textContent.trim() : null,
    updated: document.getElementById('root').dataset.updated || null,
    charts,
    values,
    jobs,
    members,
    job_status: job ? job.dataset.status : null,
    verdict: verdict ? verdict.textContent.trim() : null,
    version: version ? version.textContent.trim() : null,
    plot: !!document.querySelector('.plot svg'),
    text: document.body.innerText.slice(0, 4000),
  };
})()
"""


class TrainingViewBrowser:
    """One headless Chromium page logged in to Airflow."""

    def __init__(self, base_url: str, token: str, width: int = 1280, height: int = 1400) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.width, self.height = width, height
        self.chromium = shutil.which("chromium") or "/usr/bin/chromium"

    async def __aenter__(self) -> TrainingViewBrowser:
        import websockets

        self._profile = tempfile.TemporaryDirectory(prefix="adt-chromium-", ignore_cleanup_errors=True)
        self.proc, port = start_chromium(self.chromium, Path(self._profile.name), self.width, self.height)
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(t for t in targets if t.get("type") == "page")
        self._ws_cm = websockets.connect(page["webSocketDebuggerUrl"], max_size=None, ping_interval=None)
        self.cdp = Cdp(await self._ws_cm.__aenter__())
        await self.cdp.send("Page.enable")
        await self.cdp.send(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await self.cdp.send("Network.enable")
        await self.cdp.send(
            "Network.setCookie", name="_token", value=self.token, url=f"{self.base_url}/", path="/"
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._ws_cm.__aexit__(None, None, None)
        finally:
            stop_chromium(self.proc)
            self._profile.cleanup()

    async def navigate(self, path: str) -> None:
        await self.cdp.send("Page.navigate", url=f"{self.base_url}{path}")

    async def open_view(self, dag_id: str, run_id: str) -> None:
        """The Training view page itself (what the DAG run tab shows in its iframe)."""
        await self.navigate(f"/dist-training/view?dag_id={quote(dag_id)}&run_id={quote(run_id)}")

    async def state(self) -> dict[str, Any]:
        return dict(await self.cdp.evaluate(READ_STATE) or {})

    async def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        return await self.cdp.wait_for(expression, timeout, what)

    async def screenshot(self, out: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = await self.cdp.evaluate(
                "({w: document.documentElement.scrollWidth, h: document.documentElement.scrollHeight})"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size["w"], "height": min(size["h"], 4000), "scale": 1}
            params["captureBeyondViewport"] = True
        shot = await self.cdp.send("Page.captureScreenshot", **params)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(shot["data"]))
        return out


SHOTS = (
    "training-view-running.png",
    "training-view-finished.png",
    "training-view-dag-run-tab.png",
    "training-view-members-running.png",
    "training-view-members.png",
)
TESTS = (  # the e2e tests that take them (one Airflow stack, three runs at once)
    "tests/e2e/test_training_view_e2e.py::test_training_view_shows_live_curves_then_gate_and_version",
    "tests/e2e/test_training_view_e2e.py::test_a_sweeps_three_sagemaker_members_side_by_side_with_progress_eta_and_winner",
)


def main() -> int:
    """Make the docs' Training view screenshots (docs/img/training-view-*.png): run the e2e tests
    that watch real runs (Airflow services, the SageMaker test endpoint, Chromium) with their
    screenshots kept in a temporary folder, then copy them into docs/img. Tests themselves never
    write into the repository."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as shots:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
            cwd=repo,
            env={**os.environ, "ADT_SCREENSHOTS_DIR": shots},
            check=False,
        )
        if done.returncode != 0:
            print("a Training view run failed; docs/img is unchanged", file=sys.stderr)
            return 1
        for name in SHOTS:
            shutil.copyfile(Path(shots) / name, repo / "docs" / "img" / name)
            print(f"docs/img/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
