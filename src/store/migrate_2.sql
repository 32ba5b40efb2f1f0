-- rpr schema, version 2. Applied by migration 2 in src/store/sqlite.rs, which also records
-- the database identity (meta key 'database_id') that every pathway handle is tied to.
ALTER TABLE attempts ADD COLUMN carrier TEXT;   -- JSON: the process that may carry the request
