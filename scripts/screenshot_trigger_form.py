#!/usr/bin/env python3
"""Screenshot a DAG's trigger form (the Params form of the Airflow 3 UI) with headless Chromium.

Uses Debian's ``chromium`` (``/usr/bin/chromium``; ``scripts/setup.sh`` installs it) driven over the
Chrome DevTools Protocol with the ``websockets`` package that Airflow already installs. Logs in by
getting a JWT from ``POST /auth/token`` and setting it as the UI's ``_token`` cookie, opens
``/dags/<dag_id>``, clicks "Trigger" and saves the dialog as a PNG.

Against running services::

    .venv/bin/python scripts/screenshot_trigger_form.py --dag-id my_dag \\
        --base-url http://127.0.0.1:8080 --username admin --password '...'

Without ``--base-url`` it starts Airflow's services itself (tests/e2e/airflow_services.py: a
temporary AIRFLOW_HOME, the repo's ``dags/`` plus ``tests/e2e/dags/``), takes the screenshot and
stops them::

    .venv/bin/python scripts/screenshot_trigger_form.py --dag-id distributed_retraining --out docs/img/retraining-trigger-form.png
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

# Finds the DAG page's "Trigger" button; returns its centre, or null while the page is loading.
FIND_TRIGGER_BUTTON = """
(() => {
  const b = [...document.querySelectorAll('button')].find(
    (el) => el.textContent.trim() === 'Trigger' && el.offsetParent !== null);
  if (!b) return null;
  const r = b.getBoundingClientRect();
  return {x: r.x + r.width / 2, y: r.y + r.height / 2};
})()
"""

# The open trigger dialog's box once its Params form has rendered (or null).
FIND_DIALOG = """
(() => {
  const d = [...document.querySelectorAll('[role="dialog"]')].find((el) => el.offsetParent !== null
      || el.getClientRects().length);
  if (!d || !d.querySelector('input, select, textarea, [role="combobox"]')) return null;
  const r = d.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height, scrollHeight: d.scrollHeight};
})()
"""


class Cdp:
    """A minimal Chrome DevTools Protocol client over one page websocket."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        await self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            message = json.loads(await self.ws.recv())
            if message.get("id") == msg_id:
                if "error" in message:
                    raise RuntimeError(f"CDP {method}: {message['error']}")
                return dict(message.get("result", {}))

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.5)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")

    async def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


def get_token(base_url: str, username: str, password: str) -> str:
    response = httpx.post(
        f"{base_url}/auth/token", json={"username": username, "password": password}, timeout=30
    )
    response.raise_for_status()
    return str(response.json()["access_token"])


def start_chromium(
    chromium: str, user_data_dir: Path, width: int, height: int
) -> tuple[subprocess.Popen[bytes], int]:
    """Start headless Chromium with a new empty profile; return it and its DevTools port."""
    proc = subprocess.Popen(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={user_data_dir}",
            f"--window-size={width},{height}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        process_group=0,
    )
    port_file = user_data_dir / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("chromium did not open its DevTools port within 30 s")


def stop_chromium(proc: subprocess.Popen[bytes]) -> None:
    """End Chromium and its helper processes (its own process group), so its profile can be removed."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=10)
            time.sleep(0.5)  # helpers (zygote, renderers) exit after the browser
        except subprocess.TimeoutExpired:
            continue


async def capture(
    *,
    base_url: str,
    token: str,
    dag_id: str,
    out: Path,
    chromium: str,
    width: int,
    height: int,
    timeout: float,
) -> dict[str, Any]:
    import websockets

    with tempfile.TemporaryDirectory(prefix="adt-chromium-", ignore_cleanup_errors=True) as profile:
        proc, port = start_chromium(chromium, Path(profile), width, height)
        try:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            page = next(t for t in targets if t.get("type") == "page")
            async with websockets.connect(page["webSocketDebuggerUrl"], max_size=None) as ws:
                cdp = Cdp(ws)
                await cdp.send("Page.enable")
                await cdp.send("Network.enable")
                await cdp.send(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                await cdp.send("Network.setCookie", name="_token", value=token, url=f"{base_url}/", path="/")
                await cdp.send("Page.navigate", url=f"{base_url}/dags/{dag_id}")
                button = await cdp.wait_for(FIND_TRIGGER_BUTTON, timeout, "the DAG page's Trigger button")
                await cdp.click(button["x"], button["y"])
                await cdp.wait_for(FIND_DIALOG, timeout, "the trigger form")
                await asyncio.sleep(1.5)  # let fonts, the JSON editor and animations settle
                box = await cdp.evaluate(FIND_DIALOG)
                margin = 8
                clip = {
                    "x": max(0, box["x"] - margin),
                    "y": max(0, box["y"] - margin),
                    "width": min(width, box["width"] + 2 * margin),
                    "height": min(height, box["height"] + 2 * margin),
                    "scale": 1,
                }
                shot = await cdp.send("Page.captureScreenshot", format="png", clip=clip)
        finally:
            stop_chromium(proc)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(shot["data"]))
    return {"path": str(out), "bytes": out.stat().st_size, "dialog": box}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dag-id", default="adt_e2e_params", help="the DAG whose trigger form to capture")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "img" / "retraining-trigger-form.png")
    parser.add_argument("--base-url", default=None, help="running api-server; default: start services here")
    parser.add_argument("--username", default="admin")
    parser.add_argument(
        "--password", default=None, help="default: read the AIRFLOW_HOME's generated password file"
    )
    parser.add_argument(
        "--airflow-home", type=Path, default=None, help="where to read the password file from"
    )
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    parser.add_argument("--timeout", type=float, default=90.0)
    args = parser.parse_args(argv)

    if not Path(args.chromium).exists():
        print(
            f"error: {args.chromium} not found; run scripts/setup.sh (apt-get install -y chromium)",
            file=sys.stderr,
        )
        return 2

    services = None
    base_url, password = args.base_url, args.password
    if base_url is None:
        sys.path.insert(0, str(REPO_ROOT))
        from tests.e2e.airflow_services import AirflowServices

        home = Path(tempfile.mkdtemp(prefix="adt-screenshot-home-"))
        services = AirflowServices(home=home)
        t0 = time.monotonic()
        services.start()
        print(
            f"services healthy after {time.monotonic() - t0:.1f} s ({services.startup_seconds})",
            file=sys.stderr,
        )
        base_url, password = services.base_url, services.password
    try:
        if password is None:
            home = args.airflow_home
            if home is None:
                print("error: give --password or --airflow-home", file=sys.stderr)
                return 2
            password = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())[
                args.username
            ]
        if services is not None:
            services.api().wait_for_dag(args.dag_id)
        token = get_token(base_url, args.username, password)
        result = asyncio.run(
            capture(
                base_url=base_url,
                token=token,
                dag_id=args.dag_id,
                out=args.out,
                chromium=args.chromium,
                width=args.width,
                height=args.height,
                timeout=args.timeout,
            )
        )
        print(json.dumps(result))
    finally:
        if services is not None:
            services.stop()
            shutil.rmtree(services.home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
