//! `rpr pin --review` and `rpr pin --accept TOOL=DIGEST…`: every changed
//! tool of a server at once, with what changed in its binding and a diff of its definition;
//! then the changes accepted by naming each reviewed digest, so a binding that changed again
//! since the review is not pinned unseen.

use rpr::Actor;
use rpr::shown;
use rpr::store::PinRecord;
use serde_json::{Value, json};

use crate::Failure;
use crate::flow::Exit;

/// Lines of context around each change of a definition's diff.
const CONTEXT: usize = 2;

/// One changed tool, as reviewed.
struct Change<'a> {
    pin: &'a PinRecord,
    seen: &'a rpr::store::SeenBinding,
    fields: Vec<String>,
    diff: Vec<(char, String)>,
}

fn changed<'a>(pins: &'a [PinRecord], server: Option<&str>) -> Vec<Change<'a>> {
    pins.iter()
        .filter(|p| server.is_none_or(|s| p.server == s))
        .filter_map(|pin| {
            let seen = pin.seen.as_ref()?;
            Some(Change {
                pin,
                seen,
                fields: rpr::mcp::changed_fields(&pin.binding, &seen.binding),
                diff: diff(&pretty(&pin.definition), &pretty(&seen.definition)),
            })
        })
        .collect()
}

fn pretty(v: &Value) -> Vec<String> {
    serde_json::to_string_pretty(v)
        .unwrap_or_default()
        .lines()
        .map(shown::name)
        .collect()
}

/// The most cells the longest-common-subsequence table of a diff may have (16 MiB of
/// `u32`): a server's definitions are its to make as long as it likes, and the table grows
/// with the product of their lengths.
const MAX_DIFF_CELLS: usize = 4 * 1024 * 1024;

/// A line diff of `old` and `new`: `' '` kept, `'-'` only in `old`, `'+'` only in `new`, in
/// order. The lines both share at the start and the end are kept as they are; between
/// them, the longest common subsequence, or, when that table would pass
/// [`MAX_DIFF_CELLS`], every old line removed and every new one added (true, and longer).
fn diff(old: &[String], new: &[String]) -> Vec<(char, String)> {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let kept = |lines: &[String]| lines.iter().map(|l| (' ', l.clone())).collect::<Vec<_>>();
    let mut out = kept(&old[..head]);
    let (old_mid, new_mid) = (&old[head..old.len() - tail], &new[head..new.len() - tail]);
    if (old_mid.len() + 1).saturating_mul(new_mid.len() + 1) <= MAX_DIFF_CELLS {
        out.extend(lcs_diff(old_mid, new_mid));
    } else {
        out.extend(old_mid.iter().map(|l| ('-', l.clone())));
        out.extend(new_mid.iter().map(|l| ('+', l.clone())));
    }
    out.extend(kept(&old[old.len() - tail..]));
    out
}

/// [`diff`] by the longest common subsequence, its table `(old + 1) × (new + 1)`.
fn lcs_diff(old: &[String], new: &[String]) -> Vec<(char, String)> {
    let (n, m) = (old.len(), new.len());
    // lcs[i][j]: the longest common subsequence of old[i..] and new[j..].
    let mut lcs = vec![vec![0_u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(n.max(m)));
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            out.push((' ', old[i].clone()));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(('+', new[j].clone()));
            j += 1;
        } else {
            out.push(('-', old[i].clone()));
            i += 1;
        }
    }
    out
}

/// The lines of `diff` worth showing: every change, with [`CONTEXT`] lines around it.
fn shown_lines(diff: &[(char, String)]) -> Vec<Option<&(char, String)>> {
    let near = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT).min(diff.len().saturating_sub(1));
        (lo..=hi).any(|x| diff[x].0 != ' ')
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, line) in diff.iter().enumerate() {
        if near(k) {
            out.push(Some(line));
            skipped = false;
        } else if !skipped {
            out.push(None);
            skipped = true;
        }
    }
    out
}

