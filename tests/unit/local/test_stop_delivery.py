"""The pieces of SageMaker's stop on this machine: the grace setting, which processes handle SIGTERM
(PID 1 ignores it otherwise), and which processes the launcher forwards it to."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from types import ModuleType

import pytest

from airflow_dist_training.local.request_plan import JobOptions, default_stop_grace_seconds
from airflow_dist_training.local.supervisor import handles_signal
from airflow_dist_training.sagemaker.launcher import launcher_script


def adt_launch(tmp_path: object) -> ModuleType:
    from pathlib import Path

    path = Path(str(tmp_path)) / "adt_launch.py"
    path.write_bytes(launcher_script())
    spec = importlib.util.spec_from_file_location("adt_launch_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_grace_is_sagemakers_120_s_unless_the_machine_says_shorter() -> None:
    assert default_stop_grace_seconds({}) == 120.0
    assert default_stop_grace_seconds({"ADT_STOP_GRACE_SECONDS": "2.5"}) == 2.5
    with pytest.raises(ValueError, match="ADT_STOP_GRACE_SECONDS must be a number of seconds"):
        default_stop_grace_seconds({"ADT_STOP_GRACE_SECONDS": "soon"})


def test_job_options_take_the_grace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADT_STOP_GRACE_SECONDS", "7")
    assert JobOptions().stop_grace_seconds == 7.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_handles_signal_tells_a_sigterm_handler_from_none() -> None:
    code = "import signal, sys, time; {} print('ready', flush=True); time.sleep(30)"

    def start(handler: str) -> subprocess.Popen[str]:
        # SIGINT as in a foreground shell: under `cmd &` it starts ignored, and Python then keeps it so
        default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
        argv = [sys.executable, "-c", code.format(handler)]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint)

    deaf = start("")
    hears = start("signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));")
    try:
        for proc in (deaf, hears):
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert not handles_signal(deaf.pid, signal.SIGTERM)
        assert handles_signal(hears.pid, signal.SIGTERM)
        assert handles_signal(deaf.pid, signal.SIGINT)  # Python's own KeyboardInterrupt handler
    finally:
        for proc in (deaf, hears):
            proc.kill()
            proc.wait()


def test_the_launcher_forwards_to_the_script_not_to_shells_torchrun_or_the_toolkit(tmp_path: object) -> None:
    launch = adt_launch(tmp_path)
    assert launch.passes_on(["/bin/sh", "-c", "python train.py"])
    assert launch.passes_on(["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=1", "train.py"])
    assert launch.passes_on(["/opt/conda/bin/python3.12", "/opt/conda/bin/train"])
    assert launch.passes_on(
        ["python", "-c", "from sagemaker_training.cli.train import main; main()", "train"]
    )
    assert not launch.passes_on(["/opt/conda/bin/python3.12", "train.py", "--epochs", "2"])
    assert not launch.passes_on(["/usr/bin/python3", "-u", "/opt/ml/code/train.py"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_wrap_mode_passes_sigterm_to_the_script_below_a_shell(tmp_path: object) -> None:
    from pathlib import Path

    adt_launch(tmp_path)  # writes the file
    script = Path(str(tmp_path)) / "work.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('handled', flush=True), sys.exit(3)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    shell = f"{sys.executable} {script}; echo shell-saw-$?"  # the toolkit's create_subprocess_shell
    proc = subprocess.Popen(
        [sys.executable, str(Path(str(tmp_path)) / "adt_launch.py"), "--wrap", "/bin/sh", "-c", shell],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(2)]
    assert lines[-1] == "ready", lines
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "SIGTERM forwarded to 1 training process(es)" in out
    assert "handled" in out and "shell-saw-3" in out  # the script's handler ran; the shell was spared
    assert proc.returncode == 0
