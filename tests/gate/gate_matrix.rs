//! The gate's proof matrix (issue 26): every client people run in front of `rpr gate`,
//! times every kind of server behind it, each cell a property asserted on the client's
//! answer, the pathway database and the server's own evidence. Nothing mocked; the peers
//! are the pinned ones `.ci/install-peers` installs (a missing one fails, never skips).
//!
//! Clients: the Python SDK's `Client` in its default mode (it probes `server/discover`)
//! and pinned to 2026-07-28, its `ClientSession`, the TypeScript SDK v2 client, the rmcp
//! client, and inspector-cli (no elicitation: its gated calls are approved with
//! `rpr approve`, or denied with `rpr deny`, and made again). Servers: server-filesystem,
//! server-everything, the fault server, the Python SDK's `MCPServer` (dual-era), and the
//! fault server answering 2025-06-18.
//!
//! Cells: **connect** (the client's era; the gate's pins record the server's era),
//! **list**, **read** (the server's content; completed after one attempt), **gated write
//! approved** (one form or multi round-trip request, or `rpr approve`; completed after one
//! attempt and its readback; the server did it once), **declined** (denied; nothing sent;
//! the server did nothing), **unknown never re-sent** (a write whose answer never comes
//! in time or whose server crashed after the effect: write status unknown after one
//! attempt; the identical call again names the same pathway, says it will not be sent
//! again, and the server did it once). See `gate_matrix_parts/servers.rs` for what each
//! server's cells call and how its effects are seen.
//!
//! The table is written to stderr directly (not through the test harness's capture), so
//! it is in CI's log on every run: `cargo test --test gate gate_matrix::`.

#[path = "gate_matrix_parts/cells.rs"]
mod cells;
#[path = "gate_matrix_parts/clients.rs"]
mod clients;
use crate::interop_support;
#[path = "gate_matrix_parts/model.rs"]
mod model;
#[path = "gate_matrix_parts/servers.rs"]
mod servers;

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

use model::{Cell, Client, Expected, Judged, Server, Verdict};
use servers::Setup;

/// Cells expected to fail, and why: the ONE list. Each entry is a server, the clients
/// (empty: every client) and its cells that fail for that reason. A listed cell that
/// passes fails the test, so an entry cannot outlive its reason: delete it when the
/// work it waits for is merged.
const EXPECTED_FAILURES: &[(Server, &[Client], &[Cell], Expected)] = &[];

fn expected(client: Client, server: Server, cell: Cell) -> Option<Expected> {
    EXPECTED_FAILURES
        .iter()
        .find(|(s, clients, cells, _)| {
            *s == server
                && (clients.is_empty() || clients.contains(&client))
                && cells.contains(&cell)
        })
        .map(|entry| entry.3)
}

/// Runs one client against one server and judges its cells.
fn pair(client: Client, server: Server) -> Vec<Judged> {
    let setup = Setup::new(server, client);
    let seen = clients::drive(client, &setup);
    cells::judge(client, &setup, &seen)
        .into_iter()
        .map(|(cell, verdict)| Judged {
            client,
            server,
            cell,
            expected: expected(client, server, cell),
            verdict,
        })
        .collect()
}

/// Writes past the harness's capture, so the table shows in CI's log.
fn show(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

#[test]
fn every_client_with_every_server_connects_lists_reads_and_writes_once() {
    let started = Instant::now();
    let jobs: Mutex<Vec<(Client, Server)>> = Mutex::new(
        Client::ALL
            .iter()
            .flat_map(|&c| Server::ALL.iter().map(move |&s| (c, s)))
            .rev()
            .collect(),
    );
    let judged = Mutex::new(Vec::new());
    // Three pairs at a time: the clients and servers mostly wait (on node, on Python,
    // on the call timeouts of the unknown cells).
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let Some((client, server)) = jobs.lock().unwrap().pop() else {
                        break;
                    };
                    let cells = pair(client, server);
                    judged.lock().unwrap().extend(cells);
                }
            });
        }
    });
    let mut judged = judged.into_inner().unwrap();
    judged.sort_by_key(Judged::order);
    let passed = judged.iter().filter(|j| j.verdict == Verdict::Pass).count();
    show(&format!(
        "\n## rpr gate: the client × server matrix (issue 26)\n\n{}\n{passed} of {} cells \
         pass; {} fail as listed in EXPECTED_FAILURES; {} n/a ({:.0} s)\n\n",
        model::table(&judged),
        judged.len(),
        judged
            .iter()
            .filter(|j| j.expected.is_some() && matches!(j.verdict, Verdict::Fail(_)))
            .count(),
        judged
            .iter()
            .filter(|j| matches!(j.verdict, Verdict::NotApplicable(_)))
            .count(),
        started.elapsed().as_secs_f64(),
    ));
    let problems: Vec<String> = judged.iter().filter_map(Judged::problem).collect();
    assert!(
        problems.is_empty(),
        "{} cell(s) of the matrix failed:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
