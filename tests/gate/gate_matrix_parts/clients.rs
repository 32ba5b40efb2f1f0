//! Each client of the matrix, driving the gate through one server's steps, and what it
//! saw, in one shape for every client.
//!
//! The script clients (`tests/peers/gate_client.py`, `gate_client_ts.cjs`, the rmcp client's
//! `--plan` mode) make every call of a plan in one session: one gate process per client
//! and server (two for the fault servers, whose unknown needs a server that crashes after
//! the effect). inspector-cli makes one call per process and cannot answer a form, so its
//! gated calls are approved (or denied) with `rpr approve` (`rpr deny`) and made again.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use super::interop_support::peers;
use super::model::{Client, NO_SESSION};
use super::servers::{Call, Setup};

/// How long one client process may take.
const DEADLINE: Duration = Duration::from_secs(150);

/// A tool call's answer, as any client reports it.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) is_error: bool,
    pub(crate) text: String,
    /// The pathway named in `_meta["dev.rpr/pathway"]`.
    pub(crate) pathway: Option<String>,
}

/// One step of a session: the answer (or why there is none), and the forms shown.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) answer: Result<Answer, String>,
    pub(crate) forms: Vec<String>,
}

/// What a client saw: its session (protocol version, tools) and each step by name.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) connect: Option<Result<Connected, String>>,
    pub(crate) steps: HashMap<String, Step>,
}

#[derive(Debug, Clone)]
pub(crate) struct Connected {
    pub(crate) protocol: Option<String>,
    pub(crate) tools: Vec<String>,
}

impl Seen {
    /// The step `name`, or why it has none.
    pub(crate) fn step(&self, name: &str) -> Result<&Step, String> {
        if let Some(step) = self.steps.get(name) {
            return Ok(step);
        }
        match &self.connect {
            Some(Err(_)) => Err(format!("{NO_SESSION} (see connect)")),
            _ => Err(format!("the client reported no step `{name}`")),
        }
    }
}

/// Runs `client` through every step against `setup`.
pub(crate) fn drive(client: Client, setup: &Setup) -> Seen {
    if client == Client::Inspector {
        return inspector(setup);
    }
    let mut main = vec![
        // A read asks nothing; were it asked, `cancel` would leave it unsent.
        step("read", &setup.read, "cancel"),
        step("approved", &setup.approved, "accept"),
        step("declined", &setup.declined, "decline"),
    ];
    let mut second = Vec::new();
    if let Some(unknown) = &setup.unknown {
        let steps = [
            step("unknown", unknown, "accept"),
            step("unknown-repeat", unknown, "accept"),
        ];
        if setup.unknown_gate == setup.gate {
            main.extend(steps);
        } else {
            second.extend(steps);
        }
    }
    let mut seen = script(client, &setup.gate, &main);
    if !second.is_empty() {
        let more = script(client, &setup.unknown_gate, &second);
        for (name, step) in more.steps {
            seen.steps.insert(name, step);
        }
        if let Some(Err(why)) = more.connect {
            let why = match &seen.connect {
                Some(Ok(_)) => format!("the second session did not connect: {why}"),
                _ => format!("{NO_SESSION} (see connect)"),
            };
            for name in ["unknown", "unknown-repeat"] {
                seen.steps.entry(name.into()).or_insert(Step {
                    answer: Err(why.clone()),
                    forms: Vec::new(),
                });
            }
        }
    }
    seen
}

/// A step of a script client's plan: `call`, and what its form is answered.
fn step(name: &str, call: &Call, answer: &str) -> Value {
    json!({"name": name, "tool": call.tool, "arguments": call.args, "answer": answer})
}

// ---------------------------------------------------------------------------
// The script clients
// ---------------------------------------------------------------------------

