"""A key-value MCP server built with the official Python SDK (PyPI `mcp` 2.x), for rpr's interop tests.

Based on the verified server in mcp-notes §3, with two additions so that effects can be checked
from outside the process and survive it:

- the store is a JSON object file (env `KV_STATE`), rewritten atomically (write, fsync, rename) on
  every write, and read on every call, so a fresh server process on the same file sees earlier writes;
- every real write appends one line to an effects log (env `KV_EFFECTS`, fsynced), so a test can
  count writes.

Tools: `put {key, value}` (mutating), `get {key}` (read-only; `structuredContent {key, present, value}`,
so that an absent key is an answer, not a tool error: the notes' version raised, which the SDK turns into an
opaque "Error executing tool get"), and
`slow_put {key, value}` (mutating, for crash tests): it prints `slow_put: sleeping` to stderr and then
sleeps 60 s before replying. With `KV_SLOW_PUT=effect-then-sleep` (default) the write happens before the
sleep; with `KV_SLOW_PUT=sleep-then-effect` after it (so a kill during the sleep leaves no effect).
"""

import json
import os
import sys
import time

from pydantic import BaseModel

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

mcp = MCPServer("kv-test-server")
STATE = os.environ.get("KV_STATE", "kv_state.json")
EFFECTS = os.environ.get("KV_EFFECTS")


def _load() -> dict:
    try:
        with open(STATE, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _store(key: str, value: str) -> None:
    data = _load()
    data[key] = value
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, STATE)
    if EFFECTS:
        with open(EFFECTS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "value": value, "pid": os.getpid()}) + "\n")
            f.flush()
            os.fsync(f.fileno())


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True))
def put(key: str, value: str) -> str:
    """Store value under key."""
    _store(key, value)
    return f"stored {key}"


class Entry(BaseModel):
    key: str
    present: bool
    value: str | None = None


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get(key: str) -> Entry:
    """Read value for key (present=false when absent)."""
    data = _load()
    if key not in data:
        return Entry(key=key, present=False)
    return Entry(key=key, present=True, value=data[key])


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True))
def slow_put(key: str, value: str) -> str:
    """Store value under key, slowly (for crash tests)."""
    effect_first = os.environ.get("KV_SLOW_PUT", "effect-then-sleep") != "sleep-then-effect"
    if effect_first:
        _store(key, value)
    print("slow_put: sleeping", file=sys.stderr, flush=True)
    time.sleep(60)
    if not effect_first:
        _store(key, value)
    return f"stored {key}"


if __name__ == "__main__":
    mcp.run()  # stdio by default
