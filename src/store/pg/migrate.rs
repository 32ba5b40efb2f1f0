//! Migrations: the schema version, recorded in `rpr_migrations` (one row per migration
//! applied) and in `meta.schema_version`, as on SQLite.

use postgres::Client;

use super::PgError;
use super::tx::{Inner, Tx};
use super::verify::verify_tx;
use crate::store::{OLDEST_READABLE_SCHEMA, SCHEMA_VERSION, StoreError};

/// A new store: the tables and indexes of [`SCHEMA_VERSION`] in one script, recorded as that
/// one migration.
const FRESH: (&str, &str) = (
    "the tables and indexes of schema 4 (pathways, attempts with carrier, approvals, ledger without UNIQUE hashes, pins, meta)",
    include_str!("schema.sql"),
);

/// Migrations of an existing store, in order: the version each brings the schema to, what
/// it does, its script. (PostgreSQL started at schema 3, made in one script that is now
/// [`FRESH`]'s at version 4.)
const MIGRATIONS: &[(i64, &str, &str)] = &[(
    4,
    "the ledger without the UNIQUE constraints on hash and prev_hash",
    include_str!("migrate_4.sql"),
)];

/// The oldest version an existing store can be migrated from.
const OLDEST: i64 = 3;

/// Brings the schema `search_path` points at to [`SCHEMA_VERSION`] in one transaction, and
/// returns the database identity. Concurrent openers of one schema (several hosts starting
/// at once) take turns on an advisory lock named after the schema; the second finds the
/// work done. An existing store is migrated only if its tables are its recorded version's
/// ([`StoreError::SchemaMismatch`] otherwise) and its ledger verifies
/// ([`StoreError::MigrationRefused`] otherwise); it is verified again after, in the same
/// transaction, and anything wrong rolls the whole migration back.
pub(super) fn migrate(client: &mut Client) -> Result<String, PgError> {
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('rpr-migrate:' || current_schema(), 0))",
        &[],
    )?;
    let schema: Option<String> = tx.query_one("SELECT current_schema()", &[])?.get(0);
    let Some(schema) = schema else {
        return Err(StoreError::NotRprDatabase(
            "no schema: search_path names none that exists".into(),
        )
        .into());
    };
    let has_table = tx
        .query_one("SELECT to_regclass('rpr_migrations') IS NOT NULL", &[])?
        .get::<_, bool>(0);
    if !has_table {
        let tables: i64 = tx
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
                &[],
            )?
            .get(0);
        if tables > 0 {
            return Err(StoreError::NotRprDatabase(format!(
                "schema {schema} has {tables} tables but no rpr_migrations"
            ))
            .into());
        }
        tx.batch_execute(
            "CREATE TABLE rpr_migrations (
                 version     bigint PRIMARY KEY,
                 description text NOT NULL,
                 applied_at  timestamptz NOT NULL DEFAULT now()
             )",
        )?;
        tx.batch_execute(FRESH.1)?;
        // The identity and the (empty) ledger head, whose row every append locks.
        tx.execute(
            "INSERT INTO meta (key, value) VALUES
                 ('database_id', 'db_' || replace(gen_random_uuid()::text, '-', '')),
                 ('ledger_head', '')",
            &[],
        )?;
        record(&mut tx, SCHEMA_VERSION, FRESH.0)?;
        let id = database_id(&mut tx)?;
        tx.commit()?;
        return Ok(id);
    }
    let current = tx
        .query_one("SELECT coalesce(max(version), 0) FROM rpr_migrations", &[])?
        .get::<_, i64>(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: current,
            supported: SCHEMA_VERSION,
        }
        .into());
    }
    check_shape(&mut tx, &schema, current)?;
    if current < SCHEMA_VERSION {
        let mut statements = std::collections::HashMap::new();
        let mut statements_after = std::collections::HashMap::new();
        let mut t = Tx {
            inner: Inner::Own(tx),
            statements: &mut statements,
            nowait: false,
            head: None,
            sealer: None,
            covered: None,
        };
        let before = verify_tx(&mut t, None)?;
        if let Some(first) = before.problems.first() {
            return Err(StoreError::MigrationRefused {
                database: format!("schema {schema}"),
                from: current,
                to: SCHEMA_VERSION,
                problems: before.problems.len(),
                first: crate::store::problem_text(first),
            }
            .into());
        }
        let Inner::Own(mut tx) = t.inner else {
            unreachable!("made as Own above")
        };
        for &(version, description, script) in MIGRATIONS {
            if version > current {
                tx.batch_execute(script)?;
                record(&mut tx, version, description)?;
            }
        }
        check_shape(&mut tx, &schema, SCHEMA_VERSION)?;
        let mut t = Tx {
            inner: Inner::Own(tx),
            statements: &mut statements_after,
            nowait: false,
            head: None,
            sealer: None,
            covered: None,
        };
        let after = verify_tx(&mut t, None)?;
        if let Some(first) = after.problems.first() {
            return Err(StoreError::Corrupt(format!(
                "migration {current} -> {SCHEMA_VERSION} of schema {schema} rolled back: the ledger verified before it and not after ({})",
                crate::store::problem_text(first)
            ))
            .into());
        }
        if (after.events, &after.head) != (before.events, &before.head) {
            return Err(StoreError::Corrupt(format!(
                "migration {current} -> {SCHEMA_VERSION} of schema {schema} rolled back: {} events before it, {} after",
                before.events, after.events
            ))
            .into());
        }
        let Inner::Own(mut tx) = t.inner else {
            unreachable!("made as Own above")
        };
        let id = database_id(&mut tx)?;
        tx.commit()?;
        return Ok(id);
    }
    let id = database_id(&mut tx)?;
    tx.commit()?;
    Ok(id)
}

