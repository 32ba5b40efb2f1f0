//! `rpr copy-to-postgres`: copies a SQLite pathway database into an empty PostgreSQL store
//! and marks it moved, so that it takes no more steps (`rpr::store::pg::copy_from_sqlite`;
//! docs/storage.md, "Moving a SQLite database to PostgreSQL"). Progress goes to stderr.

use clap::Args;

use crate::{Exit, Failure};

/// The arguments of `copy-to-postgres`.
#[derive(Debug, Args)]
pub(crate) struct CopyArgs {
    /// The SQLite pathway database to copy. Once copied it is marked moved: it takes no more
    /// steps (reading it still works).
    #[arg(long, value_name = "DB", env = "RPR_DATABASE", hide_env_values = true)]
    database: String,
    /// The PostgreSQL database to copy into: `postgres://user:password@host:port/database`.
    #[arg(long, value_name = "URL")]
    to: String,
    /// The schema to copy into (created if missing; it must hold no pathway, event or pin).
    /// Default: the role's default schema (normally `public`).
    #[arg(long, value_name = "NAME")]
    schema: Option<String>,
}

/// `copy-to-postgres` in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
pub(crate) fn copy_to_postgres(args: &CopyArgs, _json: bool) -> Result<Exit, Failure> {
    let CopyArgs {
        database,
        to,
        schema,
    } = args;
    let _ = (database, to, schema);
    Err(
        "this rpr was built without the `postgres` feature, so it cannot write to PostgreSQL; \
         build it with `cargo build --release --features postgres` (nothing was read or written)"
            .into(),
    )
}

/// `copy-to-postgres`: the copy, its progress on stderr, then what was copied (text, or one
/// JSON document on stdout with `--json`; a refusal under `--json` is a document too, with
/// `error` and its `kind`).
#[cfg(feature = "postgres")]
pub(crate) fn copy_to_postgres(args: &CopyArgs, json: bool) -> Result<Exit, Failure> {
    use rpr::store::pg::{CopyOutcome, Progress, copy_from_sqlite};

    let mut progress = |p: Progress<'_>| match p {
        Progress::SourceVerified { events } => {
            errln!("copy-to-postgres: the source verifies ({events} events); copying");
        }
        Progress::Rows { table, done, total } => {
            errln!("copy-to-postgres: {table}: {done} of {total} rows");
        }
        Progress::CopyVerified => {
            errln!("copy-to-postgres: the copy verifies in the target's open transaction");
        }
        Progress::SourceMarked => {
            errln!("copy-to-postgres: the source is marked moved: it takes no more steps");
        }
        Progress::TargetCommitted => errln!("copy-to-postgres: the target committed"),
        _ => {}
    };
    let result = copy_from_sqlite(
        std::path::Path::new(&args.database),
        &args.to,
        args.schema.as_deref(),
        &mut progress,
    );
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "copied": false,
                        "error": e.to_string(),
                        "kind": e.kind(),
                    }))?
                );
            }
            return Err(e.into());
        }
    };
    if json {
        let mut doc = serde_json::to_value(&report)?;
        doc["copied"] = true.into();
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(Exit::Done);
    }
    let what = match report.outcome {
        CopyOutcome::FinishedEarlierCopy => {
            "an earlier, interrupted copy had committed; its move is now finished"
        }
        CopyOutcome::AlreadyMoved => "already moved there; nothing to do",
        _ => "copied",
    };
    let r = &report.rows;
    // A copy made now was checked in the target before it committed. One found there from
    // an earlier run was checked then; what it holds now is not checked here.
    let (holds, checked) = match report.outcome {
        CopyOutcome::FinishedEarlierCopy | CopyOutcome::AlreadyMoved => (
            " (what the target holds now)",
            "the source's; the target holds the event at its head, and was checked when it \
             was copied: check it as it is now with `rpr verify`",
        ),
        _ => ("", "verified in the target"),
    };
    outln!("{}: {what}: {}", report.source, report.target);
    outln!(
        "database {}: {} pathways, {} attempts, {} approvals, {} pins{holds}",
        report.database_id,
        r.pathways,
        r.attempts,
        r.approvals,
        r.pins
    );
    outln!(
        "ledger: {} events, head {} ({checked})",
        report.events,
        report.head.as_deref().unwrap_or("-")
    );
    outln!(
        "{} is marked moved: steps on it are refused; status and verify still read it",
        report.source
    );
    Ok(Exit::Done)
}
