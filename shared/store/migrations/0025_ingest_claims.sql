-- One ingest attempt per document at a time. A delivery claims the document for the stage's
-- lease (the function's timeout, after which the attempt is dead) with a token of its own, and
-- releases it when the attempt ends; another delivery meanwhile (SQS delivers at least once,
-- and a yielding delivery may be ingesting this document in its place) is sent again later
-- instead of running beside it and colliding on the staged batches.
ALTER TABLE rag_documents ADD COLUMN ingest_claim uuid;
ALTER TABLE rag_documents ADD COLUMN ingest_claimed_until timestamptz;
