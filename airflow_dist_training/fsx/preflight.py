"""Pre-flight of an FSx for Lustre channel: rules over facts the FSx hook fetches.

Each problem names the field and the resources involved. No boto3, no Airflow: the rules are pure,
and ``run_fsx_preflight``/``preflight_training_spec`` read the facts through the hook they are given.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from airflow_dist_training.errors import Problem, SpecValidationError

if TYPE_CHECKING:
    from airflow_dist_training.spec.training import TrainingJobSpec

# Lustre clients talk to the file servers on TCP 988 and 1018-1023.
LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class PreflightFacts:
    """Everything the rules need, as returned by AWS (EC2/FSx dicts) or measured."""

    file_system_id: str
    file_system: dict[str, Any] | None
    file_system_subnets: list[dict[str, Any]] = field(default_factory=list)
    training_subnet_ids: list[str] = field(default_factory=list)
    training_subnets: list[dict[str, Any]] = field(default_factory=list)
    training_security_group_ids: list[str] = field(default_factory=list)
    file_system_security_groups: list[dict[str, Any]] = field(default_factory=list)
    s3_uri: str | None = None
    dataset_objects: int | None = None
    dataset_bytes: int | None = None


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def check_file_system(facts: PreflightFacts) -> list[Problem]:
    fs, fs_id = facts.file_system, facts.file_system_id
    if fs is None:
        return [
            Problem(
                "file_system_id",
                f"file system {fs_id} does not exist (or is not visible to this connection's account and region)",
            )
        ]
    fs_type, lifecycle = fs.get("FileSystemType"), fs.get("Lifecycle")
    wrong = [
        (fs_type != "LUSTRE", f"is {fs_type}, not LUSTRE; FSx channels need FSx for Lustre"),
        (lifecycle != "AVAILABLE", f"is {lifecycle or 'in an unknown state'}, not AVAILABLE"),
    ]
    return [Problem("file_system_id", f"file system {fs_id} {why}") for bad, why in wrong if bad]


def check_availability_zone(facts: PreflightFacts, az_mismatch: Severity = "error") -> list[Problem]:
    if facts.file_system is None:
        return []
    if not facts.training_subnet_ids:
        return [
            Problem("network.subnets", "an FSx channel needs the training job's VPC subnets; none are given")
        ]
    found = {s["SubnetId"] for s in facts.training_subnets}
    missing = [s for s in facts.training_subnet_ids if s not in found]
    if missing:
        return [Problem("network.subnets", f"training subnet(s) {', '.join(missing)} do not exist")]
    fs_azs = sorted({s["AvailabilityZone"] for s in facts.file_system_subnets})
    if not fs_azs:
        return []
    fs_subnets = ", ".join(s["SubnetId"] for s in facts.file_system_subnets)
    wrong = [s for s in facts.training_subnets if s["AvailabilityZone"] not in fs_azs]
    if not wrong:
        return []
    detail = ", ".join(f"{s['SubnetId']} ({s['AvailabilityZone']})" for s in wrong)
    return [
        Problem(
            "network.subnets",
            f"training subnet(s) {detail} are not in the Availability Zone of file system "
            f"{facts.file_system_id}, {' / '.join(fs_azs)} (subnet {fs_subnets}); use a subnet in "
            f"{' / '.join(fs_azs)} to avoid cross-AZ traffic",
            severity=az_mismatch,
        )
    ]


def _rule_sources_match(
    permission: dict[str, Any], training_sgs: set[str], training_cidrs: list[ipaddress.IPv4Network]
) -> bool:
    if any(pair.get("GroupId") in training_sgs for pair in permission.get("UserIdGroupPairs") or []):
        return True
    for rng in permission.get("IpRanges") or []:
        try:
            net = ipaddress.ip_network(rng.get("CidrIp", ""), strict=False)
        except ValueError:
            continue
        if training_cidrs and all(c.subnet_of(net) for c in training_cidrs if c.version == net.version):  # type: ignore[arg-type]
            return True
    return False


def missing_lustre_ports(
    security_groups: list[dict[str, Any]], training_sg_ids: list[str], training_cidrs: list[str]
) -> list[tuple[int, int]]:
    """The Lustre port ranges that no inbound rule opens to the training side (empty = all open)."""
    sgs = set(training_sg_ids)
    cidrs = [ipaddress.ip_network(c, strict=False) for c in training_cidrs if c]
    open_ports: set[int] = set()
    for group in security_groups:
        for perm in group.get("IpPermissions") or []:
            proto = str(perm.get("IpProtocol", ""))
            if proto not in ("tcp", "6", "-1") or not _rule_sources_match(perm, sgs, cidrs):  # type: ignore[arg-type]
                continue
            if proto == "-1" or perm.get("FromPort") in (None, -1):
                lo, hi = 0, 65535
            else:
                lo, hi = int(perm["FromPort"]), int(perm["ToPort"])
            open_ports.update(range(max(lo, 988), min(hi, 1023) + 1))
    return [(lo, hi) for lo, hi in LUSTRE_PORTS if not set(range(lo, hi + 1)) <= open_ports]


def _ports(ranges: list[tuple[int, int]]) -> str:
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def check_security_groups(facts: PreflightFacts) -> list[Problem]:
    if facts.file_system is None:
        return []
    if not facts.training_security_group_ids:
        return [
            Problem(
                "network.security_group_ids",
                "an FSx channel needs the training job's VPC security groups; none are given",
            )
        ]
    if not facts.file_system_security_groups:
        return [
            Problem(
                "network.security_group_ids",
                f"could not read the security groups of file system {facts.file_system_id}; "
                "the Lustre ports (TCP 988, 1018-1023) were not checked",
                severity="warning",
            )
        ]
    cidrs = [s.get("CidrBlock", "") for s in facts.training_subnets]
    missing = missing_lustre_ports(
        facts.file_system_security_groups, facts.training_security_group_ids, cidrs
    )
    if not missing:
        return []
    fsx_sgs = ", ".join(g.get("GroupId", "?") for g in facts.file_system_security_groups)
    return [
        Problem(
            "network.security_group_ids",
            f"security group(s) {fsx_sgs} of file system {facts.file_system_id} do not allow Lustre "
            f"traffic on TCP {_ports(missing)} from the training security group(s) "
            f"{', '.join(facts.training_security_group_ids)}; add inbound TCP 988 and 1018-1023 rules "
            "whose source is a training security group (or the training subnets' CIDR)",
        )
    ]


def check_dataset(facts: PreflightFacts) -> list[Problem]:
    if facts.s3_uri is None or facts.dataset_bytes is None:
        return []
    if not facts.dataset_objects:
        return [Problem("s3_uri", f"{facts.s3_uri} is empty (no objects); nothing to stage")]
    if facts.file_system is None:
        return []
    capacity_gib = int(facts.file_system.get("StorageCapacity") or 0)
    if facts.dataset_bytes > capacity_gib * 1024**3:
        return [
            Problem(
                "s3_uri",
                f"{facts.s3_uri} holds {human_bytes(facts.dataset_bytes)} in {facts.dataset_objects} objects, "
                f"more than the {capacity_gib} GiB storage capacity of file system {facts.file_system_id}",
            )
        ]
    return []


def evaluate(facts: PreflightFacts, az_mismatch: Severity = "error") -> list[Problem]:
    """Every problem, errors and warnings, in a stable order."""
    return [
        *check_file_system(facts),
        *check_availability_zone(facts, az_mismatch),
        *check_security_groups(facts),
        *check_dataset(facts),
    ]


def raise_for_problems(problems: list[Problem]) -> list[Problem]:
    """Raise ``SpecValidationError`` with the errors, if any; return the warnings."""
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise SpecValidationError(errors)
    return [p for p in problems if p.severity != "error"]


class FactsSource(Protocol):
    """Where the facts come from: ``FSxHook`` (``hooks/fsx.py``), or a test's fake."""

    def gather_preflight_facts(
        self,
        file_system_id: str,
        *,
        subnet_ids: list[str],
        security_group_ids: list[str],
        s3_uri: str | None = None,
        file_system_security_group_ids: list[str] | None = None,
    ) -> PreflightFacts: ...


