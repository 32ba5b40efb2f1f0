//! `rpr call` records the directory its server runs in (`metadata.cwd`: the config entry's
//! `cwd`, or the directory the call ran in), and every later step starts the server there.
//! A server that keeps its data at a relative path, read back from the operator's own
//! directory, finds nothing: before, that read as *not applied*, and a repair and resume
//! wrote a second time.
//!
//! It records how the server was started as well (`metadata.launch`: its command line and
//! its environment's digests): every later step starts it with that command line, whatever
//! the config says by then, and refuses to start it with another environment. Before, a
//! config edited between the call and its reconcile (another `--state`) read back another
//! place, and its *not applied* was accepted.

use crate::host_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use host_support::{Scratch, by_key, call_args, pathways, rpr, text};
use rpr::executor::Request;
use rpr::store::ReadStore;
use rpr::{ActionClass, Actor, Definition, Runtime};
use serde_json::{Value, json};

/// A config whose server `ledger` keeps its state and effects at relative paths and
/// exits after its first write's effect, before replying; `extra` members join its entry.
fn relative_config(dir: &Scratch, extra: &Value) -> String {
    let mut entry = json!({
        "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
        "args": ["--state", "state.json", "--effects", "effects.log", "--fault", "crash-after-effect"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        entry[k] = v.clone();
    }
    dir.write(
        "mcp-relative.json",
        &json!({"mcpServers": {"ledger": entry}}),
    )
}

fn rpr_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(rpr())
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn effects(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("effects.log")).map_or(0, |t| t.lines().count())
}

fn new_dir(dir: &Scratch, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(&path).unwrap();
    path
}

/// A scratch directory with `work` (where the call runs), `elsewhere` (where the
/// operator does), the config (its entry with `extra`), the policy and the database.
struct Case {
    dir: Scratch,
    work: PathBuf,
    elsewhere: PathBuf,
    config: String,
    policy: String,
    db_path: PathBuf,
}

impl Case {
    fn new(tag: &str, extra: &Value) -> Self {
        let dir = Scratch::new(tag);
        let work = new_dir(&dir, "work");
        let elsewhere = new_dir(&dir, "elsewhere");
        let config = relative_config(&dir, extra);
        let policy = dir.policy_with(&json!({}));
        let db_path = dir.join("rpr.db");
        Self {
            dir,
            work,
            elsewhere,
            config,
            policy,
            db_path,
        }
    }

    fn db(&self) -> &str {
        self.db_path.to_str().unwrap()
    }

    /// `rpr call` of `put` `{"key": "k", "value": "v1"}` under key `k`.
    fn keyed_put(&self) -> Vec<&str> {
        let mut args = call_args(
            &self.config,
            &self.policy,
            self.db(),
            "put",
            r#"{"key": "k", "value": "v1"}"#,
        );
        args.extend(["--key", "k"]);
        args
    }

    /// The write of [`unknown_write`], from `work`.
    fn unknown_write(&self) {
        unknown_write(&self.config, &self.policy, self.db(), &self.work);
    }

    /// `rpr reconcile` of it, from `elsewhere`.
    fn reconcile_elsewhere(&self) -> Output {
        rpr_in(
            &self.elsewhere,
            &reconcile(&self.config, &self.policy, self.db()),
        )
    }
}

/// Calls `put` from `work` under key `k`: the write lands, the server exits before its
/// reply, the pathway is left `write_status_unknown`.
fn unknown_write(config: &str, policy: &str, db: &str, work: &Path) {
    let mut args = call_args(config, policy, db, "put", r#"{"key": "k", "value": "v1"}"#);
    args.extend(["--key", "k"]);
    let out = rpr_in(work, &args);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        by_key(Path::new(db), "k").1,
        "write_status_unknown",
        "{}",
        text(&out)
    );
}

fn reconcile<'a>(config: &'a str, policy: &'a str, db: &'a str) -> Vec<&'a str> {
    vec![
        "reconcile",
        "--config",
        config,
        "--policy",
        policy,
        "--database",
        db,
        "--key",
        "k",
    ]
}

