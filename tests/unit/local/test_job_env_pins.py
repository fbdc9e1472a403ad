"""The torchvision job environment's pins (scripts/setup-job-env.sh, constraints-job-torchvision.txt)."""

from __future__ import annotations

from tests.paths import REPO


def test_the_job_environment_pins_a_torch_torchvision_pair_that_belongs_together() -> None:
    pins = dict(
        line.split("==", 1)
        for line in (REPO / "constraints-job-torchvision.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    torch_minor = int(pins["torch"].split(".")[1])
    # torchvision 0.(N+15) is built for torch 2.N (0.29 <-> 2.14); any other pair fails to load its ops
    assert pins["torchvision"].split(".")[:2] == ["0", str(torch_minor + 15)], pins
    assert "sagemaker_training" in pins and "sagemaker_pytorch_training" in pins
    assert "constraints-job-torchvision.txt" in (REPO / "scripts" / "setup-job-env.sh").read_text()
