// Drives `rpr gate` with the official TypeScript SDK v2 client (npm `@modelcontextprotocol/client`
// 2.4.0, installed by .ci/install-peers), for tests/gate_matrix.rs.
//
// Usage: node gate_client_ts.cjs PEERS_DIR PLAN_JSON -- GATE_COMMAND [ARGS...]
//
// Connects over stdio in the client's default mode (`versionNegotiation` unset: the plain
// 2025 `initialize`), lists the tools, then runs the plan's steps in one session. PLAN_JSON is
// `{"elicitation": BOOL, "steps": [STEP...]}`; a STEP is `{"name", "tool", "arguments", "answer"}`
// (`answer`: what the Human Gate form of that step is answered: `accept` with `approve: true`,
// `accept-no`, `decline` or `cancel`).
// With `elicitation` the client declares form elicitation and answers `elicitation/create`.
//
// Prints one JSON report on stdout: `protocol_version`, `tools`, and `steps` (each with its
// `name`, `elicitations` and `result` {is_error, text, meta, structured} or `error`
// {code, message}); a session that does not connect is reported as `connect_error`.
'use strict';
const path = require('path');
const { createRequire } = require('module');

function resultOf(res) {
  const text = (res.content || [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
  return {
    is_error: Boolean(res.isError),
    text,
    meta: res._meta ?? null,
    structured: res.structuredContent ?? null,
  };
}

function answerFor(answer) {
  if (answer === 'accept') return { action: 'accept', content: { approve: true } };
  if (answer === 'accept-no') return { action: 'accept', content: { approve: false } };
  if (answer === 'decline') return { action: 'decline' };
  return { action: 'cancel' };
}

async function runStep(client, step, done, current) {
  current.answer = step.answer || 'cancel';
  current.seen = done.elicitations;
  try {
    done.result = resultOf(await client.callTool({ name: step.tool, arguments: step.arguments }));
  } catch (e) {
    if (typeof e.code === 'number') {
      done.error = { code: e.code, message: e.message, data: e.data ?? null };
    } else {
      done.exception = String(e && e.stack ? e.stack : e);
    }
  }
}

async function main() {
  const argv = process.argv.slice(2);
  const sep = argv.indexOf('--');
  if (sep !== 2) {
    throw new Error('usage: node gate_client_ts.cjs PEERS_DIR PLAN_JSON -- GATE_COMMAND [ARGS...]');
  }
  const [peers, planJson] = argv;
  const command = argv.slice(sep + 1);
  const plan = JSON.parse(planJson);
  const load = createRequire(path.join(peers, 'package.json'));
  const { Client } = load('@modelcontextprotocol/client');
  const { StdioClientTransport } = load('@modelcontextprotocol/client/stdio');

  const report = { steps: [] };
  const current = { answer: 'cancel', seen: [] };
  const capabilities = plan.elicitation === false ? {} : { elicitation: { form: {} } };
  const client = new Client({ name: 'rpr-gate-matrix-ts', version: '0.0.0' }, { capabilities });
  if (plan.elicitation !== false) {
    client.setRequestHandler('elicitation/create', async (request) => {
      current.seen.push({ message: request.params.message });
      return answerFor(current.answer);
    });
  }
  const transport = new StdioClientTransport({
    command: command[0],
    args: command.slice(1),
    env: { ...process.env },
    stderr: 'inherit',
  });
  try {
    await client.connect(transport);
    report.protocol_version = client.getNegotiatedProtocolVersion
      ? client.getNegotiatedProtocolVersion()
      : transport.protocolVersion ?? null;
    const info = client.getServerVersion();
    report.server_info = info ?? null;
    const tools = await client.listTools();
    report.tools = tools.tools.map((t) => t.name);
  } catch (e) {
    report.connect_error = String(e);
  }
  if (!report.connect_error) {
    for (const step of plan.steps) {
      const done = { name: step.name, elicitations: [] };
      report.steps.push(done);
      await runStep(client, step, done, current);
    }
  }
  await client.close().catch(() => {});
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => {
  process.stderr.write(`gate_client_ts: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
