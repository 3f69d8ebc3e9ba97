"""Work scheduling with precedence and skills (`optimization.work_scheduling`).

Tasks have a duration, the tasks they depend on, and the skills a worker must
have (all of them) to do the task; each worker does one task at a time.

Method: list scheduling by critical path (a serial schedule-generation
scheme). A task's priority is its *tail*: the longest chain of durations from
its start to the end of the project. Repeatedly, among tasks whose
predecessors are all scheduled, the one with the longest tail (ties: lower id)
is placed on the capable worker who can start it earliest (ties: the worker
with fewer skills, keeping versatile workers free, then lower worker id), no
earlier than its last predecessor ends.

The plan reports a lower bound on any schedule's makespan: the larger of the
critical-path length and total work / number of workers. Confidence is 1.0
when the makespan meets that bound (then it is provably optimal), else 0.75.
A dependency cycle, an unknown dependency or a task no worker can do raises
`SolverError`.
"""

from __future__ import annotations

import heapq

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    ID_LIST,
    NON_NEGATIVE,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    fail,
    index_by_id,
    lookup,
    no_overlap,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._protocol import PlanCheck, SolverPlan

_SKILLS = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}

SCHEMA = schema_document(
    "work_scheduling",
    "Tasks with durations, dependencies and required skills, and the workers who can do them.",
    {
        "required": ["tasks", "workers"],
        "additionalProperties": False,
        "properties": {
            "tasks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "duration"],
                    "properties": {
                        "id": ID,
                        "duration": NON_NEGATIVE,
                        "depends_on": {
                            **ID_LIST,
                            "description": "Tasks that must end before this starts.",
                        },
                        "skills": {**_SKILLS, "description": "Skills the worker must all have."},
                    },
                },
            },
            "workers": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {"id": ID, "skills": _SKILLS},
                },
            },
        },
    },
)


class _Project:
    """Validated tasks, workers, capabilities and critical-path tails."""

    def __init__(self, problem: JsonObject) -> None:
        self.tasks = index_by_id(problem["tasks"], ("tasks",))
        workers = index_by_id(problem["workers"], ("workers",))
        self.workers = sorted(workers)
        self.preds: dict[str, list[str]] = {}
        self.capable: dict[str, list[str]] = {}
        self.versatility = {w: len(workers[w].get("skills", [])) for w in self.workers}
        for position, task in enumerate(problem["tasks"]):
            ident = task["id"]
            self.preds[ident] = [
                lookup(dep, self.tasks, ("tasks", position, "depends_on", k), "task")
                for k, dep in enumerate(task.get("depends_on", []))
            ]
            needed = set(task.get("skills", []))
            self.capable[ident] = [
                w for w in self.workers if needed <= set(workers[w].get("skills", []))
            ]
            if not self.capable[ident]:
                raise fail(
                    ("tasks", position, "skills"),
                    f"no worker has all of the skills {sorted(needed)} that task {ident!r} needs",
                )
        self.order = self._topological_order()
        self.succs: dict[str, list[str]] = {t: [] for t in self.tasks}
        for task, deps in self.preds.items():
            for dep in deps:
                self.succs[dep].append(task)
        self.tail: dict[str, float] = {}
        for task in reversed(self.order):
            later = max((self.tail[s] for s in self.succs[task]), default=0)
            self.tail[task] = self.tasks[task]["duration"] + later

    def _topological_order(self) -> list[str]:
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        order: list[str] = []
        for root in sorted(self.tasks):
            if state.get(root):
                continue
            stack = [(root, iter(sorted(self.preds[root])))]
            state[root] = 1
            while stack:
                node, deps = stack[-1]
                dep = next(deps, None)
                if dep is None:
                    stack.pop()
                    state[node] = 2
                    order.append(node)
                elif state.get(dep) == 1:
                    cycle = [n for n, _ in stack]
                    cycle = [*cycle[cycle.index(dep) :], dep]
                    position = list(self.tasks).index(node)
                    raise fail(
                        ("tasks", position, "depends_on"),
                        f"dependency cycle: {' -> '.join(cycle)} (each depends on the next)",
                    )
                elif not state.get(dep):
                    state[dep] = 1
                    stack.append((dep, iter(sorted(self.preds[dep]))))
        return order

    def critical_path(self) -> list[str]:
        starts = [t for t in self.tasks if not self.preds[t]]
        path: list[str] = []
        candidates = starts
        while candidates:
            best = min(candidates, key=lambda t: (-self.tail[t], t))
            path.append(best)
            candidates = self.succs[best]
        return path


