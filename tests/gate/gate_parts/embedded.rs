//! The gate as a library module (issue 26, item 7): a host that embeds it in its own
//! process (`rpr::gate::serve` on pipes) gets what `rpr gate` gives, and every pathway state
//! the gate names in `_meta` is the state stored for that pathway.

use std::io::{BufRead, BufReader, Write};
use std::str::FromStr;

use rpr::gate::{Options, serve};
use rpr::mcp::ServerCommand;
use rpr::policy::Policy;
use rpr::{Actor, Runtime, State};
use serde_json::{Value, json};

use super::{effects, embed_gate, fault_argv, fault_policy, interop_support::TempDir, state};

/// A client at the other end of an embedded gate's pipes.
struct Client {
    to_gate: std::io::PipeWriter,
    from_gate: BufReader<std::io::PipeReader>,
    next: i64,
}

impl Client {
    fn request(&mut self, method: &str, params: &Value) -> Value {
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.to_gate, "{line}").unwrap();
        loop {
            let mut text = String::new();
            assert_ne!(
                self.from_gate.read_line(&mut text).unwrap(),
                0,
                "the gate closed"
            );
            let message: Value = serde_json::from_str(&text).expect("protocol only");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: &Value) -> Value {
        let reply = self.request("tools/call", &json!({"name": tool, "arguments": arguments}));
        reply["result"].clone()
    }
}

