-- Vector tables (`rag_<name>`) are created and dropped at run time, but the application's
-- login has no CREATE on the schema and owns no table. These two functions run as their
-- owner, the migrating administrator (SECURITY DEFINER), and do exactly one thing each:
-- create a vector table of the fixed shape, or drop a table marked as one. Nothing else of
-- the schema can be created, altered or dropped by the application.

CREATE FUNCTION sluice_create_vector_table(collection text, dim integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    t text := 'rag_' || collection;
    hnsw text;
BEGIN
    IF collection IS NULL OR collection !~ '^[a-z][a-z0-9_]{0,44}$' THEN
        RAISE EXCEPTION 'not a collection name: %', collection USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF dim IS NULL OR dim < 1 OR dim > 4000 THEN
        RAISE EXCEPTION 'not a vector width pgvector can index: %', dim USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- pgvector's HNSW index takes `vector` up to 2,000 dimensions; wider models are indexed
    -- as `halfvec` (up to 4,000), the same cosine order at half the bytes.
    IF dim <= 2000 THEN
        hnsw := 'embedding vector_cosine_ops';
    ELSE
        hnsw := format('(embedding::halfvec(%s)) halfvec_cosine_ops', dim);
    END IF;
    EXECUTE format(
        'CREATE TABLE %I (
             id                  uuid PRIMARY KEY,
             kb_id               uuid,
             org_id              uuid,
             document_id         uuid NOT NULL,
             chunk_index         integer NOT NULL,
             content             text NOT NULL,
             metadata            jsonb NOT NULL DEFAULT ''{}'',
             source              text,
             document_type       text,
             organizational_unit text,
             document_date       date,
             source_path         text,
             filename            text,
             content_hash        text,
             embedding           vector(%s) NOT NULL)', t, dim);
    EXECUTE format('CREATE INDEX %I ON %I USING hnsw (%s)', t || '_embedding_idx', t, hnsw);
    EXECUTE format('CREATE INDEX %I ON %I (kb_id)', t || '_kb_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_id)', t || '_doc_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (source_path)', t || '_path_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (filename)', t || '_file_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (content_hash)', t || '_hash_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I (source)', t || '_source_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_type)', t || '_type_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I (organizational_unit)', t || '_unit_idx', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_date)', t || '_date_idx', t);
    EXECUTE format('COMMENT ON TABLE %I IS %L', t, 'sluice:vector-table');
    -- The login that asked reads and writes the rows (default privileges grant the same).
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', t, session_user);
END
$fn$;

CREATE FUNCTION sluice_drop_vector_table(collection text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    t text := 'rag_' || collection;
BEGIN
    IF collection IS NULL OR collection !~ '^[a-z][a-z0-9_]{0,44}$' THEN
        RAISE EXCEPTION 'not a collection name: %', collection USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF obj_description(to_regclass(format('public.%I', t)), 'pg_class') IS DISTINCT FROM 'sluice:vector-table' THEN
        RAISE EXCEPTION '% is not a vector table', t USING ERRCODE = 'undefined_table';
    END IF;
    EXECUTE format('DROP TABLE public.%I', t);
END
$fn$;

REVOKE ALL ON FUNCTION sluice_create_vector_table(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION sluice_drop_vector_table(text) FROM PUBLIC;
