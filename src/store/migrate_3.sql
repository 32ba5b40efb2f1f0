-- rpr schema, version 3. Applied by migration 3 in src/store/sqlite.rs: the tool pins of
-- `rpr gate` (one row per server name and tool), and an index by request digest (the gate
-- finds an identical call's open pathway, and counts them, without scanning closed ones).
CREATE TABLE pins (
    server          TEXT NOT NULL,          -- the name the gate's policy gives the server
    tool            TEXT NOT NULL,
    digest          TEXT NOT NULL,          -- the pinned binding digest (server identity, capabilities, tool)
    binding         TEXT NOT NULL,          -- canonical JSON of the pinned binding details
    definition      TEXT NOT NULL,          -- canonical JSON of the pinned tool definition
    pinned_by       TEXT NOT NULL,
    pinned_at       INTEGER NOT NULL,
    seen_digest     TEXT,                   -- the last differing binding seen (refused until pinned)
    seen_binding    TEXT,
    seen_definition TEXT,
    seen_at         INTEGER,
    PRIMARY KEY (server, tool)
) STRICT;

CREATE INDEX pathways_by_request ON pathways (request_digest, state);
