//! Migrations: the schema version, recorded in `rpr_migrations` (one row per migration
//! applied) and in `meta.schema_version`, as on SQLite.

use postgres::Client;

use super::PgError;
use crate::store::{SCHEMA_VERSION, StoreError};

/// Migrations, in order: the version each brings the schema to, what it does, its script.
const MIGRATIONS: &[(i64, &str, &str)] = &[(
    3,
    "the tables and indexes of schema 3 (pathways, attempts with carrier, approvals, ledger, pins, meta)",
    include_str!("schema.sql"),
)];

/// Brings the schema `search_path` points at to [`SCHEMA_VERSION`] in one transaction, and
/// returns the database identity. Concurrent openers of one schema (several hosts starting
/// at once) take turns on an advisory lock named after the schema; the second finds the
/// work done.
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
    let current = if has_table {
        tx.query_one("SELECT coalesce(max(version), 0) FROM rpr_migrations", &[])?
            .get::<_, i64>(0)
    } else {
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
        0
    };
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: current,
            supported: SCHEMA_VERSION,
        }
        .into());
    }
    for &(version, description, script) in MIGRATIONS {
        if version <= current {
            continue;
        }
        tx.batch_execute(script)?;
        if version == MIGRATIONS[0].0 {
            // The first migration makes the identity and the (empty) ledger head, whose row
            // every append locks.
            tx.execute(
                "INSERT INTO meta (key, value) VALUES
                     ('database_id', 'db_' || replace(gen_random_uuid()::text, '-', '')),
                     ('ledger_head', '')",
                &[],
            )?;
        }
        tx.execute(
            "INSERT INTO rpr_migrations (version, description) VALUES ($1, $2)",
            &[&version, &description],
        )?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&version.to_string()],
        )?;
    }
    let id = database_id(&mut tx)?;
    tx.commit()?;
    Ok(id)
}

/// For a read-only opening: the schema must be an rpr store at [`SCHEMA_VERSION`]. Returns
/// the database identity.
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
    if version < SCHEMA_VERSION {
        return Err(StoreError::Corrupt(format!(
            "schema version {version} is older than {SCHEMA_VERSION}: open it once for writing to migrate it"
        ))
        .into());
    }
    let id = database_id(&mut tx)?;
    tx.commit()?;
    Ok(id)
}

/// The recorded schema version and the migrations applied.
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
