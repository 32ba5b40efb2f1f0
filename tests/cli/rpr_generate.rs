//! `rpr completions SHELL` and `rpr man [COMMAND]` (issue 29, item 4): generated from the
//! parser's own definitions, so they name every command and flag `rpr` takes.

use crate::host_support;

use host_support::{run, text};

fn stdout(args: &[&str]) -> String {
    let output = run(args);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {}", text(&output));
    String::from_utf8(output.stdout).unwrap()
}

/// The command names `rpr --help` lists.
fn commands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let listed = help
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap()
        .to_owned();
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// What bash's completion offers for the words typed so far (the last one being completed).
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("rpr-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rpr.bash");
    std::fs::write(&file, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n_rpr rpr '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        file.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completion_offers_the_commands_and_a_commands_flags() {
    let script = stdout(&["completions", "bash"]);
    let syntax = std::process::Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let offered = bash_completes(&script, &["rpr", ""]);
    for name in commands() {
        assert!(
            offered.contains(&name),
            "{name} is not offered: {offered:?}"
        );
    }
    assert_eq!(bash_completes(&script, &["rpr", "sh"]), ["show"]);
    let flags = bash_completes(&script, &["rpr", "list", "--"]);
    for flag in [
        "--state",
        "--actor",
        "--approver",
        "--limit",
        "--cursor",
        "--database",
        "--json",
    ] {
        assert!(flags.iter().any(|f| f == flag), "{flag}: {flags:?}");
    }
}

#[test]
fn every_shell_gets_a_script_and_an_unknown_shell_is_bad_usage() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        assert!(
            script.contains("show") && script.contains("approver"),
            "{shell}: {script}"
        );
    }
    let output = run(["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn the_man_pages_list_every_command_and_each_commands_flags() {
    let page = stdout(&["man"]);
    assert!(page.contains(".TH rpr 1"), "{page}");
    for name in commands() {
        let roff = format!("rpr\\-{}(1)", name.replace('-', "\\-"));
        assert!(page.contains(&roff), "{roff} is not listed:\n{page}");
    }
    let call = stdout(&["man", "call"]);
    assert!(call.contains(".TH rpr-call 1"), "{call}");
    for flag in [
        "config",
        "policy",
        "database",
        "server",
        "tool",
        "args",
        "approve\\-as",
    ] {
        assert!(
            call.contains(&format!("\\fB\\-\\-{flag}\\fR")),
            "--{flag}:\n{call}"
        );
    }
    let output = run(["man", "nonsense"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("the commands: call, approve"),
        "{}",
        text(&output)
    );
}
