"""Vehicle routing with time windows and capacities (`optimization.routing`).

Stops sit at (x, y) with a demand, a service time and a time window
[earliest, latest] in which service must *start* (arriving early means
waiting). Vehicles leave the single depot, carry at most `capacity`, and must
be back by the depot's `close` time. Travel time = Euclidean distance / speed.

Method: nearest neighbour. Vehicles are routed one after another, in id
order. From its current position a vehicle goes to the nearest unserved stop
(ties: lower id) that still fits - enough capacity left, service can start
within the window, and the vehicle can still return to the depot in time -
until no stop fits; then it returns. Stops no vehicle could take are listed
under `unserved` with the reason. It is a construction heuristic with no
optimality guarantee: confidence 0.6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    NON_NEGATIVE,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    index_by_id,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._protocol import PlanCheck, SolverPlan

_XY = {"x": {"type": "number"}, "y": {"type": "number"}}

SCHEMA = schema_document(
    "routing",
    "A depot, vehicles with a capacity, and stops with a location, demand, "
    "service time and time window.",
    {
        "required": ["depot", "vehicles", "stops"],
        "additionalProperties": False,
        "properties": {
            "depot": {
                "type": "object",
                "required": ["x", "y"],
                "additionalProperties": False,
                "properties": {
                    "id": {**ID, "default": "depot"},
                    **_XY,
                    "open": {**NON_NEGATIVE, "default": 0, "description": "Earliest departure."},
                    "close": {**NON_NEGATIVE, "description": "Latest return (default: none)."},
                },
            },
            "vehicles": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id", "capacity"],
                    "properties": {"id": ID, "capacity": NON_NEGATIVE},
                },
            },
            "stops": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "x", "y"],
                    "properties": {
                        "id": ID,
                        **_XY,
                        "demand": {**NON_NEGATIVE, "default": 0},
                        "service": {
                            **NON_NEGATIVE,
                            "default": 0,
                            "description": "Service duration.",
                        },
                        "earliest": {**NON_NEGATIVE, "default": 0, "description": "Window opens."},
                        "latest": {**NON_NEGATIVE, "description": "Window closes (default: none)."},
                    },
                },
            },
            "speed": {"type": "number", "exclusiveMinimum": 0, "default": 1},
        },
    },
)


@dataclass(frozen=True, slots=True)
class _Stop:
    id: str
    x: float
    y: float
    demand: float
    service: float
    earliest: float
    latest: float


class _Network:
    """Validated depot, vehicles (by id) and stops (by id), with travel times."""

    def __init__(self, problem: JsonObject) -> None:
        depot = problem["depot"]
        self.depot = _Stop(depot.get("id", "depot"), depot["x"], depot["y"], 0, 0, 0, math.inf)
        self.open = depot.get("open", 0)
        self.close = depot.get("close", math.inf)
        self.speed = problem.get("speed", 1)
        vehicles = index_by_id(problem["vehicles"], ("vehicles",))
        self.capacity = {ident: vehicles[ident]["capacity"] for ident in sorted(vehicles)}
        self.stops = {
            s["id"]: _Stop(
                s["id"],
                s["x"],
                s["y"],
                s.get("demand", 0),
                s.get("service", 0),
                s.get("earliest", 0),
                s.get("latest", math.inf),
            )
            for s in sorted(
                index_by_id(problem["stops"], ("stops",)).values(), key=lambda s: s["id"]
            )
        }

    @staticmethod
    def distance(a: _Stop, b: _Stop) -> float:
        return math.hypot(a.x - b.x, a.y - b.y)

    def visit(self, here: _Stop, time: float, stop: _Stop) -> tuple[float, float, float] | None:
        """(arrival, service start, departure) at `stop`, or None if the window or return fails."""
        arrival = time + self.distance(here, stop) / self.speed
        start = max(arrival, stop.earliest)
        departure = start + stop.service
        home = departure + self.distance(stop, self.depot) / self.speed
        if start > stop.latest + EPSILON or home > self.close + EPSILON:
            return None
        return arrival, start, departure

    def why_unserved(self, stop: _Stop) -> str:
        largest = max(self.capacity.values())
        if stop.demand > largest + EPSILON:
            return (
                f"demand {number_text(stop.demand)} exceeds every vehicle's capacity "
                f"(largest {number_text(largest)})"
            )
        if self.visit(self.depot, self.open, stop) is None:
            window = f"[{number_text(stop.earliest)}, {number_text(stop.latest)}]"
            return f"time window {window} cannot be met even on a direct trip from the depot"
        return "no vehicle had capacity or time left"


def _route(net: _Network, vehicle: str, todo: dict[str, _Stop]) -> JsonObject | None:
    here, time = net.depot, net.open
    load: float = 0
    distance = 0.0
    visits: list[JsonObject] = []
    while True:
        best: tuple[float, str, tuple[float, float, float]] | None = None
        for stop in todo.values():
            if load + stop.demand > net.capacity[vehicle] + EPSILON:
                continue
            times = net.visit(here, time, stop)
            if times is not None:
                candidate = (net.distance(here, stop), stop.id, times)
                if best is None or candidate[:2] < best[:2]:
                    best = candidate
        if best is None:
            break
        step, ident, (arrival, start, departure) = best
        stop = todo.pop(ident)
        load += stop.demand
        distance += step
        visits.append(
            {
                "stop": ident,
                "arrival": arrival,
                "start": start,
                "departure": departure,
                "load": load,
            }
        )
        here, time = stop, departure
    if not visits:
        return None
    back = net.distance(here, net.depot)
    return {
        "vehicle": vehicle,
        "stops": visits,
        "load": load,
        "capacity": net.capacity[vehicle],
        "distance": distance + back,
        "departure": net.open,
        "return": time + back / net.speed,
    }


class TimeWindowRoutingSolver(BaseSolver):
    """Nearest-neighbour routing with time windows; see the module docstring."""

    NAME = "optimization.routing"
    COMPLEXITY = "O(n^2 * v), n = stops, v = vehicles, practical for n <= 5000"
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        net = _Network(problem)
        todo = dict(net.stops)
        routes = [r for v in net.capacity if (r := _route(net, v, todo)) is not None]
        unserved = [
            {"stop": ident, "reason": net.why_unserved(stop)} for ident, stop in todo.items()
        ]
        plan: JsonObject = {
            "routes": routes,
            "unserved": unserved,
            "idle_vehicles": [v for v in net.capacity if v not in {r["vehicle"] for r in routes}],
            "served": len(net.stops) - len(unserved),
            "total_distance": sum(r["distance"] for r in routes),
        }
        summary = (
            f"{plural(len(routes), 'vehicle')} serve {plan['served']} of "
            f"{plural(len(net.stops), 'stop')}, "
            f"total distance {number_text(plan['total_distance'])}"
        )
        if unserved:
            summary += "; unserved: " + ", ".join(f"{u['stop']} ({u['reason']})" for u in unserved)
        return SolverPlan(plan, 0.6, summary + ".")

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        net = _Network(problem)
        capacity = Findings("capacity-respected")
        windows = Findings("time-windows-respected")
        travel = Findings("travel-times-consistent")
        for route in plan["routes"]:
            _check_route(net, route, capacity, windows, travel)
        accounted = Findings("every-stop-accounted")
        listed = {v["stop"] for r in plan["routes"] for v in r["stops"]} | {
            u["stop"] for u in plan["unserved"]
        }
        accounted.require(
            listed >= set(net.stops), f"missing: {', '.join(sorted(set(net.stops) - listed))}"
        )
        return (
            at_most_once(
                "stop-visited-at-most-once",
                (v["stop"] for r in plan["routes"] for v in r["stops"]),
                net.stops,
                "stop",
            ),
            at_most_once(
                "vehicle-used-at-most-once",
                (r["vehicle"] for r in plan["routes"]),
                net.capacity,
                "vehicle",
            ),
            capacity.result(),
            windows.result(),
            travel.result(),
            accounted.result(),
        )


def _check_route(
    net: _Network, route: JsonObject, capacity: Findings, windows: Findings, travel: Findings
) -> None:
    """Record one route's capacity, time-window and travel-time findings."""
    vehicle = route["vehicle"]
    visits = [v for v in route["stops"] if v["stop"] in net.stops]
    load = sum(net.stops[v["stop"]].demand for v in visits)
    if vehicle in net.capacity:
        capacity.require(
            load <= net.capacity[vehicle] + EPSILON,
            f"{vehicle} carries {number_text(load)}, capacity {number_text(net.capacity[vehicle])}",
        )
    here, time = net.depot, max(route["departure"], net.open)
    for visit in visits:
        stop = net.stops[visit["stop"]]
        windows.require(
            stop.earliest - EPSILON <= visit["start"] <= stop.latest + EPSILON,
            f"{stop.id} served at {number_text(visit['start'])}, window "
            f"[{number_text(stop.earliest)}, {number_text(stop.latest)}]",
        )
        earliest_arrival = time + net.distance(here, stop) / net.speed
        travel.require(
            visit["arrival"] + EPSILON >= earliest_arrival
            and visit["start"] + EPSILON >= visit["arrival"]
            and visit["departure"] + EPSILON >= visit["start"] + stop.service,
            f"{vehicle} cannot be at {stop.id} by {number_text(visit['arrival'])}",
        )
        here, time = stop, visit["departure"]
    home = time + net.distance(here, net.depot) / net.speed
    windows.require(
        route["return"] + EPSILON >= home and route["return"] <= net.close + EPSILON,
        f"{vehicle} returns at {number_text(route['return'])}, "
        f"depot closes at {number_text(net.close)}",
    )
