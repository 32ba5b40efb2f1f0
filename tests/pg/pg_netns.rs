//! Hosts on separate "machines" sharing one PostgreSQL database (issue 11): each host process
//! runs in a network namespace of its own (`ip netns exec`), with a host name of its own
//! (a UTS namespace, `unshare --uts`), and reaches the server only over a veth pair whose
//! other end joins the bridge `rpr-br0` in the root namespace, where `.ci/postgres` put the
//! server's second address, 10.231.0.1: a real network path, not loopback (each host checks
//! that loopback does not reach the server from where it is). So a test can cut one host's
//! network while its call is in flight (`ip link set … down` on its veth's root end), which
//! a process-level test cannot: the host runs on, its heartbeat included, and cannot reach
//! the database.
//!
//! Needs the `postgres` feature, `RPR_PG_URL`, root, `ip netns`, `unshare`, and the
//! server on the bridge (`eval "$(bash .ci/postgres)"` run as root prints
//! `RPR_PG_NETNS_ADDR`). Where that is missing, each test fails saying so when `CI=true`,
//! and otherwise prints `not run: needs root and ip netns (…)` and returns.
//!
//! Each test's namespaces, links and subnet are its own (named after the test process and
//! a counter, the subnet `10.231.S.0/24` reserved by a lock file), and are removed when the
//! test ends, also when it fails ([`Net`]'s `Drop`).
#![cfg(feature = "postgres")]

use crate::common;
use crate::pg_support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::*;
use pg_support::env;
use rpr::{Runtime, StoredPathway};
use serde_json::Value;

/// The server's address on the bridge (`.ci/postgres`).
const SERVER: &str = "10.231.0.1";

/// The cut-off host's lease; its heartbeat renews it every third of it while it can.
const LEASE: Duration = Duration::from_millis(1500);

/// Connection parameters (tokio-postgres's, in the URL; seconds) that make a connection to
/// an unreachable server fail within a few seconds instead of TCP's retransmission limit.
const BOUNDED: &str =
    "keepalives_idle=1&keepalives_interval=1&keepalives_retries=2&tcp_user_timeout=2";

// ---------------------------------------------------------------------------
// The machines.

/// Runs `ip` (or another command) and returns its stdout; panics with its stderr.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One "machine": a network namespace with a veth pair to the bridge and a host name.
struct Machine {
    ns: String,
    /// The veth end in the root namespace, a port of the bridge: down is a cut cable.
    link: String,
    addr: String,
    host: String,
}

/// The machines of one test, removed on drop (processes left in them are killed first, by
/// pid: only this test's children run there).
struct Net {
    machines: Vec<Machine>,
    /// The lock file reserving this test's subnet `10.231.S.0/24`.
    lease: PathBuf,
}

