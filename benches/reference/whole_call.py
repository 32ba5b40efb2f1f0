"""N whole calls through the Python reference (PyPI `responsibility-pathway-runtime`).

The reference side of `cargo bench --bench reference` (benches/reference/main.rs, which
runs it; see docs/storage.md, "Benchmark against the Python reference"). Standard
library only, plus the reference itself (import name `rpr`).

One whole call, written with the reference's public API the way its README and tests
use it:

1. `register` a pathway definition (class `approval_required`, trusted internal
   environment, every role held by one actor) with a `PythonRpeEvaluator` whose policy
   allows everything. The reference's inspection requires an approval authority for
   every class that mutates, and a pathway that has one starts `awaiting_approval`,
   so admission is completed by
2. `transition(..., APPROVED)` by the approval authority;
3. `execute` an `ExecutionRequest` (`replace_text_file`) with `LocalFileExecutor`: it
   records the attempt, moves the pathway to `running`, writes a temporary file,
   `fsync`s it, `os.replace`s it over the target, reads the target back and compares
   sha256, records the result and completes the pathway only on a verified readback.

Stores: a file-backed `SQLiteStore` and a file-backed `SQLiteExecutionAttemptLedger`
(two databases, as the reference is designed), in a fresh directory. Both open their
connections in WAL mode but do not set `synchronous`; this script sets
`PRAGMA synchronous = FULL` on both connections explicitly (through their private
`_connection` attribute, the only way to reach them) and reports the value each had
before.

Measured: the loop of `--calls` whole calls only (after `--warmup` untimed calls):
wall time (`time.perf_counter`) and user/system CPU (`resource.getrusage(RUSAGE_SELF)`).
With `--count-commits`, a `sqlite3` trace callback on both connections counts the
`COMMIT` statements (and any write statement run outside an explicit transaction,
which would be a commit of its own) during the loop; it is off by default so the timed
runs carry no instrumentation. With `--markers`, an empty file named
`loop-begin.marker` is `fsync`ed just before the loop and `loop-end.marker` just after
it, so that a syscall trace can be cut to the loop.

Prints one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import sys
import time
from importlib import metadata
from pathlib import Path

from rpr import (
    ActionClass,
    EnvironmentTrust,
    ExecutionRequest,
    ExecutionStatus,
    LocalFileExecutor,
    PathwayDefinition,
    PathwayState,
    PythonRpeEvaluator,
    ResponsibilityPathwayRuntime,
    SQLiteExecutionAttemptLedger,
    SQLiteStore,
)

ACTOR = "alice"
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def allow_policy(action_request, requirement_packs):
    """The admission policy: allow everything (the same policy the Rust side uses)."""
    del action_request, requirement_packs
    return {"decision": "allow", "reason_codes": ["benchmark_allow_all"]}


class CommitCounter:
    """Counts commits on one connection from its statement trace."""

    def __init__(self) -> None:
        self.commits = 0
        self.autocommit_writes = 0
        self.in_transaction = False
        self.enabled = False

    def __call__(self, statement: str) -> None:
        if not self.enabled:
            return
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if head == "BEGIN":
            self.in_transaction = True
        elif head in ("COMMIT", "END"):
            self.in_transaction = False
            self.commits += 1
        elif head == "ROLLBACK":
            self.in_transaction = False
        elif head in WRITES and not self.in_transaction:
            self.autocommit_writes += 1


def definition(i: int, action_class: ActionClass) -> PathwayDefinition:
    needs_approval = action_class in (
        ActionClass.APPROVAL_REQUIRED,
        ActionClass.REVERSIBLE_EXTERNAL,
        ActionClass.HIGH_IMPACT,
    )
    return PathwayDefinition(
        pathway_id=f"bench-{i}",
        action_name="replace_text_file",
        action_class=action_class,
        environment_trust=EnvironmentTrust.TRUSTED_INTERNAL,
        decision_owner=ACTOR,
        approval_authority=ACTOR if needs_approval else None,
        execution_actor=ACTOR,
        stop_authority=ACTOR,
        evidence_owner=ACTOR,
        repair_owner=ACTOR,
        resume_authority=ACTOR,
        human_return_point=ACTOR,
        residual_owner=ACTOR,
    )


def content(i: int, size: int) -> str:
    """`size` ASCII bytes, different per call (the Rust side builds the same text)."""
    head = f"call {i} "
    return (head + "x" * size)[:size]


def whole_call(rt: ResponsibilityPathwayRuntime, executor: LocalFileExecutor, i: int, action_class: ActionClass, size: int) -> None:
    registered = rt.register(definition(i, action_class), idempotency_key=f"bench-{i}")
    if registered.state is PathwayState.AWAITING_APPROVAL:
        rt.transition(registered.pathway_id, PathwayState.APPROVED, actor=ACTOR, reason="allowed by policy")
    elif registered.state is not PathwayState.APPROVED:
        raise RuntimeError(f"call {i}: registered as {registered.state.value}: {registered.reason_codes}")
    request = ExecutionRequest(
        operation_id=f"op-{i}",
        attempt_id=f"attempt-{i}",
        idempotency_key=f"bench-{i}",
        action="replace_text_file",
        parameters={"path": f"f-{i}.txt", "content": content(i, size)},
    )
    result = rt.execute(registered.pathway_id, request, actor=ACTOR, executor=executor)
    if result.status is not ExecutionStatus.SUCCEEDED or result.readback is None or not result.readback.verified:
        raise RuntimeError(f"call {i}: {result}")
    if rt.store.get_state(registered.pathway_id) is not PathwayState.COMPLETED:
        raise RuntimeError(f"call {i}: not completed")


def marker(directory: Path, name: str) -> None:
    with open(directory / name, "wb") as handle:
        os.fsync(handle.fileno())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before the loop")
    parser.add_argument("--dir", required=True, help="a fresh directory for the databases and files")
    parser.add_argument("--content-bytes", type=int, default=64)
    parser.add_argument("--action-class", default="approval_required", choices=[c.value for c in ActionClass])
    parser.add_argument("--count-commits", action="store_true")
    parser.add_argument("--markers", action="store_true")
    args = parser.parse_args()

    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=False)
    files = directory / "files"
    store = SQLiteStore(directory / "pathways.sqlite3")
    ledger = SQLiteExecutionAttemptLedger(directory / "attempts.sqlite3")
    connections = {"store": store._connection, "attempt_ledger": ledger._connection}
    synchronous_before = {}
    counters = {}
    for name, connection in connections.items():
        synchronous_before[name] = SYNC_NAMES.get(connection.execute("PRAGMA synchronous").fetchone()[0])
        connection.execute("PRAGMA synchronous = FULL")
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal" or connection.execute("PRAGMA synchronous").fetchone()[0] != 2:
            raise RuntimeError(f"{name}: journal_mode {mode}, synchronous not FULL")
        if args.count_commits:
            counters[name] = CommitCounter()
            connection.set_trace_callback(counters[name])
    rt = ResponsibilityPathwayRuntime(
        store=store,
        rpe=PythonRpeEvaluator(allow_policy, ()),
        attempt_ledger=ledger,
    )
    executor = LocalFileExecutor(files)
    action_class = ActionClass(args.action_class)

    for i in range(args.warmup):
        whole_call(rt, executor, i, action_class, args.content_bytes)
    first = args.warmup
    if args.markers:
        marker(directory, "loop-begin.marker")
    for counter in counters.values():
        counter.enabled = True
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for i in range(first, first + args.calls):
        whole_call(rt, executor, i, action_class, args.content_bytes)
    elapsed = time.perf_counter() - started
    usage_after = resource.getrusage(resource.RUSAGE_SELF)
    for counter in counters.values():
        counter.enabled = False
    if args.markers:
        marker(directory, "loop-end.marker")

    commits = None
    if counters:
        commits = {name: c.commits + c.autocommit_writes for name, c in counters.items()}
        commits["total"] = sum(commits.values())
    print(json.dumps({
        "side": "reference",
        "calls": args.calls,
        "warmup": args.warmup,
        "elapsed_s": elapsed,
        "user_s": usage_after.ru_utime - usage_before.ru_utime,
        "sys_s": usage_after.ru_stime - usage_before.ru_stime,
        "commits": commits,
        "synchronous_before": synchronous_before,
        "synchronous": "FULL",
        "journal_mode": "wal",
        "action_class": action_class.value,
        "content_bytes": args.content_bytes,
        "reference_version": metadata.version("responsibility-pathway-runtime"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
