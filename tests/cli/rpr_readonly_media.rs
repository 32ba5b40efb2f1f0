//! The read commands on a database on read-only media (issue 29, item 4): a read-only bind
//! mount in a mount namespace of its own (`unshare --mount`, which needs root, as CI is).
//! SQLite cannot read a WAL-mode database there without a `-shm`, which it cannot create;
//! with no `-wal` the database file holds every commit, and rpr reads it as immutable.
//! `unresolved` lists without its recovery scan (which records), and says so.

use crate::host_support;

use host_support::{Scratch, by_key, call_args, rpr, run, text};

#[test]
fn the_read_commands_read_a_database_on_a_read_only_mount() {
    let dir = Scratch::new("ro-media");
    let policy = dir.policy();
    let db = dir.join("rpr.db").display().to_string();
    let config = dir.fault_config("none");
    let mut args = call_args(
        &config,
        &policy,
        &db,
        "put",
        r#"{"key": "k", "value": "v"}"#,
    );
    args.extend(["--key", "k"]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let (id, _) = by_key(dir.join("rpr.db").as_path(), "k");
    // The database file alone (a copy, as from a backup), on media this process cannot
    // write.
    let media = dir.join("media");
    std::fs::create_dir(&media).unwrap();
    std::fs::copy(dir.join("rpr.db"), media.join("rpr.db")).unwrap();
    let ro_db = media.join("rpr.db").display().to_string();
    let rpr = rpr().display().to_string();
    let script = format!(
        "set -u\n\
         mount --bind -o ro '{m}' '{m}' || exit 97\n\
         touch '{m}/probe' 2>/dev/null && exit 98\n\
         for cmd in status list verify log 'show {id}' unresolved 'unresolved --json'; do\n\
           echo \"== $cmd\"\n\
           '{rpr}' $cmd --database '{db}' 2>&1\n\
           echo \"== exit $?\"\n\
         done\n",
        m = media.display(),
        db = ro_db,
    );
    let output = std::process::Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let out = text(&output);
    assert_ne!(
        output.status.code(),
        Some(97),
        "a read-only bind mount could not be made (this test needs root, as CI has):\n{out}"
    );
    assert_ne!(
        output.status.code(),
        Some(98),
        "the mount is writable:\n{out}"
    );
    let sections: Vec<(&str, &str)> = out
        .split("== ")
        .filter(|s| !s.starts_with("exit"))
        .filter_map(|s| s.split_once('\n'))
        .collect();
    assert_eq!(sections.len(), 7, "{out}");
    for (cmd, said) in &sections {
        assert!(
            out.contains(&format!("== {cmd}\n{said}== exit 0")),
            "`rpr {cmd}` did not exit 0:\n{out}"
        );
    }
    let said = |cmd: &str| sections.iter().find(|(c, _)| *c == cmd).unwrap().1;
    assert!(
        said("status").contains("pathways: 1 (completed 1)"),
        "{out}"
    );
    assert!(
        said("verify").contains("chain and states verified: true"),
        "{out}"
    );
    assert!(
        said(&format!("show {id}")).contains(&format!("pathway {id}: completed")),
        "{out}"
    );
    assert!(said("list").contains(&id), "{out}");
    assert!(said("log").lines().count() >= 5, "{out}");
    assert!(
        said("unresolved").contains("the recovery scan, which records what it finds, was not run"),
        "{out}"
    );
    assert!(
        said("unresolved --json").contains("\"recovery_skipped\""),
        "{out}"
    );
    // Nothing was made beside the database.
    let files: Vec<_> = std::fs::read_dir(&media)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["rpr.db"], "{out}");
}
