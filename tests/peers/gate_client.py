"""Drives `rpr gate` with the official Python SDK client (PyPI `mcp` 2.3.0), for tests/gate.rs.

Usage: python gate_client.py [--client session|auto|2026-07-28] SCENARIO TOOL ARGS_JSON -- GATE_COMMAND [ARGS...]

Connects (the gate gets this process's environment), lists the tools, then calls TOOL with
ARGS_JSON. `--client` picks the SDK's client: `session` (the default) is `stdio_client` +
`ClientSession` with `initialize`; `auto` is `Client` in its default mode (it probes
`server/discover` first and uses 2026-07-28 if the server answers it); `2026-07-28` is
`Client` pinned to that revision (no probe, no handshake). Under 2026-07-28 a Human Gate form
arrives as `input_required`, which `Client` answers through the same elicitation callback.
SCENARIO picks the answers:

- `accept`, `accept-no`, `decline`, `cancel`: declares elicitation; the callback answers the
  gate's Human Gate form with that action (`accept-no`: accept with `approve: false`) and
  records the request it was shown;
- `plain`: declares no elicitation (the default callback), so the gate cannot ask.

Prints one JSON report on stdout (last line): the initialize result's parts, the tool names, the
elicitations seen and the call's result (`is_error`, `text`, `meta`) or its JSON-RPC error.

Plan mode, for tests/gate_matrix.rs: `python gate_client.py [--client C] --plan PLAN_JSON -- GATE...`
makes several calls in one session. PLAN_JSON is `{"elicitation": BOOL, "steps": [STEP...]}`; each
STEP is `{"name", "tool", "arguments", "answer"}` (`answer` as SCENARIO above, what the form of that
step is answered). The report has `steps`: for each, its `name`, `elicitations` and `result` or `error` (or `exception`);
a session that does not connect is reported as `connect_error` (exit status 0 either way, so the
matrix can name the cell).
"""

import asyncio
import json
import os
import sys

from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp import types
from mcp.shared.exceptions import MCPError


async def main(client, scenario, tool, arguments, command):
    report = {"elicitations": []}

    async def elicit(context, params):
        report["elicitations"].append(
            {"message": params.message, "schema": getattr(params, "requested_schema", None)}
        )
        if scenario == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if scenario == "accept-no":
            return types.ElicitResult(action="accept", content={"approve": False})
        if scenario == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="cancel")

    kwargs = {} if scenario == "plain" else {"elicitation_callback": elicit}
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def call(session):
        try:
            res = await session.call_tool(tool, arguments)
            text = "\n".join(c.text for c in res.content if c.type == "text")
            meta = res.meta if hasattr(res, "meta") else None
            report["result"] = {
                "is_error": bool(res.is_error),
                "text": text,
                "meta": meta,
                "structured": res.structured_content,
            }
        except MCPError as e:
            report["error"] = {"code": e.error.code, "message": e.error.message, "data": e.error.data}

    if client == "session":
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **kwargs) as s:
                init = await s.initialize()
                report["protocol_version"] = init.protocol_version
                report["server_info"] = init.server_info.model_dump(exclude_none=True)
                tools = await s.list_tools()
                report["tools"] = [t.name for t in tools.tools]
                await call(s)
    else:
        async with Client(params, mode=client, **kwargs) as c:
            report["protocol_version"] = c.protocol_version
            info = c.server_info
            report["server_info"] = info.model_dump(exclude_none=True) if info else None
            tools = await c.list_tools()
            report["tools"] = [t.name for t in tools.tools]
            await call(c)
    print(json.dumps(report, default=str))


def result_of(res):
    """A tool result as the report shows it."""
    return {
        "is_error": bool(res.is_error),
        "text": "\n".join(c.text for c in res.content if c.type == "text"),
        "meta": res.meta if hasattr(res, "meta") else None,
        "structured": res.structured_content,
    }


def describe(e):
    """An exception in one line; an exception group as the exceptions in it."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def run_plan(client, plan, command):
    """Plan mode: one session, the plan's steps in order (see the module's doc)."""
    report = {"steps": []}
    current = {"answer": "cancel", "seen": []}

    async def elicit(context, params):
        current["seen"].append({"message": params.message})
        answer = current["answer"]
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if answer == "accept-no":
            return types.ElicitResult(action="accept", content={"approve": False})
        return types.ElicitResult(action=answer if answer == "decline" else "cancel")

    kwargs = {"elicitation_callback": elicit} if plan.get("elicitation", True) else {}
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def steps(session):
        for step in plan["steps"]:
            done = {"name": step["name"], "elicitations": []}
            report["steps"].append(done)
            current["answer"], current["seen"] = step.get("answer", "cancel"), done["elicitations"]
            try:
                done["result"] = result_of(await session.call_tool(step["tool"], step["arguments"]))
            except MCPError as e:
                done["error"] = {"code": e.error.code, "message": e.error.message, "data": e.error.data}
            except Exception as e:  # noqa: BLE001 - the matrix names the cell with it
                done["exception"] = describe(e)

    try:
        if client == "session":
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, **kwargs) as s:
                    init = await s.initialize()
                    report["protocol_version"] = init.protocol_version
                    report["tools"] = [t.name for t in (await s.list_tools()).tools]
                    await steps(s)
        else:
            async with Client(params, mode=client, **kwargs) as c:
                report["protocol_version"] = c.protocol_version
                report["tools"] = [t.name for t in (await c.list_tools()).tools]
                await steps(c)
    except BaseException as e:  # noqa: BLE001 - reported, not raised
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        report["connect_error" if "tools" not in report else "session_error"] = describe(e)
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    argv = sys.argv[1:]
    client = "session"
    if argv[0] == "--client":
        client, argv = argv[1], argv[2:]
    if argv[0] == "--plan":
        sep = argv.index("--")
        asyncio.run(run_plan(client, json.loads(argv[1]), argv[sep + 1 :]))
        sys.exit(0)
    sep = argv.index("--")
    scenario, tool, args_json = argv[:sep]
    asyncio.run(main(client, scenario, tool, json.loads(args_json), argv[sep + 1 :]))