/// The command that accepts every change reviewed here, or `None` when a word of it cannot
/// be shown as it must be typed.
fn accept_command(database: &str, server: &str, changes: &[Change<'_>]) -> Option<String> {
    let mut words = vec![format!(
        "rpr pin --database {} --server {}",
        rpr::shown::shell_word(database)?,
        rpr::shown::shell_word(server)?
    )];
    for ch in changes {
        let accept = format!("{}={}", ch.pin.tool, ch.seen.digest);
        words.push(format!("--accept {}", rpr::shown::shell_word(&accept)?));
    }
    words.push("--as NAME".into());
    Some(words.join(" "))
}

/// `rpr pin --review [--server NAME]`.
pub(crate) fn review(database: &str, pins: &[PinRecord], server: Option<&str>, json_out: bool) {
    let changes = changed(pins, server);
    let mut servers: Vec<&str> = changes.iter().map(|c| c.pin.server.as_str()).collect();
    servers.dedup();
    if json_out {
        let per: Vec<Value> = servers
            .iter()
            .map(|s| {
                let mine: Vec<&Change<'_>> =
                    changes.iter().filter(|c| c.pin.server == *s).collect();
                json!({
                    "server": s,
                    "changed": mine.iter().map(|c| json!({
                        "tool": c.pin.tool,
                        "pinned": c.pin.digest,
                        "pinned_by": c.pin.pinned_by,
                        "seen": c.seen.digest,
                        "seen_at": c.seen.at,
                        "changed_fields": c.fields,
                        "definition_diff": c.diff.iter().map(|(op, line)| json!({"op": op.to_string(), "line": line})).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!("{}", json!({ "servers": per }));
        return;
    }
    if changes.is_empty() {
        say!(
            "no changed binding waits for review{}",
            server
                .map(|s| format!(" on server {}", shown::name(s)))
                .unwrap_or_default()
        );
        return;
    }
    for s in &servers {
        let mine: Vec<Change<'_>> = changed(pins, Some(s));
        say!(
            "server {}: {} tool(s) changed, calls to them refused until pinned",
            shown::name(s),
            mine.len()
        );
        for c in &mine {
            say!("\n  tool {}", shown::name(&c.pin.tool));
            say!(
                "    pinned  {} (by {}, {})",
                c.pin.digest,
                shown::name(&c.pin.pinned_by),
                shown::utc(c.pin.pinned_at)
            );
            say!("    seen    {} ({})", c.seen.digest, shown::utc(c.seen.at));
            say!("    changed: {}", c.fields.join(", "));
            for (field, what) in [
                ("instructions_digest", "instructions"),
                ("capabilities_digest", "capabilities"),
            ] {
                if c.fields.iter().any(|f| f == field) {
                    say!(
                        "    the server's {what} changed: rpr keeps only their digest, so this \
                         review cannot show what changed; read them from the server itself (its \
                         `initialize` result) before you accept"
                    );
                }
            }
            if c.diff.iter().any(|(op, _)| *op != ' ') {
                say!("    definition (- pinned, + seen):");
                for line in shown_lines(&c.diff) {
                    if let Some((op, text)) = line {
                        say!("      {op} {text}");
                    } else {
                        say!("        …");
                    }
                }
            } else {
                say!(
                    "    definition: unchanged (the server, its capabilities or the protocol changed)"
                );
            }
        }
        if let Some(command) = accept_command(database, s, &mine) {
            say!("\nto accept all {} after review: {command}", mine.len());
        } else {
            say!(
                "\na name here holds characters a command line cannot show as typed: read the \
                 names with `rpr pin --review --json`, and accept with `rpr pin --accept \
                 TOOL=DIGEST` after review"
            );
        }
    }
}

/// `rpr pin --server S --accept TOOL=DIGEST… --as NAME`: every named tool must have a
/// changed binding whose digest is the one named; then each is pinned. Nothing is pinned
/// when one does not match.
pub(crate) fn accept(
    rt: &rpr::Runtime,
    pins: &[PinRecord],
    server: &str,
    accepted: &[String],
    actor: &Actor,
    json_out: bool,
) -> Result<Exit, Failure> {
    let mut named: Vec<(&str, &str)> = Vec::new();
    for a in accepted {
        let Some((tool, digest)) = a.rsplit_once('=') else {
            return Err(
                format!("--accept {a}: give TOOL=DIGEST (rpr pin --review prints them)").into(),
            );
        };
        if named.iter().any(|(t, _)| *t == tool) {
            return Err(format!("--accept names tool `{tool}` twice").into());
        }
        named.push((tool, digest));
    }
    for (tool, digest) in &named {
        let pin = pins
            .iter()
            .find(|p| p.server == server && p.tool == *tool)
            .ok_or_else(|| {
                format!("server {server} has no pin of tool `{tool}`; nothing was pinned")
            })?;
        match &pin.seen {
            Some(seen) if seen.digest == *digest => {}
            Some(seen) => {
                return Err(format!(
                    "tool `{tool}`: its binding changed again since the review (now {}, not {digest}); nothing was pinned. Review again: rpr pin --review --database … --server {server}",
                    seen.digest
                )
                .into());
            }
            None => {
                return Err(format!(
                    "tool `{tool}` has no changed binding waiting (pinned {}); nothing was pinned",
                    pin.digest
                )
                .into());
            }
        }
    }
    let mut done = Vec::new();
    for (tool, digest) in &named {
        let pin = rt.accept_pin(server, tool, digest, actor).map_err(|e| {
            format!(
                "tool `{tool}`: {e}; pinned before it: {}",
                if done.is_empty() {
                    "none".to_owned()
                } else {
                    done.join(", ")
                }
            )
        })?;
        done.push((*tool).to_owned());
        announce(&pin, actor, json_out)?;
    }
    Ok(Exit::Done)
}

/// Says that `pin` was taken by `actor` (its record, with `--json`).
pub(crate) fn announce(pin: &PinRecord, actor: &Actor, json_out: bool) -> Result<(), Failure> {
    if json_out {
        outln!("{}", serde_json::to_string(pin)?);
    } else {
        say!(
            "pinned `{}` of `{}`: binding {} (by {actor}); the gate accepts calls to it again",
            pin.tool,
            pin.server,
            pin.digest
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_diff_of_huge_definitions_stays_within_its_bound_and_is_true() {
        let old: Vec<String> = (0..100_000).map(|i| format!("a{i}")).collect();
        let new: Vec<String> = (0..100_000).map(|i| format!("b{i}")).collect();
        // A table of 10^10 cells would need 40 GB; this answers at once.
        let d = diff(&old, &new);
        assert_eq!(d.len(), 200_000);
        assert_eq!(d.iter().filter(|(c, _)| *c == '-').count(), 100_000);
        // Shared lines at both ends stay kept, however long the middle.
        let mut framed = vec!["{".to_owned()];
        framed.extend(old.iter().cloned());
        framed.push("}".into());
        let mut framed_new = vec!["{".to_owned()];
        framed_new.extend(new.iter().cloned());
        framed_new.push("}".into());
        let d = diff(&framed, &framed_new);
        assert_eq!(d.first(), Some(&(' ', "{".to_owned())));
        assert_eq!(d.last(), Some(&(' ', "}".to_owned())));
    }

    #[test]
    fn the_diff_keeps_common_lines_and_marks_the_rest() {
        let d = diff(&lines("a\nb\nc\nd"), &lines("a\nx\nc\nd\ne"));
        let got: Vec<(char, &str)> = d.iter().map(|(op, l)| (*op, l.as_str())).collect();
        assert_eq!(
            got,
            [
                (' ', "a"),
                ('+', "x"),
                ('-', "b"),
                (' ', "c"),
                (' ', "d"),
                ('+', "e")
            ]
        );
    }

    #[test]
    fn only_lines_near_a_change_are_shown() {
        let old: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        let mut new = old.clone();
        new[10] = "ten".into();
        let d = diff(&old, &new);
        let shown = shown_lines(&d);
        let kept = shown.iter().filter(|l| l.is_some()).count();
        assert_eq!(kept, 2 * CONTEXT + 2, "{shown:?}");
        assert_eq!(shown.iter().filter(|l| l.is_none()).count(), 2);
    }
}