def run_fsx_preflight(
    hook: FactsSource,
    file_system_id: str,
    *,
    subnets: Sequence[str],
    security_group_ids: Sequence[str],
    s3_uri: str | None = None,
    az_mismatch: Severity = "error",
    file_system_security_group_ids: Sequence[str] | None = None,
    log: Any = None,
) -> tuple[PreflightFacts, list[Any]]:
    """Read the facts and apply the rules; raises ``SpecValidationError`` on errors, returns warnings."""
    facts = hook.gather_preflight_facts(
        file_system_id,
        subnet_ids=list(subnets),
        security_group_ids=list(security_group_ids),
        s3_uri=s3_uri,
        file_system_security_group_ids=list(file_system_security_group_ids or []) or None,
    )
    warnings = raise_for_problems(evaluate(facts, az_mismatch))
    for warning in warnings:
        if log is not None:
            log.warning("FSx pre-flight warning: %s", warning)
    return facts, warnings


def preflight_training_spec(
    hook: FactsSource, spec: TrainingJobSpec, az_mismatch: Severity = "error"
) -> list[Any]:
    """Pre-flight every FSx channel of a training spec against its network; returns the warnings.

    For the training operator to call before ``CreateTrainingJob``. Channel paths are prefixed
    by the file system's mount name, which is checked too.
    """
    from airflow_dist_training.spec.training import FSxChannel

    warnings: list[Any] = []
    problems: list[Problem] = []
    for name, channel in spec.channels.items():
        if not isinstance(channel, FSxChannel):
            continue
        try:
            facts, found = run_fsx_preflight(
                hook,
                channel.file_system_id,
                subnets=spec.network.subnets,
                security_group_ids=spec.network.security_group_ids,
                az_mismatch=az_mismatch,
            )
        except SpecValidationError as exc:
            problems.extend(Problem(f"channels.{name}.{p.path}", p.message) for p in exc.problems)
            continue
        warnings.extend(found)
        mount = ((facts.file_system or {}).get("LustreConfiguration") or {}).get("MountName")
        if mount and not (channel.directory_path + "/").startswith(f"/{mount}/"):
            why = f"{channel.directory_path} must start with /{mount}, the mount name of {channel.file_system_id}"
            problems.append(Problem(f"channels.{name}.directory_path", why))
    if problems:
        raise SpecValidationError(problems)
    return warnings
