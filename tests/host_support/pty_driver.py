"""Runs a command under a pseudo-terminal and answers its prompts, like a person would.

usage: pty_driver.py ARGV_JSON SCRIPT_JSON
  ARGV_JSON    the command, as a JSON array
  SCRIPT_JSON  a JSON array of [expected text, answer] pairs: wait until the expected
               text appears in the output (after the previous one), then type the answer

Prints {"output": everything the terminal showed, "code": exit status} as JSON. On a
timeout or an early end of output it kills the command and exits 1 with the output.
"""
import json
import os
import pty
import select
import signal
import sys
import time

argv, script = json.loads(sys.argv[1]), json.loads(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)

out = b""


def fail(why):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    sys.exit("%s; the terminal showed:\n%s" % (why, out.decode(errors="replace")))


def read(timeout):
    global out
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return None
    try:
        chunk = os.read(fd, 4096)
    except OSError:  # EIO: the command closed the terminal
        chunk = b""
    out += chunk
    return chunk


pos = 0
for expected, answer in script:
    deadline = time.time() + 60
    while expected.encode() not in out[pos:]:
        left = deadline - time.time()
        if left <= 0:
            fail("timed out waiting for %r" % expected)
        chunk = read(left)
        if chunk == b"":
            fail("the output ended before %r" % expected)
    pos = out.index(expected.encode(), pos) + len(expected)
    os.write(fd, answer.encode())

deadline = time.time() + 60
while True:
    left = deadline - time.time()
    if left <= 0:
        fail("timed out waiting for the command to end")
    if read(left) == b"":
        break
_, status = os.waitpid(pid, 0)
print(json.dumps({"output": out.decode(errors="replace"), "code": os.waitstatus_to_exitcode(status)}))