/// One session of a script client through `gate`, making the calls of `steps`.
fn script(client: Client, gate: &[String], steps: &[Value]) -> Seen {
    let plan = json!({"elicitation": true, "steps": steps}).to_string();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let p = peers();
    let mut cmd = match client {
        Client::PyAuto | Client::Py2026 | Client::PySession => {
            let mode = match client {
                Client::PyAuto => "auto",
                Client::Py2026 => "2026-07-28",
                _ => "session",
            };
            let mut cmd = Command::new(&p.python);
            cmd.arg(here.join("gate_client.py"))
                .args(["--client", mode, "--plan", &plan, "--"]);
            cmd
        }
        Client::Ts => {
            let mut cmd = Command::new(&p.node);
            cmd.arg(here.join("gate_client_ts.cjs"))
                .arg(&p.dir)
                .args([&plan, "--"]);
            cmd
        }
        Client::Rmcp => {
            let mut cmd = Command::new(p.dir.join("rmcp-client/release/rmcp-client"));
            cmd.args(["--plan", &plan]);
            cmd
        }
        Client::Inspector => unreachable!("inspector-cli runs one call per process"),
    };
    cmd.args(gate);
    let out = match run(&mut cmd) {
        Ok(out) => out,
        Err(why) => {
            return Seen {
                connect: Some(Err(why)),
                ..Seen::default()
            };
        }
    };
    let Some(report) = out.report() else {
        return Seen {
            connect: Some(Err(format!(
                "the client printed no report ({}); stderr: {}",
                out.status,
                tail(&out.stderr)
            ))),
            ..Seen::default()
        };
    };
    from_report(&report, &out.stderr)
}