/// Records migration `version` in `rpr_migrations` and `meta.schema_version`.
fn record(
    tx: &mut postgres::Transaction<'_>,
    version: i64,
    description: &str,
) -> Result<(), PgError> {
    tx.execute(
        "INSERT INTO rpr_migrations (version, description) VALUES ($1, $2)",
        &[&version, &description],
    )?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&version.to_string()],
    )?;
    Ok(())
}

/// Checks that `meta.schema_version` is `version` (the last migration recorded) and that the
/// ledger's UNIQUE constraints are that version's (two up to 3, none from 4).
fn check_shape(
    tx: &mut postgres::Transaction<'_>,
    schema: &str,
    version: i64,
) -> Result<(), PgError> {
    let mismatch = |detail: String| -> PgError {
        StoreError::SchemaMismatch {
            database: format!("schema {schema}"),
            recorded: version,
            detail,
        }
        .into()
    };
    if version < OLDEST {
        return Err(mismatch(format!(
            "rpr_migrations records version {version}; PostgreSQL stores start at {OLDEST}"
        )));
    }
    let tables = tx
        .query_one(
            "SELECT to_regclass('meta') IS NOT NULL AND to_regclass('ledger') IS NOT NULL
                 AND to_regclass('pins') IS NOT NULL",
            &[],
        )?
        .get::<_, bool>(0);
    if !tables {
        return Err(mismatch("meta, ledger or pins is missing".into()));
    }
    let recorded = schema_version(tx)?;
    if recorded != version {
        return Err(mismatch(format!(
            "rpr_migrations ends at {version} but meta.schema_version is {recorded}"
        )));
    }
    let unique: i64 = tx
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND contype = 'u'",
            &[],
        )?
        .get(0);
    let want = if version >= 4 { 0 } else { 2 };
    if unique != want {
        return Err(mismatch(format!(
            "the ledger has {unique} UNIQUE constraints (schema {version}: {want})"
        )));
    }
    Ok(())
}

/// For a read-only opening: the schema must be an rpr store at [`SCHEMA_VERSION`] or at
/// [`OLDEST_READABLE_SCHEMA`] (the same tables and columns). Returns the database identity.
pub(super) fn check_version(client: &mut Client) -> Result<String, PgError> {
    let mut tx = client.build_transaction().read_only(true).start()?;
    let has_meta = tx
        .query_one(
            "SELECT to_regclass('rpr_migrations') IS NOT NULL AND to_regclass('meta') IS NOT NULL",
            &[],
        )?
        .get::<_, bool>(0);
    if !has_meta {
        let schema: Option<String> = tx.query_one("SELECT current_schema()", &[])?.get(0);
        return Err(StoreError::NotRprDatabase(format!(
            "schema {}",
            schema.unwrap_or_else(|| "(none)".into())
        ))
        .into());
    }
    let version = schema_version(&mut tx)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        }
        .into());
    }
    if version < OLDEST_READABLE_SCHEMA {
        let schema: Option<String> = tx.query_one("SELECT current_schema()", &[])?.get(0);
        return Err(StoreError::SchemaTooOld {
            database: format!("schema {}", schema.unwrap_or_default()),
            found: version,
            oldest: OLDEST_READABLE_SCHEMA,
        }
        .into());
    }
    let id = database_id(&mut tx)?;
    tx.commit()?;
    Ok(id)
}

/// The recorded schema version and the migrations applied.
#[cfg(test)]
pub(super) fn recorded(client: &mut Client) -> Result<(i64, Vec<(i64, String)>), PgError> {
    let mut tx = client.build_transaction().read_only(true).start()?;
    let version = schema_version(&mut tx)?;
    let applied = tx
        .query(
            "SELECT version, description FROM rpr_migrations ORDER BY version",
            &[],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    tx.commit()?;
    Ok((version, applied))
}

fn schema_version(tx: &mut postgres::Transaction<'_>) -> Result<i64, PgError> {
    let text: Option<String> = tx
        .query_opt("SELECT value FROM meta WHERE key = 'schema_version'", &[])?
        .map(|r| r.get(0));
    text.and_then(|t| t.parse().ok()).ok_or_else(|| {
        StoreError::Corrupt("meta.schema_version is missing or not an integer".into()).into()
    })
}

fn database_id(tx: &mut postgres::Transaction<'_>) -> Result<String, PgError> {
    tx.query_opt("SELECT value FROM meta WHERE key = 'database_id'", &[])?
        .map(|r| r.get(0))
        .ok_or_else(|| StoreError::Corrupt("meta has no database_id".into()).into())
}
