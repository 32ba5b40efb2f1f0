-- rpr schema for PostgreSQL, version 4 (from 3): the ledger without its UNIQUE constraints on
-- hash and prev_hash, as on SQLite (src/store/migrate_4.sql). A fork is prevented by the
-- writer (every append locks the meta.ledger_head row and appends at that head) and detected
-- by verify. Applied by src/store/pg/migrate.rs in the transaction that verifies the ledger
-- before and after it. The constraints are found by what they are, not by their names.
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'ledger'::regclass AND contype = 'u'
    LOOP
        EXECUTE format('ALTER TABLE ledger DROP CONSTRAINT %I', c.conname);
    END LOOP;
END $$;