fn recorded_cwd(db: &Path) -> Value {
    let id = by_key(db, "k").0;
    let store = ReadStore::open_read_only(db).unwrap();
    store.pathway(&id).unwrap().unwrap().definition["metadata"]["cwd"].clone()
}

#[test]
fn a_readback_runs_where_the_calls_server_ran_not_in_the_operators_directory() {
    let case = Case::new("cwd-call", &json!({}));
    case.unknown_write();
    assert_eq!(
        effects(&case.work),
        1,
        "the write landed in the call's directory"
    );

    let out = case.reconcile_elsewhere();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{}", text(&out));
    assert!(
        !case.elsewhere.join("state.json").exists(),
        "the readback ran where the server ran, not in the operator's directory"
    );
    assert_eq!(
        effects(&case.work) + effects(&case.elsewhere),
        1,
        "nothing was sent again"
    );
    assert_eq!(
        recorded_cwd(&case.db_path),
        json!(case.work.to_str().unwrap())
    );
}

#[test]
fn a_servers_cwd_in_the_config_is_where_it_runs_and_where_its_steps_run_it() {
    let case = Case::new("cwd-entry", &json!({"cwd": "srv"}));
    let served = new_dir(&case.dir, "work/srv");
    case.unknown_write();
    assert_eq!(effects(&served), 1, "the server ran in its entry's `cwd`");
    assert_eq!(effects(&case.work), 0);
    assert_eq!(recorded_cwd(&case.db_path), json!(served.to_str().unwrap()));

    // From elsewhere the entry's `cwd` names elsewhere/srv, which does not exist: the
    // step runs the server where the call's server ran.
    let out = case.reconcile_elsewhere();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{}", text(&out));
    assert_eq!(effects(&served), 1, "nothing was sent again");
}

#[test]
fn a_step_whose_servers_directory_is_gone_is_refused_and_reads_nothing() {
    let case = Case::new("cwd-gone", &json!({}));
    case.unknown_write();
    let moved = case.dir.join("work-moved");
    std::fs::rename(&case.work, &moved).unwrap();

    let out = case.reconcile_elsewhere();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("no longer a directory"), "{said}");
    assert!(said.contains("rpr attest"), "{said}");
    assert_eq!(
        by_key(&case.db_path, "k").1,
        "write_status_unknown",
        "{said}"
    );
    assert!(
        !case.elsewhere.join("state.json").exists(),
        "no server ran elsewhere"
    );
    assert_eq!(effects(&moved), 1);
}

