-- rpr schema, version 1. Applied by migration 1 in src/store/sqlite.rs.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE pathways (
    id                TEXT PRIMARY KEY NOT NULL,
    idempotency_key   TEXT NOT NULL UNIQUE,
    definition        TEXT NOT NULL,           -- canonical JSON, redacted
    definition_digest TEXT NOT NULL,           -- sha256 of the unredacted canonical definition
    request_digest    TEXT NOT NULL,           -- sha256 of the unredacted canonical request
    state             TEXT NOT NULL,
    version           INTEGER NOT NULL,        -- compare-and-set counter
    proposer          TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE INDEX pathways_unresolved ON pathways (id)
    WHERE state NOT IN ('completed', 'denied', 'aborted');
CREATE INDEX pathways_by_state ON pathways (state, id);

CREATE TABLE attempts (
    id               TEXT PRIMARY KEY NOT NULL,
    pathway_id       TEXT NOT NULL REFERENCES pathways (id),
    seq              INTEGER NOT NULL,         -- 1, 2, … within the pathway
    previous_attempt TEXT REFERENCES attempts (id),
    request          TEXT NOT NULL,            -- canonical JSON, redacted
    request_digest   TEXT NOT NULL,
    binding          TEXT NOT NULL,            -- canonical JSON of the binding details
    binding_digest   TEXT NOT NULL,
    status           TEXT NOT NULL,            -- in_flight, not_sent, returned, succeeded, failed, partial, unknown, applied, not_applied
    owner            TEXT,                     -- set while in flight
    lease_until      INTEGER,                  -- ms since the epoch, while in flight
    outcome          TEXT,                     -- canonical JSON evidence of the outcome, bounded
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (pathway_id, seq)
) STRICT;

CREATE INDEX attempts_in_flight ON attempts (pathway_id) WHERE status = 'in_flight';

CREATE TABLE approvals (
    id             TEXT PRIMARY KEY NOT NULL,
    pathway_id     TEXT NOT NULL REFERENCES pathways (id),
    request_digest TEXT NOT NULL,
    approver       TEXT NOT NULL,
    granted_at     INTEGER NOT NULL,
    used_at        INTEGER,                 -- consumed by approve()
    revoked_at     INTEGER                  -- voided when the pathway entered a Human Gate
) STRICT;

CREATE TABLE ledger (
    seq        INTEGER PRIMARY KEY NOT NULL,   -- 1, 2, … one global chain
    pathway_id TEXT NOT NULL,
    event      TEXT NOT NULL,                  -- canonical JSON of the event
    prev_hash  TEXT NOT NULL UNIQUE,           -- a fork cannot be stored
    hash       TEXT NOT NULL UNIQUE
) STRICT;

CREATE INDEX ledger_by_pathway ON ledger (pathway_id, seq);
