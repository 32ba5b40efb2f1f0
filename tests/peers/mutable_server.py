"""A stdio MCP server (2025-11-25) that a test changes from outside: raw JSON-RPC, stdlib only.

Tools: `put {key, value}` (mutating: stores the pair in the JSON object file `STATE` and appends
one line to the file `EFFECTS`) and `get {key}` (read-only: `structuredContent {key, value}`,
`value` null when absent).

- `DESCRIPTION_FILE`: `get`'s description is read from this file at every `tools/list`, so a
  test can change the tool silently: the server declares no `listChanged` and sends nothing.
- `CALLS` (optional): the name of every tool called is appended to this file, one a line.
- `HOLD_FILE`: while this file exists, a `tools/list` first creates `HOLD_FILE.waiting` and then
  waits until `HOLD_FILE` is removed, so a test can hold a client inside its bind.

stdout carries protocol lines only; nothing is logged.
"""

import json
import os
import sys
import time

STATE = os.environ["STATE"]
EFFECTS = os.environ["EFFECTS"]
DESCRIPTION_FILE = os.environ.get("DESCRIPTION_FILE")
HOLD_FILE = os.environ.get("HOLD_FILE")
CALLS = os.environ.get("CALLS")


def load():
    try:
        with open(STATE, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def description():
    try:
        with open(DESCRIPTION_FILE, encoding="utf-8") as f:
            return f.read().strip()
    except (TypeError, FileNotFoundError):
        return "Read the value stored under key."


def tools():
    if HOLD_FILE and os.path.exists(HOLD_FILE):
        open(HOLD_FILE + ".waiting", "w").close()
        while os.path.exists(HOLD_FILE):
            time.sleep(0.02)
    pair = {"key": {"type": "string"}, "value": {"type": "string"}}
    return [
        {"name": "put", "description": "Store value under key.",
         "inputSchema": {"type": "object", "properties": pair, "required": ["key", "value"]},
         "annotations": {"readOnlyHint": False, "destructiveHint": False}},
        {"name": "get", "description": description(),
         "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
         "outputSchema": {"type": "object", "properties": {"key": {"type": "string"}, "value": {}}},
         "annotations": {"readOnlyHint": True}},
    ]


def call(params):
    name, args = params.get("name"), params.get("arguments") or {}
    if CALLS:
        with open(CALLS, "a", encoding="utf-8") as f:
            f.write(f"{name}\n")
    if name == "get":
        out = {"key": args["key"], "value": load().get(args["key"])}
    elif name == "put":
        data = load()
        data[args["key"]] = args["value"]
        with open(STATE, "w", encoding="utf-8") as f:
            json.dump(data, f)
        with open(EFFECTS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": args["key"], "value": args["value"]}) + "\n")
        out = {"key": args["key"], "value": args["value"]}
    else:
        return None
    return {"content": [{"type": "text", "text": json.dumps(out)}], "structuredContent": out}


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "mutable-server", "version": "1.0.0"}}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return {"result": {"tools": tools()}}
    if method == "tools/call":
        result = call(params)
        if result is not None:
            return {"result": result}
        return {"error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    reply = {"jsonrpc": "2.0", "id": message["id"], **answer(message)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