#[test]
fn a_pathway_left_proposed_is_not_carried_out_from_another_directory() {
    let case = Case::new("cwd-proposed", &json!({}));
    // A call from `work` that stopped between propose and admit left this (as
    // `host_steps::a_pathway_left_proposed_is_admitted_by_the_repeated_call` builds it).
    let authority = rpr::policy::Policy::load(&case.policy).unwrap().authority();
    let definition = Definition::new(
        Request::new("put", json!({"key": "k", "value": "v1"})),
        ActionClass::Mutating,
        "left",
        authority,
    )
    .with_metadata(json!({"server": "ledger", "cwd": case.work.to_str().unwrap()}));
    let rt = Runtime::open(&case.db_path).unwrap();
    let proposed = rt.propose(&Actor::new("agent"), definition).unwrap();
    let id = proposed.into_new().unwrap().id().to_owned();
    drop(rt);

    // The same call from elsewhere, under a key of its own, finds it and is refused.
    let args = call_args(
        &case.config,
        &case.policy,
        case.db(),
        "put",
        r#"{"key": "k", "value": "v1"}"#,
    );
    let out = rpr_in(&case.elsewhere, &args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let refusal = format!("pathway {id}, left proposed by a call whose server ran in");
    assert!(said.contains(&refusal), "{said}");
    assert_eq!(by_key(&case.db_path, "left").1, "proposed");
    assert_eq!(
        pathways(&case.db_path).len(),
        1,
        "nothing else was proposed"
    );
    assert_eq!(
        effects(&case.work) + effects(&case.elsewhere),
        0,
        "nothing was sent"
    );
}

fn launch_recorded(db: &Path) -> Value {
    let id = by_key(db, "k").0;
    let store = ReadStore::open_read_only(db).unwrap();
    store.pathway(&id).unwrap().unwrap().definition["metadata"]["launch"].clone()
}

#[test]
fn a_config_edited_after_the_call_does_not_change_the_server_a_step_starts() {
    let case = Case::new("launch-args", &json!({}));
    case.unknown_write();
    assert_eq!(effects(&case.work), 1);
    // The config now keeps the server's state elsewhere: a server started so reads no
    // effect of the call, which would be taken for *not applied*.
    relative_config(
        &case.dir,
        &json!({"args": ["--state", "other-state.json", "--effects", "effects.log"]}),
    );

    let out = rpr_in(
        &case.work,
        &reconcile(&case.config, &case.policy, case.db()),
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("verdict applied"), "{said}");
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{said}");
    assert!(
        said.contains("the call's command line was") && said.contains("other-state.json"),
        "the step says the config changed: {said}"
    );
    assert!(
        !case.work.join("other-state.json").exists(),
        "no server was started as the edited config says"
    );
    assert_eq!(effects(&case.work), 1, "nothing was sent again");
    let launch = launch_recorded(&case.db_path);
    assert_eq!(
        launch["command"],
        json!(env!("CARGO_BIN_EXE_rpr-fault-server")),
        "{launch}"
    );
    assert_eq!(launch["args"][1], json!("state.json"), "{launch}");
}

#[test]
fn a_step_whose_server_would_get_another_environment_is_refused_and_reads_nothing() {
    let case = Case::new("launch-env", &json!({"env": {"LEDGER_ZONE": "a"}}));
    case.unknown_write();
    relative_config(&case.dir, &json!({"env": {"LEDGER_ZONE": "b"}}));
    let id = by_key(&case.db_path, "k").0;
    let ledger_before = host_support::events(&case.db_path, &id).len();

    let out = rpr_in(
        &case.work,
        &reconcile(&case.config, &case.policy, case.db()),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("its environment differs in LEDGER_ZONE"),
        "{said}"
    );
    assert!(said.contains("rpr attest"), "{said}");
    assert_eq!(
        by_key(&case.db_path, "k").1,
        "write_status_unknown",
        "{said}"
    );
    assert_eq!(
        host_support::events(&case.db_path, &id).len(),
        ledger_before,
        "nothing was recorded"
    );

    // With the call's environment again, the step runs.
    relative_config(&case.dir, &json!({"env": {"LEDGER_ZONE": "a"}}));
    let out = rpr_in(
        &case.work,
        &reconcile(&case.config, &case.policy, case.db()),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{}", text(&out));
    assert_eq!(effects(&case.work), 1, "nothing was sent again");
}

#[test]
fn the_same_keyed_call_through_another_config_is_answered_from_its_pathway() {
    let case = Case::new("launch-key", &json!({}));
    case.unknown_write();
    let id = by_key(&case.db_path, "k").0;
    relative_config(
        &case.dir,
        &json!({"args": ["--state", "state.json", "--effects", "effects.log"]}),
    );

    let put_under_k = |arguments: &str| {
        let mut args = call_args(&case.config, &case.policy, case.db(), "put", arguments);
        args.extend(["--key", "k"]);
        rpr_in(&case.work, &args)
    };
    let out = put_under_k(r#"{"key": "k", "value": "v1"}"#);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains(&format!(
            "idempotency key \"k\" is pathway {id}, the same call"
        )),
        "{said}"
    );
    assert!(said.contains("replayed, nothing sent again"), "{said}");
    assert_eq!(effects(&case.work), 1, "nothing was sent again");
    assert_eq!(pathways(&case.db_path).len(), 1);

    // Another request under the key is still a conflict.
    let out = put_under_k(r#"{"key": "k", "value": "v2"}"#);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("with different content"), "{said}");
    assert_eq!(effects(&case.work), 1);
}

#[test]
fn a_variable_is_recorded_as_a_salted_digest_and_compared_whatever_its_name() {
    let secret = "hunter2-not-in-the-database";
    let case = Case::new(
        "launch-secret",
        &json!({"env": {"LEDGER_API_TOKEN": secret}}),
    );
    case.unknown_write();
    let launch = launch_recorded(&case.db_path);
    let pair = launch["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[0] == "LEDGER_API_TOKEN")
        .cloned()
        .unwrap_or_else(|| panic!("recorded: {launch}"));
    let plain = rpr::canonical::sha256_hex_bytes(secret.as_bytes());
    assert_ne!(pair[1], json!(plain), "not a plain digest");
    assert_eq!(pair[1].as_str().unwrap().len(), 64, "{launch}");
    let bytes = std::fs::read(&case.db_path).unwrap();
    let wal = std::fs::read(case.dir.join("rpr.db-wal")).unwrap_or_default();
    for needle in [secret, plain.as_str()] {
        for file in [&bytes, &wal] {
            assert!(
                !file.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle} is in the database"
            );
        }
    }

    // Another token is another environment, secret-named or not: refused.
    relative_config(
        &case.dir,
        &json!({"env": {"LEDGER_API_TOKEN": "swapped-token-value"}}),
    );
    let out = rpr_in(
        &case.work,
        &reconcile(&case.config, &case.policy, case.db()),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("differs in LEDGER_API_TOKEN"), "{said}");
    assert!(
        !said.contains(secret) && !said.contains("swapped-token-value"),
        "{said}"
    );
    assert_eq!(by_key(&case.db_path, "k").1, "write_status_unknown");

    // The same token: the definition was not redacted, so the step needs no `--args`.
    relative_config(&case.dir, &json!({"env": {"LEDGER_API_TOKEN": secret}}));
    let out = rpr_in(
        &case.work,
        &reconcile(&case.config, &case.policy, case.db()),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{}", text(&out));
}

#[test]
fn a_command_line_the_record_would_redact_is_refused_before_anything_is_recorded() {
    // A word of the command line that is a JSON text with a secret-named member: the
    // store would redact it, and a step could not start the server as the call did.
    let script = format!(
        "exec '{}' --state state.json --effects effects.log",
        env!("CARGO_BIN_EXE_rpr-fault-server")
    );
    let case = Case::new(
        "launch-redacted",
        &json!({"command": "sh", "args": ["-c", script, r#"{"api_token": "abc"}"#]}),
    );
    let out = rpr_in(&case.work, &case.keyed_put());
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot be recorded without"), "{said}");
    assert!(said.contains("Nothing was recorded or sent"), "{said}");
    assert!(pathways(&case.db_path).is_empty(), "nothing was recorded");
    assert_eq!(effects(&case.work), 0, "nothing was sent");
}

#[test]
fn a_step_starts_the_program_the_call_found_whatever_path_says_then() {
    // The config names its server by a bare name, found in a directory of the PATH the
    // call ran with.
    let case = Case::new("launch-program", &json!({}));
    let bin = new_dir(&case.dir, "bin");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_rpr-fault-server"),
        bin.join("ledger-server"),
    )
    .unwrap();
    relative_config(&case.dir, &json!({"command": "ledger-server"}));
    let with_path = |path: String, args: &[&str]| {
        Command::new(rpr())
            .current_dir(&case.work)
            .env("PATH", path)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = with_path(
        format!("{}:/usr/bin:/bin", bin.display()),
        &case.keyed_put(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let launch = launch_recorded(&case.db_path);
    assert_eq!(launch["command"], json!("ledger-server"), "{launch}");
    assert_eq!(
        launch["program"],
        json!(bin.join("ledger-server").to_str().unwrap()),
        "{launch}"
    );

    // The operator's PATH has no such program: the step starts the one the call found.
    let out = with_path(
        "/usr/bin:/bin".to_owned(),
        &reconcile(&case.config, &case.policy, case.db()),
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(by_key(&case.db_path, "k").1, "completed", "{said}");
    assert_eq!(effects(&case.work), 1, "nothing was sent again");
}
