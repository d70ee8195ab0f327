"""nudma from Python: scenarios, runs, the catalog and sweeps on local cores, Ray or Dask.

Every number comes from the Rust core (module ``nudma._native``), which calls the same
library functions as the ``nudma`` command; rows are those of ``nudma run --format json``
and ``nudma reproduce --format json``. Errors are :class:`NudmaError`, carrying the
located message the command prints (file, line, key, what is wrong).

A ``set`` or ``grid`` maps keys of ``nudma run --set`` (``workload.NAME.FIELD``,
``measure.FIELD`` or any scenario key by its TOML path) to a value, or to a list of values
for a sweep: ``{"workload.rx.outstanding": [1, 8, 32]}`` is ``--set
workload.rx.outstanding=1,8,32``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import _native
from ._native import NudmaError

__all__ = [
    "NudmaError",
    "Scenario",
    "scenario",
    "run",
    "reproduce",
    "sweep",
    "frame",
    "compare",
    "advise",
    "inspect",
    "calibrate",
]

Value = Union[bool, int, float, str]
Sets = Mapping[str, Union[Value, Sequence[Value]]]


def _value_text(key: str, v: Any) -> str:
    """A value as ``--set`` reads it: TOML when it parses, else a plain string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return v
    raise NudmaError(f"{key}: a value must be a bool, number or string, not {type(v).__name__}")


def _set_args(sets: Optional[Sets]) -> list[str]:
    """``--set`` arguments, one per key, in the mapping's order (the first varies slowest)."""
    out = []
    for key, vals in (sets or {}).items():
        if isinstance(vals, (list, tuple)):
            if not vals:
                raise NudmaError(f"{key}: an empty list of values")
            texts = [_value_text(key, v) for v in vals]
        else:
            texts = [_value_text(key, vals)]
        for t in texts:
            # A comma would split the value in two, as on the command line.
            if _native.count_points([f"{key}={t}"]) != 1:
                raise NudmaError(f"{key}: the value {t!r} holds a comma outside quotes or brackets")
        out.append(f"{key}=" + ",".join(texts))
    return out


class Scenario:
    """A scenario file or built-in name, with ``set`` overrides of one value per key.

    ``source`` is the file's path or ``builtin:NAME``; ``is_experiment`` tells an
    experiment file (``scenarios/experiments/*.toml``) from a scenario with workloads.
    """

    def __init__(self, name_or_path: Union[str, os.PathLike], set: Optional[Mapping[str, Value]] = None):
        arg = os.fspath(name_or_path)
        # A file by its absolute path, so that workers of another directory find it.
        self.arg: str = os.path.abspath(arg) if os.path.exists(arg) else arg
        self.set: dict[str, Value] = dict(set or {})
        for k, v in self.set.items():
            if isinstance(v, (list, tuple)):
                raise NudmaError(f"{k}: a scenario takes one value per key (sweep lists instead)")
        self._sets = _set_args(self.set)
        self.source, self.is_experiment = _native.resolve(self.arg)

    def __repr__(self) -> str:
        extra = f", set={self.set!r}" if self.set else ""
        return f"nudma.Scenario({self.arg!r}{extra})"

    def check(self) -> str:
        """Validates the scenario; returns ``nudma topo check``'s summary line."""
        return _native.check(self.arg, self._sets)

    def topology(self) -> dict:
        """The fabric as ``nudma topo show --format json``: hosts, PCIe trees, cables."""
        return json.loads(_native.topology_json(self.arg, self._sets))

    def path(
        self,
        frm: str,
        to: str,
        access: str = "read",
        length: int = 64,
        offset: int = 0,
        outstanding: Optional[int] = None,
    ) -> dict:
        """The route of one access, as ``nudma topo path --format json``.

        ``frm`` is ``host.device[.pfN]`` or ``host.cpuN``; ``to`` is
        ``host.device[.pfN][.barN]``, ``host.ram[.nodeN]`` or a bus address. A fault is an
        answer (its ``target`` says so), not an error.
        """
        return json.loads(
            _native.path_json(self.arg, self._sets, frm, to, access, length, offset, outstanding)
        )


def scenario(name_or_path: Union[str, os.PathLike], set: Optional[Mapping[str, Value]] = None) -> Scenario:
    """Loads a scenario file or built-in name (see ``nudma list``)."""
    return Scenario(name_or_path, set)


def _as_scenario(s: Union[Scenario, str, os.PathLike]) -> Scenario:
    return s if isinstance(s, Scenario) else Scenario(s)


