-- A new vector table's HNSW graph links each chunk to twice pgvector's default number of
-- neighbours (m 32; ef_construction 64, the least pgvector takes for it). Measured at a
-- million chunks, the default graph (m 16) stopped at recall@10 0.92 whatever its search list,
-- and the denser one reaches 0.957; at equal search time the denser graph finds more at every
-- list tried, for 4% more index, a build that takes twice as long and slower inserts
-- (BENCHMARKS.md, "Scale"). The table is empty when made, so its index is rebuilt at once
-- with the new links. Existing tables keep the graph they have (a re-index of a base
-- rewrites its chunks in the same table); docs/deploying.md says how to rebuild one's graph.
CREATE OR REPLACE FUNCTION sluice_create_vector_table(collection text, dim integer, language regconfig) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
BEGIN
    PERFORM sluice_create_vector_table_columns(collection, dim, language);
    PERFORM sluice_keep_chunk_rows_whole('rag_' || collection);
    EXECUTE format('ALTER INDEX %I SET (m = 32, ef_construction = 64)', 'rag_' || collection || '$embedding');
    EXECUTE format('REINDEX INDEX %I', 'rag_' || collection || '$embedding');
END
$fn$;
