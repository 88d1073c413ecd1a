-- A chunk row keeps its vector and its words on its own page. PostgreSQL moves a row's long
-- values out to the table's TOAST relation once the row passes about 2 kB, largest first:
-- a 384-dimension vector (1.5 kB) and the words of a 1,000-character chunk each went there,
-- so every candidate the keyword leg read and every row an exact vector ranking read was
-- fetched from a second relation and decompressed, up to three times a row (measured on the
-- relevance benchmark's 2,143 chunks: 3,778 buffer reads to match a query against 410 pages).
-- With `toast_tuple_target` at its maximum a row is moved out only when it would not fit a
-- page, and then its text first: `embedding` and `search_vector` are kept inline (`MAIN`)
-- unless nothing else is left to move. Rows take more heap and less TOAST (the benchmark's
-- table: 14 MB whole before, 16 MB after).
--
-- Existing tables get the same settings; their rows keep the old layout until they are
-- written again (a re-index rewrites them), and are read correctly either way.
ALTER FUNCTION sluice_create_vector_table(text, integer, regconfig) RENAME TO sluice_create_vector_table_columns;

CREATE FUNCTION sluice_keep_chunk_rows_whole(t text) RETURNS void
LANGUAGE plpgsql SET search_path = public, pg_temp AS $fn$
BEGIN
    EXECUTE format('ALTER TABLE %I SET (toast_tuple_target = 8160)', t);
    EXECUTE format('ALTER TABLE %I ALTER COLUMN embedding SET STORAGE MAIN,
                    ALTER COLUMN search_vector SET STORAGE MAIN', t);
END
$fn$;
REVOKE ALL ON FUNCTION sluice_keep_chunk_rows_whole(text) FROM PUBLIC;

CREATE FUNCTION sluice_create_vector_table(collection text, dim integer, language regconfig) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
BEGIN
    PERFORM sluice_create_vector_table_columns(collection, dim, language);
    PERFORM sluice_keep_chunk_rows_whole('rag_' || collection);
END
$fn$;
REVOKE ALL ON FUNCTION sluice_create_vector_table(text, integer, regconfig) FROM PUBLIC;

SELECT sluice_keep_chunk_rows_whole(relname::text) FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'
  AND obj_description(oid, 'pg_class') = 'sluice:vector-table';
