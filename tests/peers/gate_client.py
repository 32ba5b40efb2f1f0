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


if __name__ == "__main__":
    argv = sys.argv[1:]
    client = "session"
    if argv[0] == "--client":
        client, argv = argv[1], argv[2:]
    sep = argv.index("--")
    scenario, tool, args_json = argv[:sep]
    asyncio.run(main(client, scenario, tool, json.loads(args_json), argv[sep + 1 :]))
