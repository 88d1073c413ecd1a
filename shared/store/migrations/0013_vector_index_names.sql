-- A vector table's indexes were named `rag_<name>_<suffix>`, the shape of another
-- collection's table (`a`'s `rag_a_kb_idx` is the table of a collection `a_kb_idx`), so one
-- collection could keep another from ever getting its table. They are now named
-- `rag_<name>$<suffix>`: a `$` never appears in a collection name, so no collection's table
-- is ever another's index. Existing indexes are renamed in place (no rebuild); the function
-- that makes new tables names them so from migration 17 on (released together with this).

DO $rename$
DECLARE
    idx record;
BEGIN
    FOR idx IN
        SELECT i.relname AS index_name, t.relname AS table_name
        FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE n.nspname = current_schema()
          AND obj_description(t.oid, 'pg_class') = 'sluice:vector-table'
          AND i.relname LIKE t.relname || '\_%'
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', idx.index_name,
            idx.table_name || '$' || regexp_replace(substr(idx.index_name, length(idx.table_name) + 2), '_idx$', ''));
    END LOOP;
END
$rename$;
