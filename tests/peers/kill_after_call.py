"""A stdio relay that kills the MCP server behind it in the middle of one tool call.

usage: kill_after_call.py (--before | --after) TOOL [--once MARKER] COMMAND [ARGS...]

Runs COMMAND as the server and relays newline-delimited JSON-RPC both ways. On the
first `tools/call` of TOOL:
  --before  the call is not passed on: the server is killed and the relay exits, so the
            client wrote its request but the tool never ran;
  --after   the call is passed on, and when the server's reply to it arrives (the effect
            has happened) the server is killed and the relay exits without passing the
            reply on: the reply is lost.
Either way the client sees its stdout close mid-call. With `--once MARKER` it kills only
while the file MARKER does not exist, and creates it when it does: a later process started
the same way (`rpr` starts a pathway's server as its call did) relays everything. Used by
`.ci/host-real-mode`.
"""
import json
import os
import subprocess
import sys
import threading

mode, tool, command = sys.argv[1], sys.argv[2], sys.argv[3:]
marker = None
if command[:1] == ["--once"]:
    if len(command) < 2:
        sys.exit(__doc__)
    marker, command = command[1], command[2:]
if mode not in ("--before", "--after") or not command:
    sys.exit(__doc__)
server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
pending = None  # the id of the call whose reply must be lost


def armed():
    """Whether this relay may still kill (always, without `--once`); claims the marker."""
    if marker is None:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def die():
    server.kill()
    server.wait()
    os._exit(3)


def client_to_server():
    global pending
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        hit = (
            isinstance(msg, dict)
            and msg.get("method") == "tools/call"
            and (msg.get("params") or {}).get("name") == tool
            and pending is None
        )
        hit = hit and armed()
        if hit and mode == "--before":
            die()
        if hit:
            pending = msg.get("id")
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()


threading.Thread(target=client_to_server, daemon=True).start()
for line in server.stdout:
    try:
        msg = json.loads(line)
    except ValueError:
        msg = None
    if pending is not None and isinstance(msg, dict) and msg.get("id") == pending and "method" not in msg:
        die()
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
sys.exit(server.wait())