/// A script client's report as [`Seen`].
fn from_report(report: &Value, stderr: &str) -> Seen {
    let mut seen = Seen::default();
    if let Some(why) = report["connect_error"].as_str() {
        seen.connect = Some(Err(format!("{why}; stderr: {}", tail(stderr))));
        return seen;
    }
    let tools = report["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().or_else(|| t["name"].as_str()))
        .map(str::to_owned)
        .collect();
    seen.connect = Some(Ok(Connected {
        protocol: report["protocol_version"].as_str().map(str::to_owned),
        tools,
    }));
    for step in report["steps"].as_array().into_iter().flatten() {
        let forms = step["elicitations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| f["message"].as_str().unwrap_or_default().to_owned())
            .collect();
        let answer = if step.get("result").is_some() {
            Ok(answer(&step["result"]))
        } else {
            Err(format!(
                "no result: {}{}",
                step.get("error").or(step.get("exception")).unwrap_or(step),
                report
                    .get("session_error")
                    .map(|e| format!(" (session: {e})"))
                    .unwrap_or_default()
            ))
        };
        let name = step["name"].as_str().unwrap_or_default().to_owned();
        seen.steps.insert(name, Step { answer, forms });
    }
    seen
}

/// A tool result as any client reports it: `{is_error, text, meta}` (the Python and
/// TypeScript scripts) or the result itself (`isError`, `content`, `_meta`).
fn answer(result: &Value) -> Answer {
    let is_error = result["is_error"]
        .as_bool()
        .or_else(|| result["isError"].as_bool())
        .unwrap_or(false);
    let text = result["text"].as_str().map_or_else(
        || {
            result["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        },
        str::to_owned,
    );
    let meta = if result["meta"].is_object() {
        &result["meta"]
    } else {
        &result["_meta"]
    };
    Answer {
        is_error,
        text,
        pathway: meta["dev.rpr/pathway"]["id"].as_str().map(str::to_owned),
    }
}

// ---------------------------------------------------------------------------
// inspector-cli
// ---------------------------------------------------------------------------

/// inspector-cli: `tools/list`, then each call in a process of its own; a held call is
/// approved (or denied) with `rpr` and made again.
fn inspector(setup: &Setup) -> Seen {
    let mut seen = Seen::default();
    let listed = inspect(&setup.gate, &["--method", "tools/list"]);
    seen.connect = Some(listed.map(|list| {
        Connected {
            protocol: None,
            tools: list["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect(),
        }
    }));
    if matches!(seen.connect, Some(Err(_))) {
        return seen;
    }
    let mut call = |name: &str, gate: &[String], call: &Call| {
        let answer = inspect_call(gate, call);
        seen.steps.insert(
            name.to_owned(),
            Step {
                answer: answer.clone(),
                forms: Vec::new(),
            },
        );
        answer
    };
    let _ = call("read", &setup.gate, &setup.read);
    let held = call("approved-held", &setup.gate, &setup.approved);
    if decide(setup, &held, "approve").is_ok() {
        let _ = call("approved", &setup.gate, &setup.approved);
    }
    let held = call("declined", &setup.gate, &setup.declined);
    let _ = decide(setup, &held, "deny");
    if let Some(unknown) = &setup.unknown {
        let held = call("unknown-held", &setup.unknown_gate, unknown);
        if decide(setup, &held, "approve").is_ok() {
            let _ = call("unknown", &setup.unknown_gate, unknown);
            let _ = call("unknown-repeat", &setup.unknown_gate, unknown);
        }
    }
    seen
}

/// `rpr approve|deny --database DB --pathway ID --as alice` for the pathway of a held
/// call.
pub(crate) fn decide(
    setup: &Setup,
    held: &Result<Answer, String>,
    verb: &str,
) -> Result<(), String> {
    let id = held
        .as_ref()
        .map_err(Clone::clone)?
        .pathway
        .clone()
        .ok_or("the held call names no pathway")?;
    let db = setup.db().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_rpr"))
        .args([verb, "--database", &db, "--pathway", &id, "--as", "alice"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("rpr {verb}: {e}"))?;
    // `approve` of a gate pathway: 3 (the call is still to be made); `deny`: 4 (denied).
    let expected = if verb == "deny" { 4 } else { 3 };
    if out.status.code() == Some(expected) {
        Ok(())
    } else {
        Err(format!(
            "rpr {verb} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// One `tools/call` by inspector-cli.
fn inspect_call(gate: &[String], call: &Call) -> Result<Answer, String> {
    let mut args = vec![
        "--method".to_owned(),
        "tools/call".into(),
        "--tool-name".into(),
        call.tool.into(),
    ];
    for (key, value) in call.args.as_object().into_iter().flatten() {
        // As JSON, which inspector-cli parses back: a string stays a string.
        args.extend(["--tool-arg".to_owned(), format!("{key}={value}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    inspect(gate, &args).map(|result| answer(&result))
}

/// `node index.js RPR METHOD_ARGS… -- GATE_ARGS…` from inspector-cli's `build` directory
/// (it resolves `../package.json` against the current directory); its JSON output.
fn inspect(gate: &[String], method_args: &[&str]) -> Result<Value, String> {
    let p = peers();
    let out = run(Command::new(&p.node)
        .current_dir(
            p.dir
                .join("node_modules/@modelcontextprotocol/inspector-cli/build"),
        )
        .arg("index.js")
        .arg(&gate[0])
        .args(method_args)
        .arg("--")
        .args(&gate[1..]))?;
    if !out.status.success() {
        return Err(format!(
            "inspector-cli failed ({}): {}",
            out.status,
            tail(&out.stderr)
        ));
    }
    serde_json::from_str(&out.stdout)
        .map_err(|e| format!("inspector-cli printed no JSON ({e}): {}", tail(&out.stdout)))
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

struct Output {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

impl Output {
    /// The last stdout line, parsed.
    fn report(&self) -> Option<Value> {
        serde_json::from_str(self.stdout.lines().last()?).ok()
    }
}

/// The last 2,000 characters of `text`, on one line.
fn tail(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let start = chars.len().saturating_sub(2000);
    chars[start..]
        .iter()
        .collect::<String>()
        .replace('\n', " ⏎ ")
}

fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `cmd` in its own process group; past [`DEADLINE`] kills the group.
fn run(cmd: &mut Command) -> Result<Output, String> {
    use std::os::unix::process::CommandExt;
    let what = cmd.get_program().display().to_string();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("spawning {what}: {e}"))?;
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap());
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait();
        return Err(format!(
            "{what} did not finish within {DEADLINE:?}; stderr: {}",
            tail(&err.join().unwrap_or_default())
        ));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}
