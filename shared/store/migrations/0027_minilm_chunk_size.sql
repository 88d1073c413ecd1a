-- The keyless all-MiniLM-L6-v2 model's default chunk size rose from 750 characters (overlap
-- 150) to 1,000 (overlap 200): it reads about 1,000 characters of prose whole, and ranks
-- better given them. Bases that existed keep the old default in their stored configuration,
-- so their new documents are chunked as their old ones were until someone changes it (a
-- re-index then re-chunks the rest). A size or overlap a base set itself is kept.
UPDATE knowledge_bases
SET ingestion_config = '{"chunk_size": 750, "chunk_overlap": 150}'::jsonb || coalesce(ingestion_config, '{}'::jsonb)
WHERE embedding_model = 'all-minilm-l6-v2'
  AND NOT (coalesce(ingestion_config, '{}'::jsonb) ? 'chunk_size');
