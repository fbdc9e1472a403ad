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
    python, _reevaluation = _blocks("python")
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
    operator = (REPO / "airflow_dist_training" / "operators" / "generations.py").read_text()  # its spot loop
    train = (REPO / "examples" / "train.py").read_text()
    checkpoints = (
        REPO / "airflow_dist_training" / "hooks" / "checkpoints.py"
    ).read_text()  # the relaunch step
    assert '"Resuming from this run\'s own checkpoint {uri} ({layout}, step {step})"' in checkpoints
    assert "`Resuming from this run's own checkpoint s3://" in DOC
    assert '"This run\'s earlier job %s ended %s%s (%s); starting generation %d."' in operator
    assert (
        "`This run's earlier job <name> ended Failed (InternalServerError: …) (failed); starting generation 2`"
        in DOC
    )
    assert "f\"resumed from this run's checkpoint {resume.name} (epoch={state['epoch']}), \"" in train
    assert "`resumed from this run's checkpoint step-… (epoch=K), starting at\n   epoch=K+1`" in DOC


def test_quoted_mid_epoch_resume_is_what_the_demo_script_prints():
    """A checkpoint saved at a stop's SIGTERM is mid-epoch; the page quotes the line of its resume."""
    train = (REPO / "examples" / "train.py").read_text()
    assert 'f"resumed from this run\'s checkpoint {resume.name} (epoch={epoch}, batch {done} of "' in train
    assert 'f"{steps_per_epoch}), continuing epoch={epoch} at batch {done + 1}"' in train
    quoted = "resumed from this run's checkpoint step-000000000070 (epoch=1, batch 7 of 63), continuing epoch=1 at batch 8"
    assert quoted in DOC


def test_the_re_evaluation_example_runs_and_its_quoted_reasons_are_the_ones_produced():
    """The page's decision example runs as is; the two reasons it quotes are decide_skip's own."""
    from airflow_dist_training.retraining.fingerprint import Lineage, decide_skip

    _, example = _blocks("python")
    exec(compile(example, "docs/retraining.md", "exec"), {})
    champion = {
        "data_fingerprint": "sha256:d",
        "code_hash": "sha256:c",
        "spec_hash": "sha256:s",
        "evaluation_fingerprint": "sha256:e1",
    }
    run = Lineage("sha256:d", "sha256:c", "sha256:s", {}, evaluation_fingerprint="sha256:e2")
    model = "s3://my-bucket/models/job-1/output/model.tar.gz"
    kept = decide_skip(run, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=True)
    gone = decide_skip(run, "adt-demo/1", champion, champion_model_uri=model, champion_model_present=False)
    assert f"* `{kept.reason}`" in DOC
    assert f"* `{gone.reason.replace('(data fingerprint d)', '(data fingerprint ...)')}`" in DOC
    assert "reevaluate" in DOC and "record_evaluation" in DOC
