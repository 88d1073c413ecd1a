-- A base's reranking setting (`sluice_domain::rerank::Rerank` as JSON): which reranker reorders
-- a search's first candidates, with which model and whose key. None: the fused order stands.
ALTER TABLE knowledge_bases ADD COLUMN rerank jsonb;
