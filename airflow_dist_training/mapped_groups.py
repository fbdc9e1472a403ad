"""Airflow glue for a ``stage_train_evaluate`` group mapped over members (``spec/members.py``).

The group is an Airflow mapped task group (``@task_group(...).expand(member=[names])``): map
index *i* runs member *i*, and every task finds its member from its map index, so the plan task
and the training task compute the same identity and job name. Three Airflow behaviours around
mapped task groups are handled here (``docs/mapped.md``, "How it maps onto Airflow"): a pull
without ``map_indexes`` returns every member's value (:func:`pull_own`, :func:`xcom_field`); a
short circuit does not skip its member's downstream tasks (apache/airflow#65745); on Airflow 3.1
a branch outside the group does not skip it (apache/airflow#62118). For the last two the tasks
skip themselves (:func:`skip_when_short_circuited`).

Everything here runs at DAG-parse time or inside a task; nothing is imported from Airflow at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
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


def xcom_field(task_id: str, field: str | None = None, key: str | None = None, optional: bool = False) -> str:
    """A Jinja template of ``task_id``'s XCom (one ``field`` of it) for the rendering task's own member.

    ``optional``: an absent XCom renders empty instead of failing the render. Templates render
    before ``pre_execute``, so a task that skips itself there (``skip_when_short_circuited``) must
    render when its branch was not taken."""
    keyed = f", key='{key}'" if key else ""
    pulled = f"ti.xcom_pull(task_ids='{task_id}'{keyed}, map_indexes=ti.map_index)"
    if optional:
        pulled = f"({pulled} or {{}})"
        return f"{{{{ {pulled}.get('{field}') or '' }}}}" if field else f"{{{{ {pulled} or '' }}}}"
    return f"{{{{ {pulled}['{field}'] }}}}" if field else f"{{{{ {pulled} }}}}"


def per_member(values: Sequence[str]) -> str:
    """A Jinja template that renders to ``values[map index]`` (one value per member)."""
    return "{{ " + repr(list(values)) + "[ti.map_index] }}"


def skip_when_short_circuited(member_task_ids: Collection[str]) -> Callable[[Mapping[str, Any]], None]:
    """A ``pre_execute`` for a task of a mapped task group whose ``member_task_ids`` are given: it
    skips itself when an upstream short circuit or branch decided so, a task of the group for its
    own member, any other (not mapped) at map index -1 (see the module docstring)."""

    def pre_execute(context: Mapping[str, Any]) -> None:
        ti = context["ti"]
        for upstream in context["task"].upstream_list:
            if not getattr(upstream, "inherits_from_skipmixin", False):
                continue
            own = upstream.task_id in member_task_ids
            decision = ti.xcom_pull(
                task_ids=upstream.task_id, key=_SKIPMIXIN_KEY, map_indexes=ti.map_index if own else -1
            )
            if not isinstance(decision, Mapping):
                continue
            if ti.task_id in (decision.get("skipped") or ()) or (
                "followed" in decision and ti.task_id not in (decision["followed"] or ())
            ):
                from airflow_dist_training.compat import AirflowSkipException

                raise AirflowSkipException(f"{upstream.task_id} short-circuited this member")

    return pre_execute


def skip_short_circuited_members(group: Any) -> None:
    """Give the tasks of ``group`` that may follow a short circuit or branch (teardowns aside) the
    ``pre_execute`` of :func:`skip_when_short_circuited`: those directly downstream of one of the
    group's, and the group's first tasks (what is upstream of the group is set after it is built)."""
    hook = skip_when_short_circuited(frozenset(group.children))
    first = {task.task_id for task in group.get_roots()}
    for task in group.children.values():
        if getattr(task, "is_teardown", False):
            continue
        if task.task_id in first or any(
            getattr(u, "inherits_from_skipmixin", False) for u in task.upstream_list
        ):
            task.pre_execute = hook


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