/// Reserves a free `10.231.S.0/24` (S in 1..=254) for this test: a lock file per subnet
/// in the temp dir holding its owner's pid (made whole, then linked into place, so it is
/// never seen empty); a file whose owner is gone is taken over.
fn reserve_subnet(seed: u32) -> (u32, PathBuf) {
    let dir = std::env::temp_dir().join("rpr-netns-subnets");
    std::fs::create_dir_all(&dir).unwrap();
    let mine = dir.join(format!("pid-{}-{seed}", std::process::id()));
    std::fs::write(&mine, std::process::id().to_string()).unwrap();
    for round in 0..2 {
        for k in 0..254 {
            let s = (seed + k) % 254 + 1;
            let path = dir.join(format!("10.231.{s}"));
            if std::fs::hard_link(&mine, &path).is_ok() {
                std::fs::remove_file(&mine).unwrap();
                return (s, path);
            }
            let owner = std::fs::read_to_string(&path).unwrap_or_default();
            if round == 0 && !PathBuf::from(format!("/proc/{owner}")).exists() {
                // A crashed run's: free it for the next round.
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    panic!(
        "no free subnet in 10.231.1.0 … 10.231.254.0 ({})",
        dir.display()
    )
}

impl Net {
    /// `n` machines, or why there can be none here.
    fn try_new(n: usize) -> Result<Self, String> {
        static TESTS: AtomicU32 = AtomicU32::new(0);
        let t = TESTS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        match std::env::var("RPR_PG_NETNS_ADDR") {
            Ok(a) if a == SERVER => {}
            Ok(a) => return Err(format!("RPR_PG_NETNS_ADDR is {a}, expected {SERVER}")),
            Err(_) => {
                return Err(
                    "RPR_PG_NETNS_ADDR is not set: the server is not on the bridge \
                     (`eval \"$(bash .ci/postgres)\"` as root puts it there)"
                        .into(),
                );
            }
        }
        let (subnet, lease) = reserve_subnet(pid.wrapping_mul(7).wrapping_add(t));
        let mut net = Self {
            machines: Vec::new(),
            lease,
        };
        for i in 0..n {
            let ns = format!("rpr-{pid}-{t}-h{i}");
            let add = Command::new("ip").args(["netns", "add", &ns]).output();
            match add {
                Ok(out) if out.status.success() => {}
                Ok(out) => {
                    return Err(format!(
                        "ip netns add: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                Err(e) => return Err(format!("ip: {e}")),
            }
            let m = Machine {
                link: format!("rn{pid:x}t{t}h{i}"),
                addr: format!("10.231.{subnet}.{}", i + 2),
                host: format!("rpr-host-{pid}-{t}-{i}"),
                ns,
            };
            let peer = format!("rm{pid:x}t{t}h{i}");
            net.machines.push(m);
            let m = &net.machines[i];
            run(
                "ip",
                &[
                    "link", "add", &m.link, "type", "veth", "peer", "name", &peer,
                ],
            );
            run("ip", &["link", "set", &peer, "netns", &m.ns]);
            run("ip", &["link", "set", &m.link, "master", "rpr-br0", "up"]);
            let cidr = format!("{}/16", m.addr);
            run("ip", &["-n", &m.ns, "addr", "add", &cidr, "dev", &peer]);
            run("ip", &["-n", &m.ns, "link", "set", &peer, "up"]);
            run("ip", &["-n", &m.ns, "link", "set", "lo", "up"]);
        }
        if Command::new("unshare").arg("--version").output().is_err() {
            return Err("no unshare (util-linux) for the hosts' names".into());
        }
        Ok(net)
    }

    /// `n` machines; `None` (after saying why) where this cannot run, outside CI.
    fn new(n: usize) -> Option<Self> {
        match Self::try_new(n) {
            Ok(net) => Some(net),
            Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("the network-namespace tests need root and ip netns (CI=true): {why}")
            }
            Err(why) => {
                eprintln!("not run: needs root and ip netns ({why})");
                None
            }
        }
    }

    /// Starts `entry` of this test binary on machine `i`, on `db` as seen from there.
    fn spawn(&self, i: usize, entry: &str, db: &str, envs: &[(&str, String)]) -> ChildProc {
        let mut child = self.start(i, entry, db, envs);
        self.check_path(i, &mut child);
        child
    }

    /// [`Net::spawn`] without waiting for the child's path (check it with
    /// [`Net::check_path`]).
    fn start(&self, i: usize, entry: &str, db: &str, envs: &[(&str, String)]) -> ChildProc {
        let m = &self.machines[i];
        let uts = std::fs::read_link("/proc/self/ns/uts").unwrap();
        let mut envs = envs.to_vec();
        envs.extend([
            ("RPR_NETNS_HOST", m.host.clone()),
            ("RPR_NETNS_UTS", uts.display().to_string()),
            ("RPR_NETNS_DB", db.to_owned()),
        ]);
        ChildProc::spawn_via(
            &["ip", "netns", "exec", &m.ns, "unshare", "--uts", "--"],
            entry,
            &envs,
        )
    }

    /// Waits for the path the host on machine `i` printed: its host name, its address on
    /// the bridge, the server's, and loopback not reaching the server from there.
    fn check_path(&self, i: usize, child: &mut ChildProc) {
        self.assert_path(i, &child.expect("RPR-PATH"));
    }

    /// What the host on machine `i` must print as its path.
    fn assert_path(&self, i: usize, path: &str) {
        let m = &self.machines[i];
        assert_eq!(
            path,
            format!("{} {} {SERVER} loopback=refused", m.host, m.addr),
            "the host is {}, reaches the server from {} over the bridge, and not over loopback",
            m.host,
            m.addr
        );
    }

    /// Cuts machine `i` off: its veth's root end goes down (no frame passes either way).
    fn cut(&self, i: usize) {
        run("ip", &["link", "set", &self.machines[i].link, "down"]);
    }

    /// Brings the link back and waits until it carries traffic: up, and forwarding as a
    /// port of the bridge (`brport/state` 3). A connect made in between would fail as if
    /// the network were still cut (it did once, on a loaded machine).
    fn heal(&self, i: usize) {
        let link = &self.machines[i].link;
        run("ip", &["link", "set", link, "up"]);
        let read = |what: &str| {
            std::fs::read_to_string(format!("/sys/class/net/{link}/{what}"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        wait_until(Duration::from_secs(10), "the healed link forwards", || {
            read("operstate") == "up" && read("brport/state") == "3"
        });
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // The server's sessions of hosts that were cut off when they ended: no FIN or RST
        // from them reaches it any more, and an idle session waits for its client as long
        // as the server's TCP keepalive lets it (2 hours by default), a connection slot each.
        let addrs: Vec<String> = self.machines.iter().map(|m| m.addr.clone()).collect();
        if let Ok(url) = std::env::var("RPR_PG_URL")
            && let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls)
        {
            let _ = c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE host(client_addr) = ANY($1)",
                &[&addrs],
            );
        }
        for m in &self.machines {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &m.ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", &m.ns]).output();
            let _ = Command::new("ip").args(["link", "del", &m.link]).output();
        }
        let _ = std::fs::remove_file(&self.lease);
    }
}

/// The database URL of `schema` as a host in a namespace reaches it: the bridge address.
fn over_the_bridge(db: &str) -> String {
    assert!(
        db.contains("@127.0.0.1:"),
        "RPR_PG_URL is on 127.0.0.1: {db}"
    );
    db.replacen("@127.0.0.1:", &format!("@{SERVER}:"), 1)
}

/// In a child on a machine: takes the machine's host name (in its own UTS namespace
/// only), then prints `RPR-PATH host client-address server-address loopback=…`, the path
/// its connections take. Returns the database URL, or `None` when not started by a test.
fn enter_machine() -> Option<String> {
    let host = std::env::var("RPR_NETNS_HOST").ok()?;
    let mine = std::fs::read_link("/proc/self/ns/uts").unwrap();
    assert_ne!(
        mine.display().to_string(),
        env("RPR_NETNS_UTS"),
        "not in a UTS namespace of its own: the host name stays the machine's"
    );
    nix::unistd::sethostname(&host).unwrap();
    let db = env("RPR_NETNS_DB");
    let mut c = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let row = c
        .query_one(
            "SELECT host(inet_client_addr()), host(inet_server_addr())",
            &[],
        )
        .unwrap();
    let (client, server): (String, String) = (row.get(0), row.get(1));
    drop(c);
    let port: u16 = db
        .split(&format!("@{SERVER}:"))
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {db}"));
    let loopback = match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(_) => "open",
        Err(_) => "refused",
    };
    say(
        "RPR-PATH",
        &format!(
            "{} {client} {server} loopback={loopback}",
            nix::unistd::gethostname().unwrap().to_string_lossy()
        ),
    );
    Some(db)
}

// ---------------------------------------------------------------------------
// The hosts (entries run by the children).

/// A host of the kill test, on its machine.
#[test]
fn netns_host_entry() {
    let Some(db) = enter_machine() else { return };
    pg_support::run_host(&db);
}

/// The host a partition test cuts off, on its machine (busy timeout from
/// `RPR_NETNS_BUSY_MS` when set).
#[test]
fn netns_cut_off_entry() {
    let Some(db) = enter_machine() else { return };
    let busy = std::env::var("RPR_NETNS_BUSY_MS")
        .ok()
        .map(|ms| Duration::from_millis(ms.parse().unwrap()));
    pg_support::cut_off_host(&db, LEASE, busy);
}

// ---------------------------------------------------------------------------
// The tests.

/// The host part of an attempt owner (`host/pid/start/nonce`).
fn owner_host(owner: &Value) -> String {
    let owner = owner.as_str().unwrap_or_else(|| panic!("{owner}"));
    // `host/pid/start/runtime/boot/pidns`: host names hold no '/'.
    owner.split('/').next().unwrap().to_owned()
}

/// The kill test of `tests/pg/pg_runtime.rs` with every host on a machine of its own (4
/// machines; a killed host's replacement starts on the killed one's machine), reaching the
/// database over the bridge only: every pathway completes, each effect exactly once, a
/// second dispatch only after a recorded not-applied verdict, every takeover after the lease
/// lapsed by the database's clock (the hosts' clocks an hour behind, on time, an hour
/// ahead), `verify` clean; every host reached the server from its machine's address over
/// the bridge and could not over loopback (each host that said so before its kill, and
/// every host that finished); and every attempt was started by one of the machines' hosts,
/// under its own host name, by more than one of them.
#[test]
fn hosts_on_four_network_namespaces_under_random_sigkills_complete_every_call_exactly_once() {
    let Some(net) = Net::new(4) else { return };
    let schema = pg::schema("netns_kill");
    let db = pg::location(&schema);
    let host_db = over_the_bridge(&db);
    let dir = TempDir::new("pg-netns-kill");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let rt = Runtime::open(&db).unwrap();
    let started = Instant::now();
    let run = pg_support::sigkill_hosts(
        &rt,
        &dir.path().join("root"),
        |slot, envs| net.start(slot, "pg_netns::netns_host_entry", &host_db, &envs),
        |slot, host, killed| {
            // A host about to be killed is not waited for (that would move the kill to
            // its start); one that printed nothing yet has not reached the database.
            let path = if killed {
                host.poll("RPR-PATH")
            } else {
                Some(host.expect("RPR-PATH"))
            };
            if let Some(path) = path {
                net.assert_path(slot, &path);
            }
        },
    );
    let hosts: Vec<&str> = net.machines.iter().map(|m| m.host.as_str()).collect();
    let mut starters = std::collections::BTreeSet::new();
    for row in rt.ledger_rows(0, usize::MAX).unwrap() {
        let e: Value = serde_json::from_str(&row.event).unwrap();
        if e["kind"] == "attempt_started" {
            let host = owner_host(&e["data"]["owner"]);
            assert!(hosts.contains(&host.as_str()), "{host} is not a machine's");
            starters.insert(host);
        }
    }
    assert!(
        starters.len() > 1,
        "attempts from one host only: {starters:?}"
    );
    for t in &run.takeovers {
        let host = owner_host(&t["data"]["owner"]);
        assert!(hosts.contains(&host.as_str()), "{t}");
    }
    eprintln!(
        "network namespaces: {} SIGKILLs, {} host processes on 4 machines, {} takeovers after a lapsed lease, attempts started by {} hosts, {:.1} s",
        run.kills,
        run.spawned,
        run.takeovers.len(),
        starters.len(),
        started.elapsed().as_secs_f64()
    );
    drop(rt);
    pg::drop_schema(&schema);
}

/// The partition case with a running owner: host A's network is cut while its call is in
/// flight (inside its executor, between two of its transactions). A runs on, its heartbeat
/// included, but renews nothing. Host B sees the call in flight and leaves it while the
/// lease runs; after the lease lapses by the database's clock it takes it over as unknown
/// (recorded) and can still not dispatch it. The network comes back, A's executor sends its
/// one request, and A's outcome, which reaches the database over the same TCP connection,
/// is refused and recorded as `late_outcome_refused`: one effect in all.
#[test]
fn a_host_whose_network_is_cut_mid_call_is_taken_over_only_after_its_lease_and_its_late_outcome_is_refused()
 {
    let Some(net) = Net::new(1) else { return };
    let schema = pg::schema("netns_cut");
    let db = pg::location(&schema);
    let dir = TempDir::new("pg-netns-cut");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let log = dir.path().join("effects.log");
    let release = dir.path().join("release");
    let mut host_a = net.spawn(
        0,
        "pg_netns::netns_cut_off_entry",
        &over_the_bridge(&db),
        &[
            ("RPR_PG_ROOT", dir.path().join("root").display().to_string()),
            ("RPR_PG_LOG", log.display().to_string()),
            ("RPR_PG_RELEASE", release.display().to_string()),
        ],
    );
    let id = host_a.expect("RPR-PATHWAY");
    host_a.expect("RPR-IN-EXECUTOR");

    let mut watch = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let cut_at = cut_between_transactions(&net, 0, &mut watch);
    let host_b = Runtime::open(&db).unwrap();
    pg_support::taken_over_only_after_the_lease(&host_b, &id, cut_at, LEASE);
    let taken = host_b.pathway_events(&id).unwrap();
    let e: Value = serde_json::from_str(&taken.last().unwrap().event).unwrap();
    assert_eq!(e["kind"], "recovered_unknown");
    assert!(
        e["data"]["lease_until"].as_i64() < e["data"]["database_now"].as_i64(),
        "taken over only after the lease lapsed by the database's clock: {e}"
    );
    assert_eq!(owner_host(&e["data"]["owner"]), net.machines[0].host);
    assert_eq!(effects(&log), 0, "nothing was sent by the takeover");

    // The network comes back; A's call goes out (the one send) and its outcome is refused.
    net.heal(0);
    std::fs::write(&release, b"go").unwrap();
    pg_support::late_outcome_refused(host_a, &host_b, &id, &log);
    drop(host_b);
    pg::drop_schema(&schema);
}

/// The states (`pg_stat_activity.state`) of the server's sessions from `addr`.
fn sessions_from(watch: &mut postgres::Client, addr: &str) -> Vec<String> {
    watch
        .query(
            "SELECT coalesce(state, '') || coalesce(':' || wait_event_type, '') FROM pg_stat_activity WHERE client_addr = $1::text::inet",
            &[&addr],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Cuts machine `i` at a moment its host has no transaction open on the server (its
/// heartbeat renews in a transaction of its own; a cut inside it is the case of the next
/// test): cut, look, and if the session is inside a transaction heal, let it finish, and
/// cut again. Returns when the cut stood.
fn cut_between_transactions(net: &Net, i: usize, watch: &mut postgres::Client) -> Instant {
    let addr = &net.machines[i].addr;
    for _ in 0..20 {
        net.cut(i);
        let at = Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let states = sessions_from(watch, addr);
        if states.iter().all(|s| s.starts_with("idle:")) {
            assert!(!states.is_empty(), "no session from {addr}");
            return at;
        }
        eprintln!("the cut fell inside a transaction of the host ({states:?}): again");
        net.heal(i);
        // Until the transaction ended: TCP retransmits what the cut held back, after a
        // backoff that cutting again would only lengthen.
        wait_until(
            Duration::from_secs(10),
            "the host's transaction ended",
            || {
                sessions_from(watch, addr)
                    .iter()
                    .all(|s| s.starts_with("idle:"))
            },
        );
    }
    panic!("machine {i}'s host was inside a transaction at each of 20 cuts")
}

/// Polls `f` every 10 ms until it holds, for at most `within`.
fn wait_until(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A host cut off from a server it cannot reach any more fails within bounded time when its
/// URL carries `keepalives_idle`, `keepalives_interval`, `keepalives_retries` and
/// `tcp_user_timeout` (tokio-postgres's parameters, in seconds): its outcome comes back
/// `Unrecorded` with the connection's error within seconds, although the network stays
/// cut (without them it waits out TCP's retransmissions, about 15 minutes on Linux, in its
/// step). The call took effect once; after the lease, another host takes it over as
/// unknown; nothing of the lost outcome reached the database.
#[test]
fn a_host_cut_off_for_good_fails_its_outcome_commit_within_bounded_time_with_keepalives() {
    let Some(net) = Net::new(1) else { return };
    let schema = pg::schema("netns_bounded");
    let db = pg::location(&schema);
    let dir = TempDir::new("pg-netns-bounded");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let log = dir.path().join("effects.log");
    let release = dir.path().join("release");
    let mut host_a = net.spawn(
        0,
        "pg_netns::netns_cut_off_entry",
        &format!("{}&{BOUNDED}", over_the_bridge(&db)),
        &[
            ("RPR_PG_ROOT", dir.path().join("root").display().to_string()),
            ("RPR_PG_LOG", log.display().to_string()),
            ("RPR_PG_RELEASE", release.display().to_string()),
        ],
    );
    let id = host_a.expect("RPR-PATHWAY");
    host_a.expect("RPR-IN-EXECUTOR");
    net.cut(0);
    let cut_at = Instant::now();
    std::fs::write(&release, b"go").unwrap();
    let outcome = host_a.expect("RPR-OUTCOME");
    let failed_after = cut_at.elapsed();
    assert!(
        outcome.contains("unrecorded") && !outcome.contains("late outcome"),
        "the outcome could not be recorded: {outcome}"
    );
    assert!(
        failed_after < Duration::from_secs(15),
        "failed within bounded time: {failed_after:?}"
    );
    host_a.finish();
    assert_eq!(effects(&log), 1, "the call went out once");

    let host_b = Runtime::open(&db).unwrap();
    let mut seen = Vec::new();
    wait_until(LEASE * 4, "taken over after the lease", || {
        seen = host_b.recover().unwrap();
        matches!(seen.as_slice(), [StoredPathway::Unknown(_)])
    });
    assert_eq!(
        event_kinds(&host_b, &id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "recovered_unknown"
        ],
        "nothing of the lost outcome reached the database"
    );
    assert!(host_b.verify(None).unwrap().is_ok());
    eprintln!(
        "cut off for good: the outcome failed {:.1} s after the cut ({outcome})",
        failed_after.as_secs_f64()
    );
    net.heal(0);
    drop(host_b);
    pg::drop_schema(&schema);
}

/// A host cut off in the middle of a step, after its transaction took the ledger head (the
/// lock every step takes last), holds that lock on the server only until the session has
/// been idle inside its transaction for its runtime's busy timeout, at least 5 s
/// (`idle_in_transaction_session_timeout`, which the runtime sets to it): the server then
/// ends that session and rolls its transaction back, and every other host's steps go on.
/// Set up exactly: this test holds the head itself, A's outcome step waits for it, A's
/// network is cut, the test lets go; A's session now holds the head, idle in its
/// transaction, and nobody can tell it to go on. Another host's unrelated step waits for
/// the head and goes through once the server ended A's session (after 5 s), before its own
/// busy timeout (10 s); then A's call is taken over as unknown after its lease, its outcome
/// never committed, one effect.
#[test]
fn a_host_cut_off_inside_a_step_holds_the_ledger_head_only_until_its_idle_transaction_timeout() {
    let Some(net) = Net::new(1) else { return };
    let schema = pg::schema("netns_idle_tx");
    let db = pg::location(&schema);
    let dir = TempDir::new("pg-netns-idle-tx");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let log = dir.path().join("effects.log");
    let release = dir.path().join("release");
    // A's busy timeout; the idle timeout is at least 5 s (docs/storage.md).
    let busy = Duration::from_secs(1);
    let idle = Duration::from_secs(5);
    let mut host_a = net.spawn(
        0,
        "pg_netns::netns_cut_off_entry",
        &format!("{}&{BOUNDED}", over_the_bridge(&db)),
        &[
            ("RPR_PG_ROOT", dir.path().join("root").display().to_string()),
            ("RPR_PG_LOG", log.display().to_string()),
            ("RPR_PG_RELEASE", release.display().to_string()),
            ("RPR_NETNS_BUSY_MS", busy.as_millis().to_string()),
        ],
    );
    let id = host_a.expect("RPR-PATHWAY");
    host_a.expect("RPR-IN-EXECUTOR");
    let addr = net.machines[0].addr.clone();
    let mut watch = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let host_b = Runtime::open(&db).unwrap();

    // The test holds the ledger head; A's outcome step comes to wait for it.
    let mut holder = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let mut head = holder.transaction().unwrap();
    head.query_one(
        "SELECT value FROM meta WHERE key = 'ledger_head' FOR UPDATE",
        &[],
    )
    .unwrap();
    std::fs::write(&release, b"go").unwrap();
    // (A's runtime has two sessions: its steps' and its reader's, idle throughout.)
    wait_until(Duration::from_millis(900), "A waits for the head", || {
        sessions_from(&mut watch, &addr).contains(&"active:Lock".to_owned())
    });
    net.cut(0);
    head.commit().unwrap();
    wait_until(
        Duration::from_millis(500),
        "A's session holds the head, idle in its transaction",
        || sessions_from(&mut watch, &addr).contains(&"idle in transaction:Client".to_owned()),
    );
    let held_at = Instant::now();

    // Another host's unrelated step needs the head.
    let other = pg_support::admitted(&host_b, 0);
    let waited = held_at.elapsed();
    assert!(
        waited + Duration::from_millis(100) >= idle && waited < Duration::from_secs(9),
        "the other host's step waited for the server to end A's session: {waited:?}"
    );
    let left = sessions_from(&mut watch, &addr);
    assert!(
        left.iter().all(|s| s.starts_with("idle:")),
        "the server ended A's session in its transaction: {left:?}"
    );
    assert_eq!(event_kinds(&host_b, other.id()), ["proposed", "admitted"]);

    // A's call: taken over as unknown after its lease; its outcome never committed.
    wait_until(LEASE * 4, "taken over after the lease", || {
        matches!(host_b.load(&id), Ok(StoredPathway::Unknown(_)))
    });
    assert_eq!(
        event_kinds(&host_b, &id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "recovered_unknown"
        ]
    );
    net.heal(0);
    let outcome = host_a.expect("RPR-OUTCOME");
    assert!(outcome.contains("unrecorded"), "{outcome}");
    host_a.finish();
    assert_eq!(effects(&log), 1, "one send in all");
    assert!(host_b.verify(None).unwrap().is_ok());
    eprintln!(
        "cut inside a step: the other host's step waited {:.2} s for the ledger head",
        waited.as_secs_f64()
    );
    drop(host_b);
    pg::drop_schema(&schema);
}
