-- rpr schema for PostgreSQL, version 4: the tables, columns and indexes of the SQLite schema
-- at version 4 (src/store/schema.sql, migrate_2.sql, migrate_3.sql, migrate_4.sql), in one
-- script, for a new store. Applied by src/store/pg/migrate.rs inside one transaction, which
-- also records it in rpr_migrations and fills meta (schema_version, database_id,
-- ledger_head). PostgreSQL started at the version SQLite had reached (3), so one
-- SCHEMA_VERSION names the same concepts on both stores; a store made at 3 is brought to 4
-- by migrate_4.sql, and a later schema change gets a migration on each.
--
-- Types: text and bigint only. Canonical JSON (definitions, requests, bindings, outcomes,
-- ledger events) is stored as text, never jsonb: hashes and digests are over the exact
-- bytes, and jsonb would re-order keys and re-spell numbers. Times are ms since the Unix
-- epoch as bigint, as in SQLite; lease times come from the database's clock (now()).
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE pathways (
    id                text PRIMARY KEY,
    idempotency_key   text NOT NULL UNIQUE,
    definition        text NOT NULL,           -- canonical JSON, redacted
    definition_digest text NOT NULL,           -- sha256 of the unredacted canonical definition
    request_digest    text NOT NULL,           -- sha256 of the unredacted canonical request
    state             text NOT NULL,
    version           bigint NOT NULL,         -- compare-and-set counter
    proposer          text NOT NULL,
    created_at        bigint NOT NULL,
    updated_at        bigint NOT NULL
);

CREATE INDEX pathways_unresolved ON pathways (id)
    WHERE state NOT IN ('completed', 'denied', 'aborted');
CREATE INDEX pathways_by_state ON pathways (state, id);
CREATE INDEX pathways_by_request ON pathways (request_digest, state);

CREATE TABLE attempts (
    id               text PRIMARY KEY,
    pathway_id       text NOT NULL REFERENCES pathways (id),
    seq              bigint NOT NULL,          -- 1, 2, … within the pathway
    previous_attempt text REFERENCES attempts (id),
    request          text NOT NULL,            -- canonical JSON, redacted
    request_digest   text NOT NULL,
    binding          text NOT NULL,            -- canonical JSON of the binding details
    binding_digest   text NOT NULL,
    status           text NOT NULL,            -- in_flight, not_sent, returned, succeeded, failed, partial, unknown, applied, not_applied
    owner            text,                     -- set while in flight
    lease_until      bigint,                   -- ms since the epoch by the database's clock, while in flight
    outcome          text,                     -- canonical JSON evidence of the outcome, bounded
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    carrier          text,                     -- canonical JSON: the process that may carry the request
    UNIQUE (pathway_id, seq)
);

CREATE INDEX attempts_in_flight ON attempts (pathway_id) WHERE status = 'in_flight';

CREATE TABLE approvals (
    id             text PRIMARY KEY,
    pathway_id     text NOT NULL REFERENCES pathways (id),
    request_digest text NOT NULL,
    approver       text NOT NULL,
    granted_at     bigint NOT NULL,
    used_at        bigint,                  -- consumed by approve()
    revoked_at     bigint                   -- voided when the pathway entered a Human Gate
);

-- SQLite finds a pathway's approvals by scanning a table that stays small; here several hosts
-- share it, and every step of a pathway reads them (the row check).
CREATE INDEX approvals_by_pathway ON approvals (pathway_id);

CREATE TABLE ledger (
    seq        bigint PRIMARY KEY,             -- 1, 2, … one global chain
    pathway_id text NOT NULL,
    event      text NOT NULL,                  -- canonical JSON of the event
    prev_hash  text NOT NULL,                  -- the hash of the event at seq - 1 (verify checks)
    hash       text NOT NULL                   -- no UNIQUE: forks are prevented by the head row's lock
);

CREATE INDEX ledger_by_pathway ON ledger (pathway_id, seq);

CREATE TABLE pins (
    server          text NOT NULL,          -- the name the gate's policy gives the server
    tool            text NOT NULL,
    digest          text NOT NULL,          -- the pinned binding digest (server identity, capabilities, tool)
    binding         text NOT NULL,          -- canonical JSON of the pinned binding details
    definition      text NOT NULL,          -- canonical JSON of the pinned tool definition
    pinned_by       text NOT NULL,
    pinned_at       bigint NOT NULL,
    seen_digest     text,                   -- the last differing binding seen (refused until pinned)
    seen_binding    text,
    seen_definition text,
    seen_at         bigint,
    PRIMARY KEY (server, tool)
);
