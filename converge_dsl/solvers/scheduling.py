"""Greedy job scheduling on parallel machines (`optimization.greedy_scheduling`).

The rule: jobs are taken one at a time in priority order and each is placed
on the eligible machine where it would *finish* earliest (ties: lower machine
id), starting when both the machine is free and the job is released. Jobs are
never pre-empted and never fill earlier idle gaps. The priority is chosen by
`rule`:

- `edd` (default): earliest deadline first (no deadline = last), then release;
- `spt`: shortest processing time first;
- `wspt`: highest weight / duration first (Smith's rule);

with ties broken by job id. A job that would finish after its deadline is
left out and reported (`on_late: reject`, the default) or scheduled late and
listed in `late_jobs` (`on_late: allow`).

Confidence: 1.0 where the rule is a known optimum - one machine, every job
released at 0, no job rejected - for its objective (edd: maximum lateness,
spt: total completion time, wspt: total weighted completion time); 0.7
otherwise (list scheduling is a heuristic on parallel machines).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    ID_LIST,
    NON_NEGATIVE,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    index_by_id,
    lookup,
    no_overlap,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._protocol import PlanCheck, SolverPlan

SCHEMA = schema_document(
    "greedy_scheduling",
    "Jobs with durations, release times, deadlines and weights, to be run on machines.",
    {
        "required": ["machines", "jobs"],
        "additionalProperties": False,
        "properties": {
            "machines": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "object", "required": ["id"], "properties": {"id": ID}},
            },
            "jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "duration"],
                    "properties": {
                        "id": ID,
                        "duration": NON_NEGATIVE,
                        "release": {**NON_NEGATIVE, "default": 0},
                        "deadline": NON_NEGATIVE,
                        "weight": {"type": "number", "exclusiveMinimum": 0, "default": 1},
                        "machines": {
                            **ID_LIST,
                            "minItems": 1,
                            "description": "Eligible machines (default: all).",
                        },
                    },
                },
            },
            "rule": {"enum": ["edd", "spt", "wspt"], "default": "edd"},
            "on_late": {"enum": ["reject", "allow"], "default": "reject"},
        },
    },
)


def _priority(rule: str, job: JsonObject) -> tuple[Any, ...]:
    if rule == "spt":
        return (job["duration"], job["id"])
    if rule == "wspt":
        ratio = job.get("weight", 1) / job["duration"] if job["duration"] > 0 else math.inf
        return (-ratio, job["id"])
    return (job.get("deadline", math.inf), job.get("release", 0), job["id"])


Parsed = tuple[list[str], dict[str, JsonObject], dict[str, list[str]]]


def _parse(problem: JsonObject) -> Parsed:
    """Machine ids (sorted), jobs by id, eligible machines per job."""
    machines = sorted(index_by_id(problem["machines"], ("machines",)))
    jobs = index_by_id(problem["jobs"], ("jobs",))
    eligible: dict[str, list[str]] = {}
    for position, job in enumerate(problem["jobs"]):
        names = job.get("machines", machines)
        eligible[job["id"]] = sorted(
            lookup(m, machines, ("jobs", position, "machines", k), "machine")
            for k, m in enumerate(names)
        )
    return machines, jobs, eligible


class GreedySchedulingSolver(BaseSolver):
    """Priority-rule list scheduling; see the module docstring for the rule."""

    NAME = "optimization.greedy_scheduling"
    COMPLEXITY = "O(n log n + n * m), n = jobs, m = machines, practical for n <= 100000"
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        return self._scheduled(problem, _parse(problem))

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        return self._verdicts(problem, _parse(problem), plan)

    def solve_checked(self, problem: JsonObject) -> tuple[SolverPlan, tuple[PlanCheck, ...]]:
        """`BaseSolver.solve_checked`, the problem parsed once for both."""
        parsed = _parse(problem)
        answer = self._scheduled(problem, parsed)
        return answer, self._well_formed(lambda: self._verdicts(problem, parsed, answer.plan))

    def _scheduled(self, problem: JsonObject, parsed: Parsed) -> SolverPlan:
        machines, jobs, eligible = parsed
        rule = problem.get("rule", "edd")
        allow_late = problem.get("on_late", "reject") == "allow"
        free: dict[str, float] = dict.fromkeys(machines, 0)
        schedule: list[JsonObject] = []
        unscheduled: list[JsonObject] = []
        late: list[str] = []
        for job in sorted(jobs.values(), key=lambda j: _priority(rule, j)):
            release = job.get("release", 0)
            machine = min(eligible[job["id"]], key=lambda m: (max(free[m], release), m))
            start = max(free[machine], release)
            end = start + job["duration"]
            deadline = job.get("deadline", math.inf)
            if end > deadline + EPSILON:
                if not allow_late:
                    unscheduled.append(
                        {
                            "job": job["id"],
                            "reason": f"would finish at {number_text(end)}, "
                            f"after its deadline {number_text(deadline)}",
                        }
                    )
                    continue
                late.append(job["id"])
            free[machine] = end
            schedule.append({"job": job["id"], "machine": machine, "start": start, "end": end})
        schedule.sort(key=lambda s: (s["start"], s["machine"], s["job"]))
        plan: JsonObject = {
            "rule": rule,
            "schedule": schedule,
            "unscheduled": sorted(unscheduled, key=lambda u: u["job"]),
            "late_jobs": sorted(late),
            "makespan": max((s["end"] for s in schedule), default=0),
            "total_weighted_completion": sum(
                jobs[s["job"]].get("weight", 1) * s["end"] for s in schedule
            ),
        }
        optimal = (
            len(machines) == 1
            and not unscheduled
            and all(j.get("release", 0) == 0 for j in jobs.values())
        )
        summary = (
            f"Scheduled {len(schedule)} of {plural(len(jobs), 'job')} on "
            f"{plural(len(machines), 'machine')} by {rule.upper()}, makespan "
            f"{number_text(plan['makespan'])}"
        )
        if unscheduled:
            summary += f"; rejected (deadline): {', '.join(u['job'] for u in plan['unscheduled'])}"
        if late:
            summary += f"; late: {', '.join(plan['late_jobs'])}"
        return SolverPlan(plan, 1.0 if optimal else 0.7, summary + ".")

    def _verdicts(
        self, problem: JsonObject, parsed: Parsed, plan: Mapping[str, Any]
    ) -> tuple[PlanCheck, ...]:
        _, jobs, eligible = parsed
        entries = [s for s in plan["schedule"] if s["job"] in jobs]
        timing = Findings("release-and-duration-respected")
        placement = Findings("machine-eligible")
        for s in entries:
            job = jobs[s["job"]]
            timing.require(
                s["start"] + EPSILON >= job.get("release", 0), f"{s['job']} starts before release"
            )
            timing.require(
                abs(s["end"] - s["start"] - job["duration"]) <= EPSILON,
                f"{s['job']} runs {s['end'] - s['start']}, duration is {job['duration']}",
            )
            placement.require(
                s["machine"] in eligible[s["job"]], f"{s['job']} on ineligible {s['machine']!r}"
            )
        # With on_late: allow a late job is fine as long as the plan says so.
        deadlines = Findings("deadlines-respected")
        allow_late = problem.get("on_late", "reject") == "allow"
        for s in entries:
            if s["end"] > jobs[s["job"]].get("deadline", math.inf) + EPSILON:
                deadlines.require(
                    allow_late and s["job"] in plan["late_jobs"],
                    f"{s['job']} ends after its deadline"
                    + (" (not in late_jobs)" if allow_late else ""),
                )
        accounted = Findings("every-job-accounted")
        listed = {s["job"] for s in plan["schedule"]} | {u["job"] for u in plan["unscheduled"]}
        accounted.require(
            listed >= set(jobs), f"jobs missing: {', '.join(sorted(set(jobs) - listed))}"
        )
        return (
            at_most_once(
                "job-scheduled-at-most-once", (s["job"] for s in plan["schedule"]), jobs, "job"
            ),
            no_overlap("machine-runs-one-job-at-a-time", entries, "machine", "job"),
            timing.result(),
            placement.result(),
            deadlines.result(),
            accounted.result(),
        )
