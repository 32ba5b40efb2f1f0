//! The chaos soak, long run (issue 8): `cargo bench --bench chaos -- --calls 10000 --hosts 4
//! --seed N` prints the table of figures; exit status 1 when a figure that must be 0 is not.
//! The driver is `tests/chaos_support` (what it does and measures is described there and in
//! docs/host.md, "The chaos soak"); its CI variant is `tests/chaos.rs`.

#[path = "../tests/chaos_support/mod.rs"]
mod chaos_support;

use std::process::ExitCode;

use chaos_support::Options;

const USAGE: &str = "\
usage: cargo bench --bench chaos -- [--calls N] [--hosts N] [--seed N] [--slow-write-ms N]
                                    [--host-kill-percent N] [--server-kill-ms N]
                                    [--stop-percent N] [--lease SECONDS]
                                    [--other-host-percent N] [--postgres URL]
                                    [--stop-after-secs N]
                                    [--verify-every N] [--max-steps N] [--quiet] [--keep]
                                    [--recount DIR]
defaults: --calls 1000 --hosts 4 --seed 1 --slow-write-ms 2500 --host-kill-percent 50
          --server-kill-ms 2500 --stop-percent 15 --lease 2 --other-host-percent 50
          --verify-every 25 --max-steps 40
--stop-percent: dispatching hosts not killed that are SIGSTOPped, held past their lease
--other-host-percent: hosts run on another host name (a UTS namespace; needs root)
--postgres URL: the database in a fresh schema of that PostgreSQL server (build with
  --features postgres); without it, a SQLite file
--stop-after-secs N: no new call after N seconds; the calls started are settled and counted
--recount DIR counts the outcome figures of a kept run again (same --calls and --seed)
needs node on PATH and server-filesystem in RPR_PEERS_DIR or target/peers (bash .ci/install-peers)";

fn options(args: &[String]) -> Result<(Options, Option<String>), String> {
    let mut o = Options {
        calls: 1000,
        hosts: 4,
        verify_every: 25,
        progress: true,
        ..Options::default()
    };
    let mut recount = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--recount" {
            recount = Some(it.next().ok_or("`--recount` needs a directory")?.clone());
            continue;
        }
        if flag == "--postgres" {
            o.postgres = Some(it.next().ok_or("`--postgres` needs a URL")?.clone());
            continue;
        }
        let mut number = || -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("`{flag}` needs a number"))
        };
        let size = |n: u64| usize::try_from(n).map_err(|e| e.to_string());
        match flag.as_str() {
            // cargo bench passes `--bench` to every bench program.
            "--bench" => {}
            "--calls" => o.calls = size(number()?)?,
            "--hosts" => o.hosts = size(number()?)?,
            "--seed" => o.seed = number()?,
            "--slow-write-ms" => o.slow_write_ms = number()?,
            "--host-kill-percent" => o.host_kill_percent = number()?.min(100),
            "--server-kill-ms" => o.server_kill_ms = number()?,
            "--stop-percent" => o.stop_percent = number()?.min(100),
            "--lease" => o.lease_secs = number()?.max(1),
            "--other-host-percent" => o.other_host_percent = number()?.min(100),
            "--stop-after-secs" => o.stop_after = Some(std::time::Duration::from_secs(number()?)),
            "--verify-every" => o.verify_every = size(number()?)?,
            "--max-steps" => o.max_steps = size(number()?)?,
            "--quiet" => o.progress = false,
            "--keep" => o.keep = true,
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    Ok((o, recount))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (options, recount) = match options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("chaos: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match &recount {
        Some(dir) => chaos_support::recount(&options, std::path::Path::new(dir)),
        None => chaos_support::run(&options),
    };
    match result {
        Ok(report) => {
            println!("{}", report.table());
            let failures = report.failures();
            if failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                println!("FAILED: {}", failures.join("; "));
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("chaos: the soak could not run: {e}");
            ExitCode::FAILURE
        }
    }
}
