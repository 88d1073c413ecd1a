-- Knowledge bases: the row is the authority over a collection. `collection_name` is not
-- unique: bases of one name share one vector table and one embedding space.
CREATE TABLE knowledge_bases (
    id                    uuid PRIMARY KEY,
    name                  text NOT NULL,
    scope                 text NOT NULL CHECK (scope IN ('personal', 'org', 'app')),
    owner_id              uuid NOT NULL,
    org_id                uuid,
    collection_name       text NOT NULL,
    is_default            boolean NOT NULL DEFAULT false,
    embedding_provider    text NOT NULL,
    embedding_model       text NOT NULL,
    embedding_dim         integer NOT NULL CHECK (embedding_dim > 0),
    embedding_secret_id   uuid,
    embedding_endpoint_id uuid,
    embedding_base_url    text,
    ingestion_config      jsonb,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK (scope <> 'org' OR org_id IS NOT NULL)
);

CREATE INDEX knowledge_bases_collection_idx ON knowledge_bases (collection_name);
CREATE INDEX knowledge_bases_org_idx ON knowledge_bases (org_id) WHERE org_id IS NOT NULL;

-- An explicit grant on one base: it widens what the caller's permissions allow, never narrows.
CREATE TABLE kb_grants (
    kb_id   uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    user_id uuid NOT NULL,
    level   text NOT NULL CHECK (level IN ('view', 'edit')),
    PRIMARY KEY (kb_id, user_id)
);
