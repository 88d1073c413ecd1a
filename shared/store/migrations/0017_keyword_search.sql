-- The keyword leg of search: every vector table keeps each chunk's text as a tsvector
-- (PostgreSQL full-text search, English configuration), generated from `content`, with a GIN
-- index. New tables are made with it; existing ones gain it in migration 18, without
-- rewriting them. New tables' indexes and primary key are named `rag_<name>$<suffix>`
-- (migration 13).

CREATE OR REPLACE FUNCTION sluice_create_vector_table(collection text, dim integer) RETURNS void
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
    IF dim <= 2000 THEN
        hnsw := 'embedding vector_cosine_ops';
    ELSE
        hnsw := format('(embedding::halfvec(%s)) halfvec_cosine_ops', dim);
    END IF;
    EXECUTE format(
        'CREATE TABLE %I (
             id                  uuid CONSTRAINT %I PRIMARY KEY,
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
             embedding           vector(%s) NOT NULL,
             search_vector       tsvector GENERATED ALWAYS AS (to_tsvector(''english''::regconfig, content)) STORED)',
        t, t || '$pkey', dim);
    EXECUTE format('CREATE INDEX %I ON %I USING hnsw (%s)', t || '$embedding', t, hnsw);
    EXECUTE format('CREATE INDEX %I ON %I USING gin (search_vector)', t || '$text', t);
    EXECUTE format('CREATE INDEX %I ON %I (kb_id)', t || '$kb', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_id)', t || '$doc', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (source_path)', t || '$path', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (filename)', t || '$file', t);
    EXECUTE format('CREATE INDEX %I ON %I USING hash (content_hash)', t || '$hash', t);
    EXECUTE format('CREATE INDEX %I ON %I (source)', t || '$source', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_type)', t || '$type', t);
    EXECUTE format('CREATE INDEX %I ON %I (organizational_unit)', t || '$unit', t);
    EXECUTE format('CREATE INDEX %I ON %I (document_date)', t || '$date', t);
    EXECUTE format('COMMENT ON TABLE %I IS %L', t, 'sluice:vector-table');
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO %I', t, session_user);
END
$fn$;