def frame(results: Sequence[Mapping[str, Any]], arrow: bool = False):
    """Rows of the JSON contract (``{"experiment", "config", "params", "metrics",
    "published"?}``) as a pandas DataFrame, or a pyarrow Table with ``arrow=True``.

    Columns: ``experiment``, ``config``, each parameter, each metric (named
    ``metrics.NAME`` where a parameter has the same name), then ``published_value`` and
    ``published_basis`` when a row has a published value: dicts metric → value and metric
    → "calibration" | "prediction", as the JSON's ``published`` gives them.
    """
    import pandas as pd

    params = _keys(r["params"] for r in results)
    metrics = _keys(r["metrics"] for r in results)
    published = any("published" in r for r in results)
    records = []
    for r in results:
        rec: dict[str, Any] = {"experiment": r["experiment"], "config": r["config"]}
        for k in params:
            rec[k] = r["params"].get(k)
        for k in metrics:
            rec[f"metrics.{k}" if k in params else k] = r["metrics"].get(k)
        if published:
            p = r.get("published")
            rec["published_value"] = {m: v["value"] for m, v in p.items()} if p else None
            rec["published_basis"] = {m: v["basis"] for m, v in p.items()} if p else None
        records.append(rec)
    columns = ["experiment", "config"] + params + [f"metrics.{k}" if k in params else k for k in metrics]
    if published:
        columns += ["published_value", "published_basis"]
    df = pd.DataFrame.from_records(records, columns=columns)
    if arrow:
        import pyarrow as pa

        return pa.Table.from_pandas(df, preserve_index=False)
    return df


def _keys(maps: Iterable[Mapping[str, Any]]) -> list[str]:
    """Keys in order of first appearance."""
    seen: dict[str, None] = {}
    for m in maps:
        for k in m:
            seen.setdefault(k, None)
    return list(seen)


def run(
    scenario: Union[Scenario, str, os.PathLike],
    set: Optional[Sets] = None,
    seed: int = 1,
    jobs: Optional[int] = None,
    arrow: bool = False,
):
    """``nudma run SCENARIO --set … --seed S``: one row per workload and sweep point.

    Lists in ``set`` make a sweep (their cartesian product, the first key varying
    slowest), run on ``jobs`` threads of this process (default: every core).
    """
    s = _as_scenario(scenario)
    sets = s._sets + _set_args(set)
    text = _native.run_points(s.arg, sets, seed, jobs or os.cpu_count() or 1)
    return frame(json.loads(text)["results"], arrow=arrow)


def reproduce(*ids: str, arrow: bool = False):
    """``nudma reproduce IDS…``: the catalog's rows beside their published values.

    ``ids`` are studies (``smartio``) or experiment IDs (``smartio.sq_placement``); none
    runs every implemented experiment. The frame's ``attrs["units"]`` gives each
    experiment's metric units (``{experiment: {metric: "Gb/s" | "GB/s" | "ns" | …}}``,
    for the metrics that have one), and ``attrs["not_implemented"]`` lists the catalog
    entries asked for that this build does not implement.
    """
    out = json.loads(_native.reproduce_json(list(ids)))
    table = frame(out["results"], arrow=arrow)
    units = out.get("units", {})
    missing = out.get("not_implemented", [])
    if arrow:
        return table.replace_schema_metadata(
            {"units": json.dumps(units), "not_implemented": json.dumps(missing)}
        )
    table.attrs["units"] = units
    table.attrs["not_implemented"] = missing
    return table


def _run_chunk(arg: str, sets: list[str], seed: int, start: int, stop: int) -> str:
    """One task of a sweep: points ``start..stop``, as JSON text (the rows of the CLI)."""
    return _native.run_points(arg, sets, seed, 1, start, stop)


def sweep(
    scenario: Union[Scenario, str, os.PathLike],
    grid: Mapping[str, Sequence[Value]],
    backend: str = "local",
    address: Optional[str] = None,
    *,
    seed: int = 1,
    workers: Optional[int] = None,
    points_per_task: Optional[int] = None,
    progress: bool = True,
    arrow: bool = False,
):
    """The cartesian product of ``grid`` (``--set`` key → list of values), in tasks of many
    points each, on ``backend``:

    - ``"local"``: threads of this process, ``workers`` of them (default: every core);
    - ``"ray"``: a Ray cluster (``ray.init(address)`` unless Ray is already initialised);
    - ``"dask"``: a Dask cluster (``distributed.Client(address)``; without an address the
      current client, or a new local one).

    The rows are the same, in the same order, whichever backend ran them, and the same
    as ``nudma run SCENARIO --set KEY=V1,V2,…`` for every key of ``grid``.
    """
    s = _as_scenario(scenario)
    if not grid:
        raise NudmaError("sweep: an empty grid (use nudma.run for one point)")
    sets = s._sets + _set_args({k: list(v) for k, v in grid.items()})
    n = _native.count_points(sets)
    expected = math.prod(len(v) for v in grid.values())
    if n != expected:
        raise NudmaError(f"sweep: the grid makes {expected} points but its --set keys {n}")
    runner = _BACKENDS.get(backend)
    if runner is None:
        raise NudmaError(f"sweep: backend {backend!r}: expected one of {', '.join(_BACKENDS)}")
    slots = workers or os.cpu_count() or 1
    # A few tasks per worker balances uneven points; many points per task keeps the
    # per-task overhead of Ray and Dask small.
    size = points_per_task or max(1, math.ceil(n / (4 * slots)))
    chunks = [(a, min(a + size, n)) for a in range(0, n, size)]
    from tqdm import tqdm

    bar = tqdm(total=n, unit="pt", desc=f"nudma sweep ({backend})", disable=not progress)
    texts: list[Optional[str]] = [None] * len(chunks)

    def done(i: int, text: str) -> None:
        texts[i] = text
        bar.update(chunks[i][1] - chunks[i][0])

    try:
        runner(s.arg, sets, seed, chunks, address, workers, done)
    finally:
        bar.close()
    rows = [row for t in texts for row in json.loads(t)["results"]]
    return frame(rows, arrow=arrow)


