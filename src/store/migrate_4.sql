-- rpr schema, version 4. Applied by migration 4 in src/store/sqlite.rs, inside the one
-- transaction that migrates the database (the ledger verified before and after it). The
-- ledger without UNIQUE on hash and prev_hash: half of the pages a call wrote were those two
-- indexes' random pages. A fork is prevented by the writer (a step appends under BEGIN
-- IMMEDIATE, at the head it read inside its transaction) and detected by verify (an event
-- whose prev_hash is not the hash of the event before it). SQLite removes a column
-- constraint only by rebuilding the table: the rows are copied as stored, byte for byte.
CREATE TABLE ledger_new (
    seq        INTEGER PRIMARY KEY NOT NULL,   -- 1, 2, … one global chain
    pathway_id TEXT NOT NULL,
    event      TEXT NOT NULL,                  -- canonical JSON of the event
    prev_hash  TEXT NOT NULL,                  -- the hash of the event at seq - 1 (verify checks)
    hash       TEXT NOT NULL
) STRICT;

INSERT INTO ledger_new (seq, pathway_id, event, prev_hash, hash)
    SELECT seq, pathway_id, event, prev_hash, hash FROM ledger ORDER BY seq;

DROP TABLE ledger;                               -- and its index ledger_by_pathway
ALTER TABLE ledger_new RENAME TO ledger;
CREATE INDEX ledger_by_pathway ON ledger (pathway_id, seq);

-- Schema 3 as first shipped (824e9aa) had no pathways_by_request; migrate_3.sql gained it
-- later without a version of its own.
CREATE INDEX IF NOT EXISTS pathways_by_request ON pathways (request_digest, state);
