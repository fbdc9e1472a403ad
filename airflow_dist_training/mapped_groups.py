"""Airflow glue for a ``stage_train_evaluate`` group mapped over members (``spec/members.py``).

The group is an Airflow mapped task group (``@task_group(...).expand(member=[names])``): map
index *i* runs member *i* of the list, every task of the group once per member, and a member that
fails fails only its own task instances. What each task needs of its member comes from its map
index (``ti.map_index``), the same in every task of that member, so the plan task and the training
task compute the same identity and job name.

Two Airflow behaviours inside mapped task groups are handled here (Airflow 3.3):

* ``ti.xcom_pull(task_ids=...)`` without ``map_indexes`` returns *every* member's value; a task
  pulls its own member's with ``map_indexes=ti.map_index`` (:func:`pull_own`, :func:`xcom_field`).
  ``XComArg`` already resolves to the same map index.
* A short circuit does not skip its downstream tasks of the same map index (the skip is left to
  ``NotPreviouslySkippedDep``, which reads the upstream's decision at map index -1 for a task that
  is not itself mapped; apache/airflow#65745, and the "Known Issue" of apache/airflow#46584).
  :func:`skip_when_short_circuited` makes the direct downstream task skip itself instead, from its
  own member's decision; the rest of the member's tasks follow by their trigger rules.

Everything here runs at DAG-parse time or inside a task; nothing is imported from Airflow at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

# the XCom key of a short circuit's decision (airflow.providers.standard.utils.skipmixin)
_SKIPMIXIN_KEY = "skipmixin_key"


def map_index_of(context: Mapping[str, Any]) -> int:
    """The map index of the task instance running (-1 when it is not mapped)."""
    found = getattr(context.get("ti"), "map_index", None)
    return -1 if found is None else int(found)


def pull_own(ti: Any, task_id: str, key: str = "return_value") -> Any:
    """``task_id``'s XCom of the calling task's own member (the plain pull when it is not mapped)."""
    found = getattr(ti, "map_index", None)
    if found is None or int(found) < 0:
        return ti.xcom_pull(task_ids=task_id, key=key)
    return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=int(found))


def pull_all(ti: Any, task_id: str, count: int, key: str = "return_value") -> list[Any]:
    """``task_id``'s XCom of every member, in map-index order (None where a member has none)."""
    return list(ti.xcom_pull(task_ids=task_id, key=key, map_indexes=list(range(count))))


def xcom_field(task_id: str, field: str | None = None, key: str | None = None) -> str:
    """A Jinja template of ``task_id``'s XCom (one ``field`` of it) for the rendering task's own member."""
    keyed = f", key='{key}'" if key else ""
    pulled = f"ti.xcom_pull(task_ids='{task_id}'{keyed}, map_indexes=ti.map_index)"
    return f"{{{{ {pulled}['{field}'] }}}}" if field else f"{{{{ {pulled} }}}}"


def per_member(values: Sequence[str]) -> str:
    """A Jinja template that renders to ``values[map index]`` (one value per member)."""
    return "{{ " + repr(list(values)) + "[ti.map_index] }}"


def skip_when_short_circuited(short_circuit_task_ids: Sequence[str]) -> Callable[[Mapping[str, Any]], None]:
    """A ``pre_execute`` for a task directly downstream of short circuits in a mapped task group:
    it skips itself when its own member's short circuit decided so (see the module docstring)."""

    def pre_execute(context: Mapping[str, Any]) -> None:
        ti = context["ti"]
        for task_id in short_circuit_task_ids:
            decision = pull_own(ti, task_id, _SKIPMIXIN_KEY)
            if isinstance(decision, Mapping) and ti.task_id in (decision.get("skipped") or ()):
                from airflow_dist_training.compat import AirflowSkipException

                raise AirflowSkipException(f"{task_id} short-circuited this member")

    return pre_execute


def skip_short_circuited_members(group: Any) -> None:
    """Give each task directly downstream of short circuits of ``group`` (teardowns aside) the
    ``pre_execute`` of :func:`skip_when_short_circuited`."""
    upstream: dict[str, list[str]] = {}
    for task in group.children.values():
        if getattr(task, "inherits_from_skipmixin", False):
            for downstream in task.downstream_list:
                if not getattr(downstream, "is_teardown", False):
                    upstream.setdefault(downstream.task_id, []).append(task.task_id)
    for task_id, short_circuits in upstream.items():
        group.children[task_id].pre_execute = skip_when_short_circuited(short_circuits)


def member_task_group(group_id: str, default_args: Mapping[str, Any], names: Sequence[str]) -> Any:
    """An Airflow mapped task group over ``names``, one map index per member: the group
    ``@task_group(group_id=...).expand(member=names)`` builds (Airflow's own classes), usable as a
    ``with`` block like a ``TaskGroup``, so the group's tasks are built the same way either way."""
    from airflow.sdk.definitions._internal.expandinput import DictOfListsExpandInput
    from airflow.sdk.definitions.taskgroup import MappedTaskGroup

    defaults: Any = dict(default_args)
    return MappedTaskGroup(
        group_id=group_id,
        default_args=defaults,
        tooltip=f"One per member: {', '.join(names)}",
        expand_input=DictOfListsExpandInput({"member": list(names)}),
    )
