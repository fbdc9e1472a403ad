"""A human summary of a training plan: cluster size, global batch, cost bound, warnings.

Shared by the CLI's ``plan`` command and the DAGs' dry-run (plan) task.
"""

from __future__ import annotations

from airflow_dist_training.sagemaker.request import TrainingPlan


def render_plan(plan: TrainingPlan) -> str:
    c = plan.cluster
    request = plan.request
    resource = request["ResourceConfig"]
    if "InstanceGroups" in resource:
        instances = ", ".join(
            f"{g['InstanceCount']} x {g['InstanceType']} ({g['InstanceGroupName']})"
            for g in resource["InstanceGroups"]
        )
    else:
        instances = f"{resource['InstanceCount']} x {resource['InstanceType']}"
    devices = ", ".join(f"{t}: {n}" for t, n in c.devices_per_instance.items())
    lines = [
        f"Training job     {plan.job_name}  ({plan.region})",
        f"Image            {request['AlgorithmSpecification']['TrainingImage']}",
        f"Instances        {instances}",
        f"Cluster size     {c.cluster_size} devices = instances x devices per instance ({devices})",
        f"Processes        {c.processes} (model-parallel degree {c.model_parallel_degree}, "
        f"{_count(c.replicas, 'data-parallel replica')})",
    ]
    if c.global_batch_size is not None:
        lines.append(
            f"Global batch     {c.global_batch_size} = {_count(c.replicas, 'replica')} x {c.per_device_batch_size} per replica"
        )
    if plan.cost_bound_usd is not None:
        lines.append(f"Cost bound       <= ${plan.cost_bound_usd:,.2f} ({plan.cost_note})")
    else:
        lines.append(f"Cost bound       unknown ({plan.cost_note})")
    channels = [ch["ChannelName"] for ch in request.get("InputDataConfig", [])]
    lines.append(f"Channels         {', '.join(channels) or '-'}")
    lines.append(f"Output           {request['OutputDataConfig']['S3OutputPath']}")
    if "CheckpointConfig" in request:
        lines.append(f"Checkpoints      {request['CheckpointConfig']['S3Uri']}")
    if request.get("EnableManagedSpotTraining"):
        lines.append(
            f"Spot             max wait {request['StoppingCondition'].get('MaxWaitTimeInSeconds')} s"
        )
    lines.append(f"Stop signal      {plan.stop_signal}")
    lines += [f"Upload           {upload.s3_uri}" for upload in plan.uploads]
    lines += [f"WARNING          {warning}" for warning in plan.warnings]
    lines += [f"Advice           {advice}" for advice in plan.advice]
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