class WorkSchedulingSolver(BaseSolver):
    """Critical-path list scheduling; see the module docstring."""

    NAME = "optimization.work_scheduling"
    COMPLEXITY = "O(n log n + e + n * w), n = tasks, e = dependencies, w = workers; n <= 100000"
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        project = _Project(problem)
        free: dict[str, float] = dict.fromkeys(project.workers, 0)
        end: dict[str, float] = {}
        waiting = {t: len(deps) for t, deps in project.preds.items()}
        ready = [(-project.tail[t], t) for t, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        schedule: list[JsonObject] = []
        while ready:
            _, task = heapq.heappop(ready)
            earliest = max((end[p] for p in project.preds[task]), default=0)
            worker = min(
                project.capable[task],
                key=lambda w: (max(free[w], earliest), project.versatility[w], w),
            )
            start = max(free[worker], earliest)
            end[task] = free[worker] = start + project.tasks[task]["duration"]
            schedule.append({"task": task, "worker": worker, "start": start, "end": end[task]})
            for succ in project.succs[task]:
                waiting[succ] -= 1
                if waiting[succ] == 0:
                    heapq.heappush(ready, (-project.tail[succ], succ))
        schedule.sort(key=lambda s: (s["start"], s["worker"], s["task"]))
        makespan = max(end.values(), default=0)
        path = project.critical_path()
        path_length = max(project.tail.values(), default=0)
        work = sum(t["duration"] for t in project.tasks.values())
        bound = max(path_length, work / len(project.workers))
        plan: JsonObject = {
            "schedule": schedule,
            "makespan": makespan,
            "lower_bound": bound,
            "critical_path": path,
            "critical_path_length": path_length,
        }
        optimal = makespan <= bound + EPSILON
        summary = (
            f"Scheduled {plural(len(schedule), 'task')} "
            f"on {plural(len(project.workers), 'worker')}, "
            f"makespan {number_text(makespan)} (lower bound {number_text(bound)}"
            f"{', optimal' if optimal else ''}); critical path {' -> '.join(path) or 'empty'}."
        )
        return SolverPlan(plan, 1.0 if optimal else 0.75, summary)

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        project = _Project(problem)
        entries = [s for s in plan["schedule"] if s["task"] in project.tasks]
        end = {s["task"]: s["end"] for s in entries}
        precedence = Findings("precedence-respected")
        skills = Findings("worker-has-skills")
        timing = Findings("duration-respected")
        for s in entries:
            for dep in project.preds[s["task"]]:
                precedence.require(
                    dep in end and s["start"] + EPSILON >= end[dep],
                    f"{s['task']} starts before {dep} ends",
                )
            skills.require(
                s["worker"] in project.capable[s["task"]], f"{s['worker']!r} cannot do {s['task']}"
            )
            timing.require(
                abs(s["end"] - s["start"] - project.tasks[s["task"]]["duration"]) <= EPSILON
                and s["start"] >= 0,
                f"{s['task']} runs from {s['start']} to {s['end']}",
            )
        complete = Findings("every-task-scheduled")
        complete.require(
            set(end) >= set(project.tasks),
            f"unscheduled: {', '.join(sorted(set(project.tasks) - set(end)))}",
        )
        return (
            at_most_once(
                "task-scheduled-at-most-once",
                (s["task"] for s in plan["schedule"]),
                project.tasks,
                "task",
            ),
            complete.result(),
            precedence.result(),
            skills.result(),
            timing.result(),
            no_overlap("worker-does-one-task-at-a-time", entries, "worker", "task"),
        )
