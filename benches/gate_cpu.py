#!/usr/bin/env python3
"""gate_cpu.py RPR FAULT DIR N: N governed `get` reads through `RPR gate` in front of the
fault server (with SERVER=files: `read_text_file` of server-filesystem) (`RPR` an `rpr` binary, `FAULT` an `rpr-fault-server` binary, `DIR` emptied
and used for the database), after WARM reads (default 50); prints the gate's CPU (utime and
stime of its process, all its threads) and the wall time per read, in microseconds, and the CPU split into user and system time.

PREFIX runs the gate under a command, for instance
`PREFIX="valgrind --tool=callgrind --callgrind-out-file=OUT"`: instructions are repeatable
where seconds are not, and the difference of two runs (N and a larger N) divided by the
difference in N is the instructions of one read (docs/gate.md, "Cost")."""
import json, os, subprocess, sys, time, shutil
rpr, fault, d, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
pol = os.path.join(d, "policy.json")
if os.environ.get("SERVER") == "files":
    # server-filesystem (RPR_PEERS_DIR, default target/peers) reading one small file.
    peers = os.environ.get("RPR_PEERS_DIR", "target/peers")
    root = os.path.join(d, "root"); os.makedirs(root)
    open(os.path.join(root, "a.txt"), "w").write("hello\n")
    name, tool, arguments = "files", "read_text_file", {"path": os.path.join(root, "a.txt")}
    server = ["node", os.path.join(peers, "node_modules/.bin/mcp-server-filesystem"), root]
else:
    name, tool, arguments = "faults", "get", {"key": "k"}
    server = [fault, "--state", os.path.join(d, "state.json"), "--effects", os.path.join(d, "effects.jsonl")]
json.dump({"servers": {name: {tool: {"read_only": True}}}}, open(pol, "w"))
argv = os.environ.get("PREFIX", "").split() + [rpr, "gate", "--database", os.path.join(d, "rpr.db"),
        "--policy", pol, "--name", name, "--"] + server
# STDERR=pipe: the gate's stderr a pipe this script reads (as an MCP host keeps a server's
# log), instead of /dev/null.
piped = os.environ.get("STDERR") == "pipe"
p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE if piped else subprocess.DEVNULL)
if piped:
    import threading
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
i = 0
def req(method, params):
    global i
    i += 1
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    while True:
        line = json.loads(p.stdout.readline())
        if line.get("id") == i:
            return line
req("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "d", "version": "1"}})
p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); p.stdin.flush()
def cpu():
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) / os.sysconf("SC_CLK_TCK"), int(f[12]) / os.sysconf("SC_CLK_TCK")
for _ in range(int(os.environ.get("WARM", "50"))):
    r = req("tools/call", {"name": tool, "arguments": arguments})
    assert "result" in r and not r["result"].get("isError"), r
c0, t0 = cpu(), time.perf_counter()
for _ in range(n):
    r = req("tools/call", {"name": tool, "arguments": arguments})
t1, c1 = time.perf_counter(), cpu()
assert "result" in r and not r["result"].get("isError"), r
p.stdin.close(); p.wait()
user, system = 1e6 * (c1[0] - c0[0]) / n, 1e6 * (c1[1] - c0[1]) / n
print(f"cpu_us {user + system:.0f} wall_us {1e6*(t1-t0)/n:.0f} user_us {user:.0f} system_us {system:.0f}")
