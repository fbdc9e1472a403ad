"""Regenerate airflow_dist_training/sagemaker/data/instances.json (and merge prices into prices.json).

Where the data comes from:

- **Which types exist**: the ``TrainingInstanceType`` enum of botocore's SageMaker service model
  (``botocore/data/sagemaker/*/service-2.json``), i.e. what ``CreateTrainingJob`` accepts.
- **Hardware** (vCPUs, memory, GPUs / Trainium chips and NeuronCores, EFA): EC2
  ``DescribeInstanceTypes`` for the same type without the ``ml.`` prefix. By default from the
  snapshot of that API that moto ships (``moto/ec2/resources/instance_types.json.gz``, no network);
  ``--from-aws`` asks EC2 itself (needs credentials). Types EC2 no longer lists (p2, p3) and a few
  new ones keep the hand-entered rows of ``MANUAL`` below.
- **Entries already in instances.json are kept** as they are (they are curated: e.g. trn2's 64
  logical NeuronCores); ``--rewrite`` regenerates them too.
- **Prices** (``--prices FILE``): the public AWS Price List offer file for SageMaker in one region
  (``.../offers/v1.0/aws/AmazonSageMaker/current/<region>/index.json``). Only on-demand training
  rows (usage type ``...Train:ml.<type>``) are used; they are merged into prices.json for that region.

Run::

    .venv/bin/python scripts/refresh_instance_catalog.py            # offline: botocore enum + moto's EC2 data
    .venv/bin/python scripts/refresh_instance_catalog.py --check    # exit 1 if the file is out of date
    .venv/bin/python scripts/refresh_instance_catalog.py --prices index.json --region us-east-1
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "airflow_dist_training" / "sagemaker" / "data"
CATALOG = DATA / "instances.json"
PRICES = DATA / "prices.json"
COMMENT = (
    "SageMaker training instance types: the TrainingInstanceType enum of botocore's SageMaker model, "
    "hardware from EC2 DescribeInstanceTypes (devices = default processes per host: GPUs, NeuronCores "
    "on Trainium, 1 on CPU instances). Regenerate with scripts/refresh_instance_catalog.py; add or "
    "correct types without editing this file through $ADT_INSTANCE_CATALOG (same format)."
)
# Types that EC2's DescribeInstanceTypes no longer (or not yet) lists; from the EC2/SageMaker product pages.
MANUAL: dict[str, dict[str, Any]] = {
    "ml.p2.xlarge": {"accelerator": "gpu", "accelerator_model": "K80", "accelerators": 1, "devices": 1, "efa": False, "memory_gib": 61, "vcpus": 4},
    "ml.p2.8xlarge": {"accelerator": "gpu", "accelerator_model": "K80", "accelerators": 8, "devices": 8, "efa": False, "memory_gib": 488, "vcpus": 32},
    "ml.p2.16xlarge": {"accelerator": "gpu", "accelerator_model": "K80", "accelerators": 16, "devices": 16, "efa": False, "memory_gib": 732, "vcpus": 64},
    "ml.p3.2xlarge": {"accelerator": "gpu", "accelerator_model": "V100", "accelerators": 1, "devices": 1, "efa": False, "memory_gib": 61, "vcpus": 8},
    "ml.p3.8xlarge": {"accelerator": "gpu", "accelerator_model": "V100", "accelerators": 4, "devices": 4, "efa": False, "memory_gib": 244, "vcpus": 32},
    "ml.p3.16xlarge": {"accelerator": "gpu", "accelerator_model": "V100", "accelerators": 8, "devices": 8, "efa": False, "memory_gib": 488, "vcpus": 64},
    "ml.p6e-gb200.36xlarge": {"accelerator": "gpu", "accelerator_model": "GB200", "accelerators": 4, "devices": 4, "efa": True, "memory_gib": 960, "vcpus": 144},
}  # fmt: skip
# Corrections on top of EC2's figures: Trainium2 runs 2 physical NeuronCores as one logical core by
# default (LNC=2, AWS Neuron docs), so torchrun starts 64 processes on a trn2.48xlarge, not 128.
CORRECTIONS: dict[str, dict[str, Any]] = {"ml.trn2.48xlarge": {"devices": 64}}
_TRAIN_USAGE = re.compile(r"Train:(ml\.[a-z0-9\-]+\.[a-z0-9]+)$")


def training_instance_types() -> list[str]:
    import botocore

    models = sorted((Path(botocore.__file__).parent / "data" / "sagemaker").glob("*/service-2.json*"))
    path = models[-1]
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        model = json.load(fh)
    return list(model["shapes"]["TrainingInstanceType"]["enum"])


def ec2_types(from_aws: bool, names: list[str]) -> dict[str, dict[str, Any]]:
    if from_aws:
        import boto3

        client = boto3.client("ec2", region_name="us-east-1")
        found: dict[str, dict[str, Any]] = {}
        paginator = client.get_paginator("describe_instance_types")
        wanted = [n.removeprefix("ml.") for n in names]
        for start in range(0, len(wanted), 100):
            try:
                for page in paginator.paginate(InstanceTypes=wanted[start : start + 100]):
                    found.update({t["InstanceType"]: t for t in page["InstanceTypes"]})
            except client.exceptions.ClientError:  # one unknown name fails the batch: ask one by one
                for name in wanted[start : start + 100]:
                    try:
                        found.update({t["InstanceType"]: t for t in client.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]})
                    except client.exceptions.ClientError:
                        continue
        return found
    import moto

    with gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz", "rt") as fh:
        return dict(json.load(fh))


def entry_from_ec2(info: dict[str, Any]) -> dict[str, Any]:
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    neuron = info.get("NeuronInfo", {}).get("NeuronDevices", [])
    entry: dict[str, Any] = {
        "vcpus": int(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": round(info["MemoryInfo"]["SizeInMiB"] / 1024, 2),
        "efa": bool(info.get("NetworkInfo", {}).get("EfaSupported", False)),
    }
    if gpus:
        count = sum(int(g["Count"]) for g in gpus)
        entry.update(accelerator="gpu", accelerator_model=gpus[0]["Name"], accelerators=count, devices=count)
    elif neuron:
        chips = sum(int(n["Count"]) for n in neuron)
        cores = sum(int(n["Count"]) * int(n.get("CoreInfo", {}).get("Count", 1)) for n in neuron)
        entry.update(accelerator="trainium", accelerator_model=neuron[0]["Name"], accelerators=chips, devices=cores)
    else:
        entry.update(accelerator="cpu", accelerator_model=None, accelerators=0, devices=1)
    if entry["memory_gib"] == int(entry["memory_gib"]):
        entry["memory_gib"] = int(entry["memory_gib"])
    return dict(sorted(entry.items()))


def build_catalog(from_aws: bool = False, rewrite: bool = False) -> dict[str, Any]:
    names = training_instance_types()
    current = json.loads(CATALOG.read_text())["instances"] if CATALOG.exists() else {}
    ec2 = ec2_types(from_aws, names)
    instances: dict[str, Any] = {}
    for name in names:
        if name in current and not rewrite:
            instances[name] = current[name]
        elif name.removeprefix("ml.") in ec2:
            instances[name] = {**entry_from_ec2(ec2[name.removeprefix("ml.")]), **CORRECTIONS.get(name, {})}
        elif name in MANUAL:
            instances[name] = MANUAL[name]
    for name, entry in current.items():  # keep curated types the enum does not list (e.g. ml.g4dn.metal)
        instances.setdefault(name, entry)
    return {"_comment": COMMENT, "instances": dict(sorted(instances.items()))}


def prices_from_offer_file(path: Path) -> dict[str, float]:
    """On-demand training prices (USD per hour) from an AWS Price List offer file for SageMaker."""
    offer = json.loads(path.read_text())
    skus = {}
    for sku, product in offer.get("products", {}).items():
        match = _TRAIN_USAGE.search(product.get("attributes", {}).get("usagetype", ""))
        if match:
            skus[sku] = match.group(1)
    prices: dict[str, float] = {}
    for sku, terms in offer.get("terms", {}).get("OnDemand", {}).items():
        if sku not in skus:
            continue
        for term in terms.values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    prices[skus[sku]] = float(usd)
    return dict(sorted(prices.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-aws", action="store_true", help="ask EC2 DescribeInstanceTypes (needs credentials)")
    parser.add_argument("--rewrite", action="store_true", help="regenerate curated entries too")
    parser.add_argument("--check", action="store_true", help="exit 1 if instances.json is out of date")
    parser.add_argument("--prices", type=Path, help="an AWS Price List offer file for AmazonSageMaker")
    parser.add_argument("--region", default="us-east-1", help="the offer file's region")
    args = parser.parse_args(argv)
    catalog = build_catalog(from_aws=args.from_aws, rewrite=args.rewrite)
    text = json.dumps(catalog, indent=1) + "\n"
    if args.check:
        if CATALOG.read_text() != text:
            print(f"{CATALOG} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        print(f"{CATALOG}: up to date ({len(catalog['instances'])} types)")
        return 0
    CATALOG.write_text(text)
    print(f"wrote {len(catalog['instances'])} instance types to {CATALOG}")
    if args.prices:
        table = json.loads(PRICES.read_text())
        found = prices_from_offer_file(args.prices)
        table.setdefault("regions", {}).setdefault(args.region, {}).update(found)
        PRICES.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        print(f"merged {len(found)} {args.region} prices into {PRICES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
