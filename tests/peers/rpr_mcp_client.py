"""Drives `rpr-mcp` with the official Python SDK client (PyPI `mcp` 2.3.0), for tests/rpr_mcp_clients.rs.

Usage: python rpr_mcp_client.py legacy|auto SERVER [ARGS...]

- `legacy`: `stdio_client` + `ClientSession`: `initialize()`, `list_tools()`, `send_ping()`, then
  `call_tool` of every tool (`rpr.get_pathway` and `rpr.get_evidence` on the first pathway that
  `rpr.list_pathways` returns; `rpr.list_pathways` again with its `next_cursor`), an unknown tool
  (must raise MCPError -32602) and an unknown pathway (must be an `isError` result).
- `auto`: `Client(params)` in its default mode `"auto"`, which probes `server/discover` first and
  falls back to `initialize` on an error. Asserts that connecting took under 1 s, then lists the
  tools and calls `rpr.get_status`.

Prints one JSON report on stdout (last line). Exits 1 with the reason on stderr when an assertion
fails. The server gets the SDK's default environment.
"""

import asyncio
import json
import sys
import time

from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientSession as _Session
from mcp.shared.exceptions import MCPError

CONNECT_BUDGET_S = 1.0


def result_json(res):
    """The parts of a CallToolResult that the test checks; asserts the text block mirrors structuredContent."""
    text = [c.text for c in res.content if c.type == "text"]
    assert len(text) == 1, f"one text block expected: {res}"
    assert json.loads(text[0]) == res.structured_content, "the text block is the serialized structuredContent"
    return {"is_error": res.is_error, "structured": res.structured_content}


async def legacy(params):
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            report["protocol_version"] = init.protocol_version
            report["server_info"] = init.server_info.model_dump(exclude_none=True)
            report["tools_capability"] = init.capabilities.tools.model_dump(exclude_none=True)
            report["instructions"] = init.instructions
            tools = await s.list_tools()
            report["tools"] = [t.name for t in tools.tools]
            report["read_only_hints"] = [t.annotations.read_only_hint for t in tools.tools]
            report["next_cursor"] = tools.next_cursor
            await s.send_ping()
            report["ping"] = "ok"
            calls = {}
            calls["rpr.get_status"] = result_json(await s.call_tool("rpr.get_status", {}))
            page = result_json(await s.call_tool("rpr.list_pathways", {"limit": 5}))
            calls["rpr.list_pathways"] = page
            cursor = page["structured"].get("next_cursor")
            if cursor is not None:
                calls["rpr.list_pathways#2"] = result_json(
                    await s.call_tool("rpr.list_pathways", {"limit": 5, "cursor": cursor})
                )
            calls["rpr.list_unresolved"] = result_json(await s.call_tool("rpr.list_unresolved", {}))
            first = page["structured"]["pathways"][0]["pathway_id"]
            calls["rpr.get_pathway"] = result_json(await s.call_tool("rpr.get_pathway", {"pathway_id": first}))
            calls["rpr.get_evidence"] = result_json(await s.call_tool("rpr.get_evidence", {"pathway_id": first}))
            calls["missing_pathway"] = result_json(
                await s.call_tool("rpr.get_pathway", {"pathway_id": "no-such-pathway"})
            )
            try:
                await s.call_tool("rpr.no_such_tool", {})
                report["unknown_tool"] = "no error"
            except MCPError as e:
                report["unknown_tool"] = {"code": e.error.code, "message": e.error.message}
            report["calls"] = calls
    return report


async def auto(params):
    probes = []
    original = _Session.send_discover

    async def recording_send_discover(self, *args, **kwargs):
        t = time.monotonic()
        try:
            result = await original(self, *args, **kwargs)
            probes.append({"outcome": "result", "seconds": time.monotonic() - t})
            return result
        except MCPError as e:
            probes.append({"outcome": "error", "code": e.error.code, "seconds": time.monotonic() - t})
            raise

    _Session.send_discover = recording_send_discover
    report = {}
    start = time.monotonic()
    async with Client(params) as c:
        connect = time.monotonic() - start
        report["connect_seconds"] = connect
        report["mode"] = c.mode
        report["discover_probes"] = probes
        report["negotiated_by"] = (
            "initialize" if c.session.initialize_result is not None else "discover"
        )
        report["protocol_version"] = c.protocol_version
        report["server_name"] = c.server_info.name if c.server_info else None
        tools = await c.list_tools()
        report["tools"] = [t.name for t in tools.tools]
        report["get_status"] = result_json(await c.call_tool("rpr.get_status", {}))
    assert connect < CONNECT_BUDGET_S, f"Client(mode='auto') took {connect:.3f} s to connect (budget {CONNECT_BUDGET_S} s)"
    return report


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("legacy", "auto"):
        sys.exit("usage: rpr_mcp_client.py legacy|auto SERVER [ARGS...]")
    params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
    run = legacy if sys.argv[1] == "legacy" else auto
    report = asyncio.run(run(params))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
