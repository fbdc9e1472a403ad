"""docs/retraining.md: its examples parse and validate, and its quoted messages are the real ones."""

from __future__ import annotations

import ast
import re

import yaml

from tests.paths import REPO

DOC = (REPO / "docs" / "retraining.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, flags=re.S)


def test_python_example_parses_and_is_what_the_demo_script_does():
    [python] = _blocks("python")
    ast.parse(python)
    train = (REPO / "examples" / "train.py").read_text()
    assert "resume = latest_complete_checkpoint(args.checkpoint_dir)" in train
    assert "warm_start_weights(args.warm_start, device)" in train
    assert 'os.environ.get("SM_CHANNEL_WARM_START", "")' in train


def test_yaml_example_validates_as_part_of_a_pipeline():
    from airflow_dist_training.spec.loading import validate_model
    from airflow_dist_training.spec.pipeline import PipelineSpec, resolve_training_reference

    [fragment] = _blocks("yaml")
    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "demo_mlp_local.yaml").read_text())
    pipeline.update(yaml.safe_load(fragment))
    pipeline = resolve_training_reference(pipeline, REPO / "dags" / "pipelines")
    spec = validate_model(PipelineSpec, pipeline, source="docs/retraining.md")
    assert spec.warm_start == "champion" and spec.force is False
    assert spec.checkpoints.promote_to == "s3://my-bucket/checkpoints/promoted/"


def test_quoted_gate_and_skip_messages_are_the_ones_produced():
    from airflow_dist_training.evaluation.gate import Champion, learning_checks
    from airflow_dist_training.evaluation.schema import parse_evaluation

    champion = Champion(id="adt-demo/1", evaluation=parse_evaluation({"metrics": {"a": 1.0}}, "e.json"))
    zero = learning_checks({"final_metrics": {"train:epochs_trained": 0}}, None, None)
    same = learning_checks(None, True, champion)
    assert f"* `{zero[0]['reason']}`" in DOC
    assert f"* `{same[0]['reason']}`" in DOC
    assert "no new data or code since champion adt-demo/1 (data fingerprint ...)" in DOC
    assert "```mermaid" in DOC


def test_quoted_retry_messages_on_sagemaker_are_the_operators_and_the_scripts():
    """The kill-and-retry of run 3 on the endpoint, as the page quotes it (the emulator test asserts
    these lines in a real run's logs)."""
    operator = (REPO / "airflow_dist_training" / "operators" / "training.py").read_text()
    train = (REPO / "examples" / "train.py").read_text()
    checkpoints = (REPO / "airflow_dist_training" / "hooks" / "checkpoints.py").read_text()  # the relaunch step
    assert '"Resuming from this run\'s own checkpoint %s (%s, step %s)"' in checkpoints
    assert "`Resuming from this run's own checkpoint s3://" in DOC
    assert "\"This run's earlier job %s ended %s%s (%s); starting generation %d.\"" in operator
    assert "`This run's earlier job <name> ended Failed (InternalServerError: …) (failed); starting generation 2`" in DOC
    assert "f\"resumed from this run's checkpoint {resume.name} (epoch={state['epoch']}), \"" in train
    assert "`resumed from this run's checkpoint step-… (epoch=K), starting at\n   epoch=K+1`" in DOC
