"""The instance catalog never blocks new hardware; prices are per region; users can add their own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.catalog import instance_catalog, lookup_instance
from airflow_dist_training.sagemaker.request import plan_training_job
from tests.paths import REPO
from tests.unit.sagemaker.specs import JOB, REGION, example


def _plan(**overrides):
    return plan_training_job(example("torch_distributed_p4d", **overrides), job_name=JOB, region=REGION)


def test_catalog_lists_every_training_instance_type_of_the_service_model():
    import gzip

    import botocore

    model = next((Path(botocore.__file__).parent / "data" / "sagemaker").glob("*/service-2.json*"))
    opener = gzip.open if model.suffix == ".gz" else open
    with opener(model, "rt") as fh:
        enum = json.load(fh)["shapes"]["TrainingInstanceType"]["enum"]
    assert set(enum) <= set(instance_catalog()), "run scripts/refresh_instance_catalog.py"


def test_refresh_script_reproduces_the_shipped_file():
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "refresh_instance_catalog.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("instance_type", "devices", "efa"),
    [("ml.g5.8xlarge", 1, True), ("ml.g6.4xlarge", 1, False), ("ml.p5.48xlarge", 8, True), ("ml.trn2.48xlarge", 64, True)],
)
def test_types_of_the_issue_are_in_the_catalog(instance_type, devices, efa):
    info = lookup_instance(instance_type)
    assert info is not None and info.devices == devices and info.efa == efa


def test_catalog_type_without_a_price_plans_with_an_unknown_cost_bound():
    plan = _plan(compute__instance_type="ml.g6.4xlarge", compute__instance_count=1)
    assert plan.cost_bound_usd is None
    assert plan.cost_note == "ml.g6.4xlarge: no price for us-east-1 in the price table"


def test_unknown_type_is_a_warning_with_an_assumed_device_count():
    plan = _plan(compute__instance_type="ml.p9.48xlarge")
    assert [str(w) for w in plan.warnings if "catalog" in str(w)] == [
        "compute.instance_type: ml.p9.48xlarge is not in the catalog: cost bound unknown, device count assumed "
        "from the family (1 per instance) (did you mean ml.p5.48xlarge, ml.p5e.48xlarge, ml.p5.4xlarge?); "
        "add it to $ADT_INSTANCE_CATALOG to be exact"
    ]
    assert plan.cost_bound_usd is None
    assert plan.request["ResourceConfig"]["InstanceType"] == "ml.p9.48xlarge"


def test_unknown_size_of_a_known_family_assumes_the_familys_devices():
    plan = _plan(compute__instance_type="ml.p5.96xlarge")
    assert plan.cluster.devices_per_instance == {"ml.p5.96xlarge": 8}


def test_malformed_name_is_still_an_error():
    with pytest.raises(SpecValidationError) as info:
        _plan(compute__instance_type="p4d.24xlarge")
    assert "compute.instance_type: 'p4d.24xlarge' is not a SageMaker instance type name" in str(info.value)


def test_user_catalog_adds_types_and_regional_prices(tmp_path, monkeypatch):
    user = tmp_path / "catalog.json"
    user.write_text(
        json.dumps(
            {
                "instances": {"ml.p9.48xlarge": {"accelerator": "gpu", "devices": 16, "efa": True}},
                "prices": {"eu-west-1": {"ml.p9.48xlarge": 100.0}, "us-east-1": {"ml.p9.48xlarge": 90.0}},
            }
        )
    )
    monkeypatch.setenv("ADT_INSTANCE_CATALOG", str(user))
    spec = example(
        "torch_distributed_p4d",
        compute__instance_type="ml.p9.48xlarge",
        image__uri="img:1",
        spot={"enabled": False},
    )
    plan = plan_training_job(spec, job_name=JOB, region="eu-west-1")
    assert plan.cluster.devices_per_instance == {"ml.p9.48xlarge": 16}
    assert plan.cost_bound_usd == 2 * 100.0 * 24
    assert plan.cost_note == "on-demand list prices (eu-west-1) x max runtime 24 h"
    assert not [w for w in plan.warnings if "catalog" in str(w)]


def test_region_without_prices_uses_us_east_1_with_a_note():
    plan = plan_training_job(example("torch_distributed_p4d"), job_name=JOB, region="eu-west-1")
    assert plan.cost_bound_usd is not None
    assert plan.cost_note.endswith("no prices for eu-west-1 in the table, so us-east-1's (they may differ)")


def test_broken_user_catalog_names_the_file(tmp_path, monkeypatch):
    user = tmp_path / "catalog.json"
    user.write_text("{not json")
    monkeypatch.setenv("ADT_INSTANCE_CATALOG", str(user))
    with pytest.raises(SpecValidationError) as info:
        _plan(compute__instance_type="ml.p9.48xlarge")
    assert str(info.value).startswith(f"{user}: cannot read the instance catalog override ($ADT_INSTANCE_CATALOG)")


def test_price_list_offer_file_is_parsed_for_training_rows(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from refresh_instance_catalog import prices_from_offer_file
    finally:
        sys.path.pop(0)
    offer = {
        "products": {
            "A": {"attributes": {"usagetype": "USE1-Train:ml.g5.8xlarge"}},
            "B": {"attributes": {"usagetype": "USE1-Host:ml.g5.8xlarge"}},
        },
        "terms": {
            "OnDemand": {
                "A": {"A.T": {"priceDimensions": {"A.T.D": {"pricePerUnit": {"USD": "3.0600000000"}}}}},
                "B": {"B.T": {"priceDimensions": {"B.T.D": {"pricePerUnit": {"USD": "2.0"}}}}},
            }
        },
    }
    path = tmp_path / "index.json"
    path.write_text(json.dumps(offer))
    assert prices_from_offer_file(path) == {"ml.g5.8xlarge": 3.06}


def test_spot_cost_bound_counts_every_job_its_interruption_budget_allows():
    on_demand = plan_training_job(
        example("torch_distributed_p4d", spot={"enabled": False}), job_name=JOB, region="us-east-1"
    )
    assert on_demand.cost_bound_usd is not None
    assert on_demand.cost_note == "on-demand list prices (us-east-1) x max runtime 24 h"
    spot = {"enabled": True, "max_wait_seconds": 172800, "max_interruptions": 3}
    plan = plan_training_job(example("torch_distributed_p4d", spot=spot), job_name=JOB, region="us-east-1")
    # billed at most on-demand per job, and 3 interruptions start 3 more jobs of up to the max runtime
    assert plan.cost_bound_usd == round(4 * on_demand.cost_bound_usd, 2)
    assert plan.cost_note == (
        f"on-demand list prices (us-east-1) x max runtime 24 h x 4 jobs (${on_demand.cost_bound_usd:,.2f} each): "
        "spot bills at most on-demand prices, and each interruption starts another job (spot.max_interruptions=3)"
    )
    unbounded = {"enabled": True, "max_wait_seconds": 172800}
    plan = plan_training_job(
        example("torch_distributed_p4d", spot=unbounded), job_name=JOB, region="us-east-1"
    )
    assert plan.cost_bound_usd == round(50 * on_demand.cost_bound_usd, 2)
    assert plan.cost_note.endswith("(up to the run's limit of 50 (set spot.max_interruptions))")


def test_training_plan_jobs_add_nothing_to_the_cost_bound():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p4d-week"
    plan = plan_training_job(
        example("torch_distributed_p4d", compute__training_plan_arn=arn), job_name=JOB, region="us-east-1"
    )
    assert plan.cost_bound_usd == 0.0
    assert (
        plan.cost_note
        == "runs on training plan p4d-week: its reserved capacity was paid for up front, not per job"
    )
    from airflow_dist_training.sagemaker.summary import render_plan

    assert "Cost bound       <= $0.00 (runs on training plan p4d-week" in render_plan(plan)
