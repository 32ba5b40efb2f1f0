"""Drives `rpr gate` in front of server-everything with the official Python SDK client
(PyPI `mcp` 2.3.0), for tests/gate_interop.rs.

Usage: python gate_interop_everything.py -- GATE_COMMAND [ARGS...]

Connects with `stdio_client` + `ClientSession` (the gate gets this process's environment) and
declares sampling (the callback answers SAMPLED_TEXT), elicitation (the callback accepts with
content for every property of the requested schema), roots (one root; server-everything asks for
them after `initialized` and then sends a logging message saying how many it got) and a logging
callback. Then it lists the tools and calls, in turn:

- `trigger-sampling-request` (the server asks the client for a sampling/createMessage);
- `trigger-elicitation-request` (the server sends elicitation/create to the client);
- `trigger-long-running-operation` with a progress callback (so a `_meta.progressToken`).

Prints one JSON report on stdout (last line): the initialize result's parts, the tool names, what
each callback saw, and each call's result (`is_error`, `text`, `meta`) or JSON-RPC error.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types
from mcp.shared.exceptions import MCPError

SAMPLED_TEXT = "gate-interop sampled answer 7f3a"
ELICITED_NAME = "Ada Gate-Interop"


def value_for(name, prop):
    """A value matching one property of an elicitation form schema."""
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return prop.get("minimum", 1)
    if kind == "array":
        items = prop.get("items", {})
        options = items.get("enum") or [o["const"] for o in items.get("anyOf", [])]
        return options[:1]
    if "enum" in prop:
        return prop["enum"][0]
    if "oneOf" in prop:
        return prop["oneOf"][0]["const"]
    fmt = prop.get("format")
    if fmt == "email":
        return "ada@example.org"
    if fmt == "uri":
        return "https://example.org/ada"
    if fmt == "date":
        return "1815-12-10"
    if name == "name":
        return ELICITED_NAME
    return f"value of {name}"


async def main(command):
    report = {"sampling": [], "elicitations": [], "roots_requests": 0, "logs": [], "progress": []}

    async def sample(context, params):
        report["sampling"].append(params.model_dump(mode="json", exclude_none=True))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLED_TEXT),
            model="gate-interop-model",
            stop_reason="endTurn",
        )

    async def elicit(context, params):
        schema = getattr(params, "requested_schema", None) or {}
        props = schema.get("properties", {})
        content = {name: value_for(name, prop) for name, prop in props.items()}
        report["elicitations"].append(
            {"message": params.message, "properties": sorted(props), "content": content}
        )
        return types.ElicitResult(action="accept", content=content)

    async def roots(context):
        report["roots_requests"] += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/gate-interop", name="gi")])

    async def log(params):
        report["logs"].append(params.model_dump(mode="json", exclude_none=True))

    async def progress(progress, total, message):
        report["progress"].append({"progress": progress, "total": total, "message": message})

    async def call(tool, arguments, **kwargs):
        try:
            res = await session.call_tool(tool, arguments, **kwargs)
            return {
                "is_error": bool(res.is_error),
                "text": "\n".join(c.text for c in res.content if c.type == "text"),
                "meta": getattr(res, "meta", None),
            }
        except MCPError as e:
            return {"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}}

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read,
            write,
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
            logging_callback=log,
        ) as session:
            init = await session.initialize()
            report["protocol_version"] = init.protocol_version
            report["server_info"] = init.server_info.model_dump(exclude_none=True)
            report["capabilities"] = init.capabilities.model_dump(mode="json", exclude_none=True)
            tools = await session.list_tools()
            report["tools"] = [t.name for t in tools.tools]
            calls = report["calls"] = {}
            calls["sampling"] = await call("trigger-sampling-request", {"prompt": "say the word"})
            calls["elicitation"] = await call("trigger-elicitation-request", {})
            calls["long"] = await call(
                "trigger-long-running-operation",
                {"duration": 1.5, "steps": 3},
                progress_callback=progress,
            )
            # The server asks for the roots 350 ms after `initialized`, then logs how many it
            # got; wait (up to 10 s) for that message if it has not come yet.
            for _ in range(100):
                if report["logs"]:
                    break
                await asyncio.sleep(0.1)
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    argv = sys.argv[1:]
    sep = argv.index("--")
    asyncio.run(main(argv[sep + 1 :]))
