-- BM25 for the keyword leg. PostgreSQL ranks full-text matches without corpus statistics
-- (`ts_rank_cd` knows one chunk at a time), so every vector table gets a companion
-- `rag_<name>$terms` that counts, per base and tenant, how many chunks hold each lexeme and
-- how often it occurs; the row with the empty lexeme (which no text produces) holds the
-- base's totals: its chunks and all their lexeme occurrences. Triggers on the vector table
-- keep it exact on every insert, update, delete and truncate, whoever writes (ingestion,
-- replacement, re-index, teardown, the sweep), so no writer can forget it. Search reads
-- the statistics of the bases in its scope only: another tenant's words never weigh on a
-- score. The tables' text search configuration becomes a parameter (`language`), recorded
-- as the comment of their `search_vector` column, and a chunk's context (its title and
-- headings) is indexed with its content.

-- A chunk's length for BM25: its words as the configuration reads them (stop words out),
-- kept beside its `tsvector` so a search never counts them again.
CREATE FUNCTION sluice_word_count(language regconfig, body text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
    FROM pg_catalog.unnest(pg_catalog.to_tsvector(language, body)) AS u
$fn$;

-- Statement-level, with the changed rows as transition tables (`removed`, `added`): one
-- aggregate per statement, not one per row. A row whose words are not read yet (an upgraded
-- table's, until the backfill reaches it: `search_vector` NULL) counts nowhere. The totals row sorts first, so two writers of a
-- base queue on it before they touch any lexeme (writers of a name hold its advisory lock as
-- well). A base's rows go when its last chunk does.
CREATE FUNCTION sluice_count_terms() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    terms text := TG_TABLE_NAME || '$terms';
    change record;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('TRUNCATE %I', terms);
        RETURN NULL;
    END IF;
    FOR change IN
        SELECT * FROM (VALUES ('removed', -1, TG_OP IN ('DELETE', 'UPDATE')),
                              ('added', 1, TG_OP IN ('INSERT', 'UPDATE'))) AS c(rows, sign, applies)
        WHERE applies
    LOOP
        EXECUTE format(
            'INSERT INTO %1$I AS t (kb_id, org_id, lexeme, chunks, occurrences)
             SELECT kb, org, lexeme, $1 * sum(chunks), $1 * sum(occurrences) FROM (
                 SELECT coalesce(kb_id, %3$L) AS kb, coalesce(org_id, %3$L) AS org, '''' AS lexeme, 1 AS chunks,
                        c.search_length AS occurrences
                 FROM %2$I AS c WHERE c.search_vector IS NOT NULL
                 UNION ALL
                 SELECT coalesce(kb_id, %3$L), coalesce(org_id, %3$L), u.lexeme, 1, cardinality(u.positions)
                 FROM %2$I AS c, unnest(c.search_vector) AS u) AS counted
             GROUP BY kb, org, lexeme ORDER BY kb, org, lexeme
             ON CONFLICT (kb_id, org_id, lexeme) DO UPDATE
             SET chunks = t.chunks + excluded.chunks, occurrences = t.occurrences + excluded.occurrences',
            terms, change.rows, '00000000-0000-0000-0000-000000000000')
        USING change.sign;
        IF change.sign < 0 THEN
            EXECUTE format(
                'DELETE FROM %1$I AS t USING (
                     SELECT s.kb_id, s.org_id FROM %1$I AS s
                     WHERE s.lexeme = '''' AND s.chunks <= 0 AND (s.kb_id, s.org_id) IN
                           (SELECT DISTINCT coalesce(kb_id, %2$L), coalesce(org_id, %2$L) FROM removed)) AS emptied
                 WHERE t.kb_id = emptied.kb_id AND t.org_id = emptied.org_id',
                terms, '00000000-0000-0000-0000-000000000000');
        END IF;
    END LOOP;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION sluice_count_terms() FROM PUBLIC;

-- Gives the vector table `t` its statistics table and the triggers that keep it (named
-- within their table, so any collection name's fit). It starts empty: a new table holds no
-- rows, and an upgraded table's rows are counted as the backfill reads their words.
CREATE FUNCTION sluice_keep_term_statistics(t text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    terms text := t || '$terms';
    grantee text;
BEGIN
    EXECUTE format(
        'CREATE TABLE %I (
             kb_id       uuid NOT NULL,
             org_id      uuid NOT NULL,
             lexeme      text NOT NULL,
             chunks      bigint NOT NULL,
             occurrences bigint NOT NULL,
             CONSTRAINT %I PRIMARY KEY (kb_id, org_id, lexeme))', terms, terms || '$pkey');
    EXECUTE format('COMMENT ON TABLE %I IS %L', terms, 'sluice:term-statistics');
    -- Only the triggers write it: the logins read (default privileges granted them more).
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_class c, aclexplode(c.relacl) AS a
        WHERE c.oid = format('public.%I', terms)::regclass AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %I FROM %s', terms, grantee);
    END LOOP;
    EXECUTE format('GRANT SELECT ON %I TO %I', terms, session_user);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS added
                    FOR EACH STATEMENT EXECUTE FUNCTION sluice_count_terms()', 'terms_added', t);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS removed
                    FOR EACH STATEMENT EXECUTE FUNCTION sluice_count_terms()', 'terms_removed', t);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS removed NEW TABLE AS added
                    FOR EACH STATEMENT EXECUTE FUNCTION sluice_count_terms()', 'terms_changed', t);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %I
                    FOR EACH STATEMENT EXECUTE FUNCTION sluice_count_terms()', 'terms_truncated', t);
END
$fn$;
REVOKE ALL ON FUNCTION sluice_keep_term_statistics(text) FROM PUBLIC;

DROP FUNCTION sluice_create_vector_table(text, integer);

-- Each base says which configuration its collection's words are read with; the bases of a
-- name agree (a base joining a name adopts its collection's).
ALTER TABLE knowledge_bases ADD COLUMN text_search_language text NOT NULL DEFAULT 'english';

-- `language`: the PostgreSQL text search configuration the chunks' words are read with
-- (`english` stems and drops English stop words; `simple` only folds case).
CREATE FUNCTION sluice_create_vector_table(collection text, dim integer, language regconfig) RETURNS void
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
    IF language IS NULL THEN
        RAISE EXCEPTION 'a vector table needs a text search configuration' USING ERRCODE = 'invalid_parameter_value';
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
             context             text,
             embedding           vector(%s) NOT NULL,
             search_vector       tsvector GENERATED ALWAYS AS
                 (to_tsvector(%4$L::regconfig, coalesce(context || '' '', '''') || content)) STORED,
             search_length       integer GENERATED ALWAYS AS
                 (sluice_word_count(%4$L::regconfig, coalesce(context || '' '', '''') || content)) STORED)',
        t, t || '$pkey', dim, language::text);
    EXECUTE format('COMMENT ON COLUMN %I.search_vector IS %L', t, language::text);
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
    PERFORM sluice_keep_term_statistics(t);
END
$fn$;
REVOKE ALL ON FUNCTION sluice_create_vector_table(text, integer, regconfig) FROM PUBLIC;

CREATE OR REPLACE FUNCTION sluice_drop_vector_table(collection text) RETURNS void
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
    EXECUTE format('DROP TABLE IF EXISTS public.%I', t || '$terms');
END
$fn$;

-- A chunk's context (`chunk_context`: its document's title and heading path) is staged with
-- it and indexed before its content; the content stays what is stored and returned.
ALTER TABLE rag_chunk_staging ADD COLUMN context text;

-- Existing vector tables are upgraded without a rewrite and without holding their lock for
-- longer than a catalog change: a generated column cannot be added to a table that has rows
-- without computing it for all of them under an exclusive lock, so theirs are plain columns
-- that a row trigger fills on every write (`sluice_fill_search_columns`, with the table's
-- configuration, English, as its argument). Their existing rows are filled afterwards, a
-- batch per short transaction, by the migrate step's online phase (`Db::finish_online_upgrades`),
-- which then builds the GIN index concurrently; until it reaches a row, that row is found by
-- its vector and not yet by its words, and counts in no statistics.
CREATE FUNCTION sluice_fill_search_columns() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $fn$
DECLARE
    body text := coalesce(NEW.context || ' ', '') || NEW.content;
BEGIN
    NEW.search_vector := pg_catalog.to_tsvector(TG_ARGV[0]::regconfig, body);
    NEW.search_length := sluice_word_count(TG_ARGV[0]::regconfig, body);
    RETURN NEW;
END
$fn$;

DO $statistics$
DECLARE
    tbl record;
BEGIN
    FOR tbl IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'r'
          AND obj_description(c.oid, 'pg_class') = 'sluice:vector-table'
    LOOP
        EXECUTE format('ALTER TABLE %I ADD COLUMN IF NOT EXISTS context text,
                        DROP COLUMN IF EXISTS search_vector', tbl.relname);
        EXECUTE format('ALTER TABLE %I ADD COLUMN search_vector tsvector, ADD COLUMN search_length integer',
                       tbl.relname);
        EXECUTE format('CREATE TRIGGER search_filled BEFORE INSERT OR UPDATE ON %I
                        FOR EACH ROW EXECUTE FUNCTION sluice_fill_search_columns(%L)', tbl.relname, 'english');
        EXECUTE format('COMMENT ON COLUMN %I.search_vector IS %L', tbl.relname, 'english');
        PERFORM sluice_keep_term_statistics(tbl.relname);
    END LOOP;
END
$statistics$;
