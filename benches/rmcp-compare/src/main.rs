//! Raw `tools/call` round trip: `rpr::mcp::McpClient::call_tool` (sync, threads)
//! against the official Rust SDK `rmcp` 3.11.0 (async, tokio), in one process.
//!
//! Each client gets its own instance of the same server (ours: instance A, rmcp:
//! instance B) and the calls alternate between the two clients, swapping which goes
//! first on every iteration, so that machine noise hits both alike. Only the call is
//! timed: for rmcp the clock runs inside the async block, around the `.await`.
//!
//! Servers: `fault` (default) is `rpr-fault-server` (`put`/`get`, each instance with
//! its own state file), run from this binary itself (`rmcp-compare fault-server …`
//! calls `rpr::mcp::fault_server::run`, the same code as the `rpr-fault-server` binary),
//! built in release with it; `everything` is the npm `server-everything` (`echo`) from
//! `RPR_PEERS_DIR` or `../../target/peers`, run with `node`.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rpr::mcp::{McpClient, Reply, ServerCommand, SessionConfig};
use serde_json::{Value, json};

const USAGE: &str = "\
usage: rmcp-compare [--server fault|everything] [--calls N] [--warmup N]
  --server   fault (rpr-fault-server put/get, default) or everything (npm server-everything echo)
  --calls    timed calls per client and tool (default 2000)
  --warmup   untimed calls per client and tool first (default 200)
  env RPR_PEERS_DIR: where .ci/install-peers put the npm peers (default ../../target/peers)";

struct Options {
    server: String,
    calls: usize,
    warmup: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut opts = Options {
        server: "fault".into(),
        calls: 2000,
        warmup: 200,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--server" => opts.server = value()?,
            "--calls" => opts.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            "--warmup" => opts.warmup = value()?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !matches!(opts.server.as_str(), "fault" | "everything") {
        return Err(format!("unknown server {}", opts.server));
    }
    if opts.calls == 0 {
        return Err("--calls must be at least 1".into());
    }
    Ok(opts)
}

/// The program and arguments of one server instance.
struct Launch {
    program: PathBuf,
    args: Vec<String>,
}

fn find_node() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .ok_or_else(|| "node was not found on PATH".to_owned())
}

fn launch(server: &str, state: &Path) -> Result<Launch, String> {
    if server == "fault" {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        return Ok(Launch {
            program: exe,
            args: vec![
                "fault-server".into(),
                "--state".into(),
                state.display().to_string(),
            ],
        });
    }
    let peers = std::env::var_os("RPR_PEERS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/peers"),
        PathBuf::from,
    );
    let script = peers.join("node_modules/.bin/mcp-server-everything");
    if !script.exists() {
        return Err(format!(
            "{} is missing; run `bash .ci/install-peers` in the rpr crate",
            script.display()
        ));
    }
    Ok(Launch {
        program: find_node()?,
        args: vec![script.display().to_string(), "stdio".into()],
    })
}

/// The arguments of call `i` of `tool`.
fn arguments(tool: &str, i: usize) -> Value {
    match tool {
        "put" => json!({"key": format!("k{}", i % 16), "value": format!("value {i}")}),
        "get" => json!({"key": format!("k{}", i % 16)}),
        _ => json!({"message": format!("hello {i}")}),
    }
}

fn ours_call(client: &McpClient, tool: &str, args: &Value) -> Result<Duration, String> {
    let start = Instant::now();
    let reply = client
        .call_tool(tool, args, Duration::from_secs(30))
        .map_err(|e| format!("rpr: {e}"))?;
    let elapsed = start.elapsed();
    match reply {
        Reply::Result(result) if result.get("isError") != Some(&Value::Bool(true)) => Ok(elapsed),
        other => Err(format!("rpr: unexpected reply {other:?}")),
    }
}

type RmcpClient = rmcp::service::RunningService<rmcp::RoleClient, ()>;

