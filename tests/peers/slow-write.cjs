// A Node preload for @modelcontextprotocol/server-filesystem, used by the chaos soak
// (tests/chaos_support): `node --require tests/peers/slow-write.cjs mcp-server-filesystem ROOT`.
//
// server-filesystem's `write_file` handler validates the path, then calls
// `writeFileContent` (dist/lib.js), which performs the write with the default export of
// `fs/promises`:
//   * a new file: `fs.writeFile(path, content, {flag: 'wx'})`;
//   * an existing file ('wx' fails with EEXIST): `fs.writeFile(<path>.<32 hex>.tmp, content)`
//     then `fs.rename(tmp, path)`.
// That default export is the object `require('fs/promises')` returns, and the handler reads
// `fs.writeFile` at call time, so replacing the two functions here changes what it calls.
//
// * RPR_SLOW_WRITE_MS: the write waits this long after the handler started (the request's
//   arrival plus the path validation), so a server whose host was killed mid-call still
//   writes later if it survives. The wait is once per write: the temporary file of the
//   EEXIST path is not delayed again.
// * RPR_SLOW_WRITE_WHEN=after (tests/gate_matrix.rs): the write takes effect at once and its
//   answer waits RPR_SLOW_WRITE_MS instead, so a host that gives up first has sent a write that
//   took effect (its outcome is unknown to it). Default `before`: the wait comes first.
// * RPR_SLOW_WRITE_MATCH: only writes to a path containing this text wait (default: every
//   write).
// * RPR_EFFECTS_LOG: around each write that takes effect (the 'wx' write, or the rename
//   that puts the temporary file in place), two JSON lines are appended with O_APPEND and
//   fsync: {"step": "intent"} just before the syscall and {"step": "done"} just after (or
//   {"step": "failed"} when the syscall throws, as 'wx' does on an existing file), all
//   with "seq" (this process's count of writes, pairing the two), "how" ("create": the 'wx'
//   write, which fails on an existing file; "replace": the rename), "at" (ms since the
//   epoch), "pid", "parent" (the parent pid at start), "ppid" (the parent pid at that time:
//   another value means the server outlived its host), "path", "content". A kill can land
//   between the syscall and the "done" line: an "intent" with no "done" is a write that may
//   or may not have happened, and the soak settles it by the file on disk (see
//   tests/chaos_support, "Figures").
'use strict';
const fs = require('fs');
const fsp = require('fs/promises');

const delayMs = Number(process.env.RPR_SLOW_WRITE_MS || 0);
const delayAfter = process.env.RPR_SLOW_WRITE_WHEN === 'after';
const delayMatch = process.env.RPR_SLOW_WRITE_MATCH || '';
const effectsLog = process.env.RPR_EFFECTS_LOG || '';
const parent = process.ppid;
const writeFile = fsp.writeFile;
const rename = fsp.rename;
const temporary = /\.[0-9a-f]{32}\.tmp$/;
const staged = new Map(); // temporary path -> content
let seq = 0;

function effect(step, n, path, content, how) {
  if (!effectsLog) {
    return;
  }
  const line = JSON.stringify({
    step,
    seq: n,
    how,
    at: Date.now(),
    pid: process.pid,
    parent,
    ppid: process.ppid,
    path,
    content: String(content),
  }) + '\n';
  const flags = fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT;
  const fd = fs.openSync(effectsLog, flags, 0o644);
  try {
    fs.writeSync(fd, line);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether a write to `path` waits RPR_SLOW_WRITE_MS at this point (`when`). */
function waits(path, when) {
  return delayMs > 0 && when === (delayAfter ? 'after' : 'before') && path.includes(delayMatch);
}

function sleep() {
  return new Promise((resolve) => setTimeout(resolve, delayMs));
}

fsp.writeFile = async function slowWriteFile(file, data, options) {
  const path = String(file);
  if (temporary.test(path)) {
    await writeFile.call(this, file, data, options);
    staged.set(path, data);
    return;
  }
  if (waits(path, 'before')) {
    await sleep();
  }
  // Synchronously, between its two log lines (no event-loop turn in between).
  const n = ++seq;
  effect('intent', n, path, data, 'create');
  try {
    fs.writeFileSync(file, data, options);
  } catch (e) {
    // 'wx' on an existing file: nothing written; the handler goes on to its rename path.
    effect('failed', n, path, data, 'create');
    throw e;
  }
  effect('done', n, path, data, 'create');
  if (waits(path, 'after')) {
    await sleep();
  }
};

fsp.rename = async function loggedRename(from, to) {
  const key = String(from);
  if (!staged.has(key)) {
    await rename.call(this, from, to);
    return;
  }
  const content = staged.get(key);
  staged.delete(key);
  const n = ++seq;
  effect('intent', n, String(to), content, 'replace');
  try {
    fs.renameSync(from, to);
  } catch (e) {
    effect('failed', n, String(to), content, 'replace');
    throw e;
  }
  effect('done', n, String(to), content, 'replace');
  if (waits(String(to), 'after')) {
    await sleep();
  }
};