/// The pathway and state a result names in `_meta`, the state parsed as a stored state.
fn named(result: &Value) -> (String, State) {
    let pathway = &result["_meta"]["dev.rpr/pathway"];
    let id = pathway["id"].as_str().unwrap_or_else(|| panic!("{result}"));
    let state = pathway["state"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"));
    let state = State::from_str(state)
        .unwrap_or_else(|_| panic!("`{state}` is not a stored state: {result}"));
    (id.to_owned(), state)
}

#[test]
fn a_host_that_embeds_the_gate_records_before_sending_and_never_resends_an_unknown() {
    let dir = TempDir::new("gate-embedded");
    let policy_path = fault_policy(&dir);
    let argv = fault_argv(&dir, "crash-after-effect", &[]);
    let server = ServerCommand::new(&argv[0]).args(&argv[1..]);
    let policy = Policy::load(&policy_path).unwrap();
    let db = dir.join("rpr.db");
    let rt = Runtime::builder(&db)
        .bounds(policy.bounds())
        .open()
        .unwrap();
    let (gate, to_gate, from_gate) = embed_gate(rt, policy, server, &db, &policy_path);
    let mut client = Client {
        to_gate,
        from_gate,
        next: 0,
    };
    let init = client.request(
        "initialize",
        &json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "rpr-gate", "{init}");

    // The server crashes after the effect: unknown, and the identical repeat is not sent.
    let put = json!({"key": "k", "value": "v1"});
    let first = client.call("put", &put);
    assert_eq!(first["isError"], true, "{first}");
    let (id, said) = named(&first);
    assert_eq!(said, State::WriteStatusUnknown);
    assert_eq!(
        state(&dir, &id),
        said,
        "the state in _meta is the stored one"
    );
    let repeat = client.call("put", &put);
    let (again, said) = named(&repeat);
    assert_eq!(again, id, "answered from the same pathway");
    assert_eq!(state(&dir, &id), said);
    assert_eq!(effects(&dir), 1, "the repeat was not sent");

    // A read through the restarted server completes, and says so as stored.
    let read = client.call("get", &json!({"key": "k"}));
    let (read_id, said) = named(&read);
    assert_eq!(said, State::Completed, "{read}");
    assert_eq!(state(&dir, &read_id), State::Completed);

    drop(client);
    gate.join()
        .unwrap()
        .expect("the gate served until its input closed");
}

#[test]
fn an_embedded_gate_whose_policy_does_not_govern_its_server_serves_nothing() {
    let dir = TempDir::new("gate-embedded-name");
    let policy_path = fault_policy(&dir);
    let argv = fault_argv(&dir, "none", &[]);
    let server = ServerCommand::new(&argv[0]).args(&argv[1..]);
    let policy = Policy::load(&policy_path).unwrap();
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    let options = Options::new("not-faults", Actor::new("agent"), "rpr.db", "policy.json");
    let e = serve(rt, policy, &server, options, &b""[..], std::io::sink())
        .expect_err("a server the policy does not name is refused");
    assert!(
        e.to_string().contains("no rules for server `not-faults`"),
        "{e}"
    );
    assert_eq!(effects(&dir), 0);
}

/// The fault server on threads of this process: each start runs `run_over` on a new pair of
/// pipes (the gate starts it again after it stops). Counts the starts.
fn in_process_fault_server(
    dir: &TempDir,
    fault: &str,
    starts: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> rpr::mcp::InProcessServer {
    // The fault server's options, without the program.
    let args: Vec<String> = fault_argv(dir, fault, &[]).into_iter().skip(1).collect();
    let starts = std::sync::Arc::clone(starts);
    rpr::mcp::InProcessServer::new("fault-server-thread", move || {
        let (requests_in, requests_out) = std::io::pipe()?;
        let (replies_in, replies_out) = std::io::pipe()?;
        let args = args.clone();
        std::thread::spawn(move || {
            rpr::mcp::fault_server::run_over(args, BufReader::new(requests_in), replies_out)
        });
        starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok((Box::new(replies_in), Box::new(requests_out)))
    })
}

#[test]
fn a_gate_governs_a_server_in_its_own_process_as_it_governs_a_command() {
    let dir = TempDir::new("gate-in-process");
    let policy_path = fault_policy(&dir);
    let starts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = in_process_fault_server(&dir, "crash-after-effect", &starts);
    let policy = Policy::load(&policy_path).unwrap();
    let db = dir.join("rpr.db");
    let rt = Runtime::builder(&db)
        .bounds(policy.bounds())
        .open()
        .unwrap();
    let server = super::Embedded::InProcess(server);
    let (gate, to_gate, from_gate) = embed_gate(rt, policy, server, &db, &policy_path);
    let mut client = Client {
        to_gate,
        from_gate,
        next: 0,
    };
    client.request(
        "initialize",
        &json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}),
    );

    // The server "crashes" after the effect (its thread ends the connection): the write is
    // unknown, recorded before it was sent, and its repeat is not sent.
    let put = json!({"key": "k", "value": "v1"});
    let first = client.call("put", &put);
    let (id, said) = named(&first);
    assert_eq!(said, State::WriteStatusUnknown, "{first}");
    assert_eq!(state(&dir, &id), said);
    let repeat = client.call("put", &put);
    assert_eq!(named(&repeat).0, id, "answered from the same pathway");
    assert_eq!(effects(&dir), 1, "the repeat was not sent");

    // The server is started again, in this process, for the next call.
    let read = client.call("get", &json!({"key": "k"}));
    let (read_id, said) = named(&read);
    assert_eq!(said, State::Completed, "{read}");
    assert_eq!(state(&dir, &read_id), State::Completed);
    assert!(
        starts.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "started again after the crash"
    );

    drop(client);
    gate.join()
        .unwrap()
        .expect("the gate served until its input closed");

    // The pathway records the in-process server's name, not a command line; an operator
    // step from another process cannot start that server, and says so.
    let rt = Runtime::open(&db).unwrap();
    let policy = Policy::load(&policy_path).unwrap();
    let e = match rt.load(&id).unwrap() {
        rpr::StoredPathway::Unknown(p) => {
            let recorded = &p.definition().metadata["gate"];
            assert_eq!(recorded["in_process"], "fault-server-thread", "{recorded}");
            assert!(recorded.get("command").is_none(), "{recorded}");
            assert!(rpr::gate::is_gate_pathway(&p));
            rpr::gate::recorded_live(&rt, &policy, &p).expect_err("not startable from here")
        }
        other => panic!("expected an unknown write, got {other:?}"),
    };
    assert!(
        e.to_string().contains("ran inside the process of the gate"),
        "{e}"
    );
}

#[test]
fn a_client_of_a_server_in_its_own_process_names_no_carrier_process() {
    let dir = TempDir::new("client-in-process");
    let starts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = in_process_fault_server(&dir, "none", &starts);
    let client =
        rpr::mcp::McpClient::connect_in_process(&server, &rpr::mcp::SessionConfig::default())
            .expect("connects: discover, then the handshake");
    assert!(client.is_in_process());
    assert!(
        client.server_process().is_none(),
        "the host carries its calls: no other process to watch"
    );
    assert!(client.session().server_pid().is_none());
    let tools = client.list_tools().unwrap();
    assert!(tools.get("put").is_some(), "{tools:?}");
    let reply = client
        .call_tool(
            "put",
            &json!({"key": "a", "value": "b"}),
            std::time::Duration::from_secs(10),
        )
        .unwrap();
    assert!(format!("{reply:?}").contains("stored"), "{reply:?}");
    assert_eq!(effects(&dir), 1);
    assert_eq!(starts.load(std::sync::atomic::Ordering::SeqCst), 1);
    client.shutdown();
}
