"""The job environment as the image's /opt/conda (local/hosts.py ``image_env``): which folders the
overlay stacks, and the shadow of the files that name this machine."""

from __future__ import annotations

import os
from pathlib import Path

from airflow_dist_training.local.hosts import image_env


def _venv(root: Path, name: str, home: Path) -> Path:
    env = root / name
    (env / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "pyvenv.cfg").write_text(
        f"home = {home}\ninclude-system-site-packages = false\nversion = 3.11.7\n"
        f"executable = {home}/python3.11\ncommand = {home}/python3.11 -m venv {env}\n"
    )
    (env / "bin" / "python").symlink_to(home / "python3.11")
    return env


def test_a_layered_venv_is_stacked_on_its_base_with_a_shadow_of_what_names_this_machine(
    tmp_path: Path,
) -> None:
    home = tmp_path / "pythons" / "3.11.7" / "bin"
    base = _venv(tmp_path, "pytorch", home)
    layer = _venv(tmp_path, "huggingface", home)
    pth = layer / "lib" / "python3.11" / "site-packages" / "_base.pth"
    pth.write_text(f"{base}/lib/python3.11/site-packages\n")
    # a .pth that is not another venv's site-packages (an editable install) stays as it is
    (layer / "lib" / "python3.11" / "site-packages" / "_editable.pth").write_text(f"{tmp_path}/src\n")
    torchrun = base / "bin" / "torchrun"
    torchrun.write_text(f"#!{base}/bin/python\nfrom torch.distributed.run import main\nmain()\n")
    torchrun.chmod(0o755)
    (layer / "bin" / "plain").write_text("#!/bin/sh\necho plain\n")

    image = image_env(str(layer / "bin" / "python"), tmp_path / "shadow")

    assert image is not None
    assert image.lowers == (str(tmp_path / "shadow"), str(layer), str(base))  # the top folder first
    assert image.base == str(home.parent) and image.python == "/opt/conda/bin/python"
    shadow = tmp_path / "shadow"
    config = (shadow / "pyvenv.cfg").read_text()
    assert "home = /opt/conda/.base/bin\n" in config
    assert "executable = /opt/conda/.base/bin/python3.11\n" in config
    assert str(tmp_path) not in config and "command" not in config
    assert (shadow / "lib" / "python3.11" / "site-packages" / "_base.pth").read_text() == ""
    assert not (shadow / "lib" / "python3.11" / "site-packages" / "_editable.pth").exists()
    shadowed = shadow / "bin" / "torchrun"
    assert shadowed.read_text().startswith("#!/opt/conda/bin/python\n")
    assert os.access(shadowed, os.X_OK)
    assert sorted(p.name for p in (shadow / "bin").iterdir()) == ["torchrun"]


def test_an_interpreter_that_is_not_a_venv_is_not_mounted(tmp_path: Path) -> None:
    python = tmp_path / "usr" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert image_env(str(python), tmp_path / "shadow") is None
    # a folder that cannot be an overlay's lower folder (its option list is split on ':' and ',')
    env = _venv(tmp_path, "a:b", tmp_path / "pythons" / "bin")
    assert image_env(str(env / "bin" / "python"), tmp_path / "shadow") is None