fn rmcp_call(
    rt: &tokio::runtime::Runtime,
    client: &RmcpClient,
    tool: &'static str,
    args: &Value,
) -> Result<Duration, String> {
    let Value::Object(map) = args.clone() else {
        return Err("arguments must be an object".into());
    };
    let params = CallToolRequestParams::new(tool).with_arguments(map);
    rt.block_on(async {
        let start = Instant::now();
        let result = client
            .call_tool(params)
            .await
            .map_err(|e| format!("rmcp: {e}"))?;
        let elapsed = start.elapsed();
        if result.is_error == Some(true) {
            return Err(format!("rmcp: tool error {result:?}"));
        }
        Ok(elapsed)
    })
}

struct Stats {
    median: Duration,
    p90: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(samples: &mut [Duration]) -> Stats {
    samples.sort_unstable();
    let n = samples.len();
    let at = |q: usize| samples[(n * q / 100).min(n - 1)];
    let total: Duration = samples.iter().sum();
    Stats {
        median: at(50),
        p90: at(90),
        p99: at(99),
        mean: total / u32::try_from(n).unwrap_or(u32::MAX),
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}", a.as_secs_f64() / b.as_secs_f64())
}

fn run(opts: &Options) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("rmcp-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = compare(opts, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn compare(opts: &Options, dir: &Path) -> Result<(), String> {
    let a = launch(&opts.server, &dir.join("a.json"))?;
    let b = launch(&opts.server, &dir.join("b.json"))?;
    let tools: &[&'static str] = if opts.server == "fault" {
        &["put", "get"]
    } else {
        &["echo"]
    };

    // Instance A: our client (empty environment, as always).
    let ours = McpClient::connect(
        &ServerCommand::new(&a.program).args(&a.args),
        &SessionConfig::default(),
    )
    .map_err(|e| format!("rpr connect: {e}"))?;

    // Instance B: rmcp, also with an empty environment and stderr discarded.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let command = tokio::process::Command::new(&b.program).configure(|c| {
        c.args(&b.args).env_clear();
    });
    let _context = rt.enter();
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("rmcp spawn: {e}"))?;
    let theirs: RmcpClient = rt
        .block_on(().serve(transport))
        .map_err(|e| format!("rmcp connect: {e}"))?;

    println!(
        "server: {} (rpr: {}, rmcp: {}); {} timed + {} warm-up calls per client and tool, alternating",
        opts.server,
        ours.server().identity(),
        theirs
            .peer_info()
            .and_then(|i| i.server_info.clone())
            .map_or_else(|| "?".to_owned(), |s| format!("{}@{}", s.name, s.version)),
        opts.calls,
        opts.warmup,
    );
    println!();
    println!(
        "| tool | client | median µs | p90 µs | p99 µs | mean µs | median ours/rmcp | p90 ours/rmcp |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for &tool in tools {
        let mut mine = Vec::with_capacity(opts.calls);
        let mut other = Vec::with_capacity(opts.calls);
        for i in 0..opts.warmup + opts.calls {
            let args = arguments(tool, i);
            let (x, y) = if i % 2 == 0 {
                let x = ours_call(&ours, tool, &args)?;
                (x, rmcp_call(&rt, &theirs, tool, &args)?)
            } else {
                let y = rmcp_call(&rt, &theirs, tool, &args)?;
                (ours_call(&ours, tool, &args)?, y)
            };
            if i >= opts.warmup {
                mine.push(x);
                other.push(y);
            }
        }
        let (m, o) = (stats(&mut mine), stats(&mut other));
        println!(
            "| {tool} | rpr | {} | {} | {} | {} | {} | {} |",
            micros(m.median),
            micros(m.p90),
            micros(m.p99),
            micros(m.mean),
            ratio(m.median, o.median),
            ratio(m.p90, o.p90),
        );
        println!(
            "| {tool} | rmcp | {} | {} | {} | {} | | |",
            micros(o.median),
            micros(o.p90),
            micros(o.p99),
            micros(o.mean),
        );
    }

    let report = ours.shutdown();
    rt.block_on(theirs.cancel())
        .map_err(|e| format!("rmcp shutdown: {e}"))?;
    eprintln!(
        "rpr server shut down: {:?} in {:?}",
        report.stage, report.elapsed
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("fault-server") {
        return rpr::mcp::fault_server::run(args.into_iter().skip(1));
    }
    let opts = match parse(&args) {
        Ok(opts) => opts,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("rmcp-compare: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("rmcp-compare: {message}");
            ExitCode::FAILURE
        }
    }
}