Done = Callable[[int, str], None]


def _local(arg, sets, seed, chunks, address, workers, done: Done) -> None:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    if address is not None:
        raise NudmaError("sweep: the local backend takes no address")
    # The core releases the GIL while it simulates: threads run points in parallel.
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        futures = {pool.submit(_run_chunk, arg, sets, seed, a, b): i for i, (a, b) in enumerate(chunks)}
        for f in as_completed(futures):
            done(futures[f], f.result())


def _ray(arg, sets, seed, chunks, address, workers, done: Done) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, num_cpus=workers if address is None else None)
    task = ray.remote(num_cpus=1)(_run_chunk)
    pending = {task.remote(arg, sets, seed, a, b): i for i, (a, b) in enumerate(chunks)}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            try:
                text = ray.get(ref)
            except ray.exceptions.RayTaskError as e:
                # The worker's NudmaError, with its located message, raised here as such.
                raise NudmaError(str(e.cause)) from e
            done(pending.pop(ref), text)


def _dask(arg, sets, seed, chunks, address, workers, done: Done) -> None:
    from distributed import Client, as_completed, get_client

    if address is not None:
        client = Client(address)
    else:
        try:
            client = get_client()
        except ValueError:
            client = Client(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1)
    futures = {
        client.submit(_run_chunk, arg, sets, seed, a, b, pure=False): i for i, (a, b) in enumerate(chunks)
    }
    for f in as_completed(list(futures)):
        done(futures[f], f.result())


_BACKENDS = {"local": _local, "ray": _ray, "dask": _dask}


def compare(
    a: Union[str, os.PathLike],
    b: Optional[Union[str, os.PathLike]] = None,
    set: Optional[Sets] = None,
    seed: int = 1,
) -> dict:
    """``nudma compare A [B] --format json``: two scenarios (each ``set`` key one value, on
    both), or ``a`` at the first and second value of each ``set`` key (``[A, B]``; a key
    with one value has it on both sides). The keys that differ, then each metric of both
    and B's change (``b / a - 1``, ``None`` when A is 0)."""
    def arg(x: Union[str, os.PathLike]) -> str:
        x = os.fspath(x)
        return os.path.abspath(x) if os.path.exists(x) else x

    b_arg = None if b is None else arg(b)
    return json.loads(_native.compare_json(arg(a), b_arg, _set_args(set), seed))


def advise(
    scenario: Union[str, os.PathLike],
    objective: str = "throughput",
    budget: int = 32,
    set: Optional[Sets] = None,
    fix: Optional[Sequence[str]] = None,
    seed: int = 1,
) -> dict:
    """``nudma advise SCENARIO --format json``: the placements of the scenario's workloads
    a person could change (``set``: the starting point, one value per key; ``fix``: keys,
    or prefixes such as ``workload.stream``, kept as they are), each simulated, and those
    that gain under ``objective`` (``throughput``, ``p99`` or ``fairness``) ranked with
    their changes, predicted metrics, gain, reason and commands."""
    x = os.fspath(scenario)
    arg = os.path.abspath(x) if os.path.exists(x) else x
    return json.loads(
        _native.advise_json(arg, objective, budget, _set_args(set), list(fix or []), seed)
    )


def inspect(sysfs_root: Optional[str] = None, hwloc: Optional[str] = None) -> dict:
    """``nudma inspect --format json``: this machine (or a sysfs snapshot under
    ``sysfs_root``, or an hwloc XML export) audited for non-uniform I/O."""
    return json.loads(_native.inspect_json(sysfs_root, hwloc))


def calibrate(size_bytes: Optional[int] = None, iterations: int = 3, threads: Optional[int] = None) -> dict:
    """``nudma calibrate --format json``: this machine's memory latency and bandwidth per
    (CPU node, memory node). It measures the machine and takes seconds."""
    return json.loads(_native.calibrate_json(size_bytes, iterations, threads))
