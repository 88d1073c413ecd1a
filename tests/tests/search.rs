//! Search on the running stack: random tenants, bases sharing a name, chunks with random
//! filter values; every search answers what a brute-force pass over the same rows, in the
//! caller's reach and under every filter, answers — and nothing of anyone else's.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::vectors::{Rng, literal, local_embedding};
use sluice_e2e::{Stack, User};
use std::collections::HashMap;
use uuid::Uuid;

#[derive(Debug, Clone)]
struct Chunk {
    id: Uuid,
    kb_id: Option<Uuid>,
    org_id: Option<Uuid>,
    document_id: Uuid,
    source: Option<&'static str>,
    document_type: Option<&'static str>,
    unit: Option<&'static str>,
    date: Option<time::Date>,
    embedding: Vec<f32>,
}

#[tokio::test]
async fn every_search_is_the_brute_force_answer_within_reach_and_filters() {
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let store = stack.store(2).await;
    let seed = std::env::var("SLUICE_SEARCH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_u64);
    let mut rng = Rng(seed);
    let (org_a, org_b) = (Uuid::new_v4(), Uuid::new_v4());
    let editor_a = User::with(Some(org_a), &["collections:view", "collections:edit"], false);
    let member_a = User::with(Some(org_a), &["collections:view"], false);
    let editor_b = User::with(Some(org_b), &["collections:view"], false);
    let loner = User::new();
    let outsider = User::with(Some(Uuid::new_v4()), &["collections:view"], false);
    let callers = [&editor_a, &member_a, &editor_b, &loner, &outsider];
    let endpoint: Uuid = db
        .query_one("SELECT id FROM embedding_endpoints WHERE org_id IS NULL AND provider = 'local' LIMIT 1", &[])
        .await
        .expect("the stack's local service")
        .get(0);

    // One name, five bases: the app's, each organization's, a member's personal base in A,
    // and a personal base outside any organization (legacy rows; claims forbid this today).
    let name = format!("shared_{}", &Uuid::new_v4().simple().to_string()[..10]);
    let bases: Vec<(Uuid, &str, Uuid, Option<Uuid>)> = vec![
        (Uuid::new_v4(), "app", Uuid::new_v4(), None),
        (Uuid::new_v4(), "org", editor_a.id, Some(org_a)),
        (Uuid::new_v4(), "org", editor_b.id, Some(org_b)),
        (Uuid::new_v4(), "personal", member_a.id, Some(org_a)),
        (Uuid::new_v4(), "personal", loner.id, None),
    ];
    for (i, (id, scope, owner, org)) in bases.iter().enumerate() {
        db.execute(
            "INSERT INTO knowledge_bases (id, name, scope, owner_id, org_id, collection_name, embedding_provider, \
             embedding_model, embedding_dim, embedding_endpoint_id, created_at) \
             VALUES ($1, 'Shared', $2, $3, $4, $5, 'local', 'all-minilm-l6-v2', 384, $6, now() + make_interval(secs => $7))",
            &[id, scope, owner, org, &name, &endpoint, &(i as f64)],
        )
        .await
        .expect("base");
    }
    store.ensure_vector_table(&name, 384).await.expect("table");
    let sources = [Some("upload"), Some("google_drive"), None];
    let types = [Some("pdf"), Some("md"), Some("docx"), None];
    let units = [Some("Ops"), Some("Sales"), None];
    let mut chunks: Vec<Chunk> = Vec::new();
    // Each base's chunks, and unfiled ones of every tenant that no base may read.
    let owners: Vec<(Option<Uuid>, Option<Uuid>)> =
        bases.iter().map(|(id, _, _, org)| (Some(*id), *org)).chain([(None, Some(org_a)), (None, None)]).collect();
    for (kb_id, org_id) in owners {
        let documents: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
        for _ in 0..40 {
            let day = rng.below(400);
            chunks.push(Chunk {
                id: Uuid::new_v4(),
                kb_id,
                org_id,
                document_id: documents[rng.below(3)],
                source: sources[rng.below(3)],
                document_type: types[rng.below(4)],
                unit: units[rng.below(3)],
                date: (day < 365).then(|| time::Date::from_ordinal_date(2026, day as u16 + 1).expect("date")),
                embedding: rng.unit_vector(384),
            });
        }
    }
    for c in &chunks {
        db.execute(
            &format!(
                "INSERT INTO rag_{name} (id, kb_id, org_id, document_id, chunk_index, content, source, document_type, \
                 organizational_unit, document_date, filename, embedding) \
                 VALUES ($1, $2, $3, $4, 0, 'chunk', $5, $6, $7, $8, 'f.txt', '{}'::vector)",
                literal(&c.embedding)
            ),
            &[&c.id, &c.kb_id, &c.org_id, &c.document_id, &c.source, &c.document_type, &c.unit, &c.date],
        )
        .await
        .expect("chunk");
    }

    // Who reaches which base by the name: their organization's oldest (their personal base
    // in it included), else the app's.
    let reach: HashMap<Uuid, Uuid> = [
        (editor_a.id, bases[1].0),
        (member_a.id, bases[1].0),
        (editor_b.id, bases[2].0),
        (loner.id, bases[4].0),
        (outsider.id, bases[0].0),
    ]
    .into_iter()
    .collect();
    let base_org: HashMap<Uuid, Option<Uuid>> = bases.iter().map(|(id, _, _, org)| (*id, *org)).collect();
    let queries = ["quarterly revenue", "server outage", "hiring plan", "office move", "customer complaint"];
    let mut vectors = HashMap::new();
    for q in queries {
        vectors.insert(q, local_embedding(q).await);
    }
    for case in 0..60 {
        let caller = callers[rng.below(callers.len())];
        let query = queries[rng.below(queries.len())];
        let top_k = 1 + rng.below(8);
        let mut filters = serde_json::Map::new();
        let mut wanted_sources = None;
        let mut wanted_types = None;
        let mut wanted_units = None;
        let (mut from, mut to, mut parent) = (None, None, None);
        if rng.below(2) == 0 {
            let pick: Vec<&str> = ["upload", "google_drive"].into_iter().filter(|_| rng.below(2) == 0).collect();
            if !pick.is_empty() {
                filters.insert("source".into(), json!(pick));
                wanted_sources = Some(pick);
            }
        }
        if rng.below(2) == 0 {
            let pick = vec![["pdf", "md", "docx"][rng.below(3)]];
            filters.insert("document_type".into(), json!(pick));
            wanted_types = Some(pick);
        }
        if rng.below(3) == 0 {
            let pick = vec![["Ops", "Sales"][rng.below(2)]];
            filters.insert("organizational_unit".into(), json!(pick));
            wanted_units = Some(pick);
        }
        if rng.below(3) == 0 {
            let start = time::Date::from_ordinal_date(2026, 1 + rng.below(200) as u16).expect("date");
            let end = start + time::Duration::days(rng.below(200) as i64);
            filters.insert("date_from".into(), json!(start.to_string()));
            filters.insert("date_to".into(), json!(end.to_string()));
            (from, to) = (Some(start), Some(end));
        }
        let base = reach[&caller.id];
        if rng.below(5) == 0 {
            let own: Vec<&Chunk> = chunks.iter().filter(|c| c.kb_id == Some(base)).collect();
            let doc = own[rng.below(own.len())].document_id;
            filters.insert("parent_doc_id".into(), json!(doc));
            parent = Some(doc);
        }
        let body = json!({"query": query, "collections": [name], "top_k": top_k, "filters": filters, "mode": "vector"});
        let (status, answer) = stack.call_json(caller, Method::POST, "/rag/search", Some(body.clone())).await;
        assert_eq!(status, 200, "case {case}: {body}: {answer}");
        let got: Vec<String> = answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["metadata"]["chunk_id"].as_str().expect("chunk id").to_owned())
            .collect();

        let q = &vectors[query];
        let mut expected: Vec<(f32, &Chunk)> = chunks
            .iter()
            .filter(|c| c.kb_id == Some(base) && c.org_id == base_org[&base])
            .filter(|c| wanted_sources.as_ref().is_none_or(|w| c.source.is_some_and(|s| w.contains(&s))))
            .filter(|c| wanted_types.as_ref().is_none_or(|w| c.document_type.is_some_and(|s| w.contains(&s))))
            .filter(|c| wanted_units.as_ref().is_none_or(|w| c.unit.is_some_and(|s| w.contains(&s))))
            .filter(|c| from.is_none_or(|f| c.date.is_some_and(|d| d >= f)))
            .filter(|c| to.is_none_or(|t| c.date.is_some_and(|d| d <= t)))
            .filter(|c| parent.is_none_or(|p| c.document_id == p))
            .map(|c| (c.embedding.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), c))
            .collect();
        expected.sort_by(|a, b| b.0.total_cmp(&a.0));
        let expected: Vec<String> = expected.iter().take(top_k).map(|(_, c)| c.id.to_string()).collect();
        assert_eq!(got, expected, "case {case} (seed {seed}): {body}");
    }

    // An agent bound to two bases of the name (the organization's and a member's own)
    // searches their combined scope, and nothing of the other bases of that name.
    let bound = [bases[1].0, bases[3].0];
    let body = json!({"query": "server outage", "knowledge_base_ids": bound, "top_k": 50, "mode": "vector"});
    let (status, answer) = stack.call_json(&member_a, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{answer}");
    let q = &vectors["server outage"];
    let mut expected: Vec<(f32, String)> = chunks
        .iter()
        .filter(|c| c.kb_id.is_some_and(|kb| bound.contains(&kb)))
        .map(|c| (c.embedding.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), c.id.to_string()))
        .collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0));
    let expected: Vec<String> = expected.into_iter().take(50).map(|(_, id)| id).collect();
    let got: Vec<String> = answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["metadata"]["chunk_id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(got, expected, "the combined scope of the two bound bases");
    // Bound to a base it cannot read, the whole search is refused as not found.
    let body = json!({"query": "x", "knowledge_base_ids": [bases[1].0, bases[2].0]});
    assert_eq!(stack.call(&member_a, Method::POST, "/rag/search", Some(body)).await.0, 404);
}

#[tokio::test]
async fn a_selective_filter_still_returns_top_k_and_refusals_are_whole() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (status, base) = stack
        .call_json(
            &user,
            Method::POST,
            "/kb",
            Some(json!({"name": "Big", "scope": "org",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})),
        )
        .await;
    assert_eq!(status, 201, "{base}");
    let (kb_id, name) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let kb = Uuid::parse_str(kb_id).expect("uuid");
    let org: Option<Uuid> = base["org_id"].as_str().map(|s| Uuid::parse_str(s).expect("uuid"));
    let store = stack.store(2).await;
    store.ensure_vector_table(name, 384).await.expect("table");
    // 20,000 chunks, 1% of them in the unit the search asks for. The HNSW index is built
    // after the load (as a bulk load would), which takes seconds instead of a minute.
    let db = stack.db().await;
    db.batch_execute(&format!("DROP INDEX \"rag_{name}$embedding\"")).await.expect("drop index");
    db.execute(
        &format!(
            "INSERT INTO rag_{name} (id, kb_id, org_id, document_id, chunk_index, content, organizational_unit, \
                 document_type, embedding) \
             SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), i, 'chunk ' || i, CASE WHEN i % 100 = 0 THEN 'Rare' ELSE 'Common' END, \
                    CASE WHEN i % 7 = 0 THEN 'pdf' ELSE 'md' END, \
                    (SELECT array_agg(sin(i * 7 + d * 13)::real) FROM generate_series(1, 384) d)::vector \
             FROM generate_series(1, 20000) i"
        ),
        &[&kb, &org],
    )
    .await
    .expect("chunks");
    db.batch_execute(&format!(
        "CREATE INDEX \"rag_{name}$embedding\" ON rag_{name} USING hnsw (embedding vector_cosine_ops); ANALYZE rag_{name}"
    ))
    .await
    .expect("index");
    let search = |filters: Value| json!({"query": "anything at all", "collections": [name], "top_k": 10, "filters": filters, "mode": "vector"});
    let (status, answer) = stack
        .call_json(&user, Method::POST, "/rag/search", Some(search(json!({"organizational_unit": ["Rare"]}))))
        .await;
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 10, "a 1% filter still fills top_k");
    assert!(results.iter().all(|r| r["metadata"]["organizational_unit"] == "Rare"));
    // One in seven is too many to scan exactly: the HNSW index, scanned on, fills top_k too.
    let (status, answer) =
        stack.call_json(&user, Method::POST, "/rag/search", Some(search(json!({"document_type": ["pdf"]})))).await;
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 10);
    assert!(results.iter().all(|r| r["metadata"]["document_type"] == "pdf"));
    // The store's own answer for a probe, against distances computed without any index: the
    // 1% filter (estimated within the exact bound) is read, counted and ranked exactly in one
    // pass; one in seven passes more rows than the bound and goes to the index, all pdf.
    let probe: Vec<f32> = (1..=384).map(|d| (d as f32 * 0.37).cos()).collect();
    let scope = [sluice_store::ScopeBase { kb_id: kb, org_id: org }];
    let rare = sluice_store::SearchFilters { organizational_unit: Some(vec!["Rare".to_owned()]), ..Default::default() };
    let found: Vec<Uuid> = store
        .search_chunks(name, &scope, &rare, &probe, 10)
        .await
        .expect("search")
        .iter()
        .map(|h| h.chunk_id)
        .collect();
    let mut exact: Vec<(f64, Uuid)> = db
        .query(
            &format!("SELECT embedding <=> $1, id FROM rag_{name} WHERE organizational_unit = 'Rare'"),
            &[&pgvector::Vector::from(probe.clone())],
        )
        .await
        .expect("distances")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let exact: Vec<Uuid> = exact.iter().take(10).map(|(_, id)| *id).collect();
    assert_eq!(found, exact, "a filter within the bound is ranked exactly");
    let pdf = sluice_store::SearchFilters { document_type: Some(vec!["pdf".to_owned()]), ..Default::default() };
    let hits = store.search_chunks(name, &scope, &pdf, &probe, 10).await.expect("search");
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|h| h.document_type.as_deref() == Some("pdf")), "{hits:?}");
    let (_, values) =
        stack.call_json(&user, Method::GET, &format!("/rag/collections/{name}/filter-values"), None).await;
    assert_eq!(values, json!({"organizational_unit": ["Common", "Rare"]}));

    // Refusals: an empty list, a legacy expression, both forms, and a collection out of reach.
    let (status, _) = stack.call_json(&user, Method::POST, "/rag/search", Some(search(json!({"source": []})))).await;
    assert_eq!(status, 422);
    let mut legacy = search(json!({}));
    legacy["filter"] = json!("source == \"upload\"");
    assert_eq!(stack.call(&user, Method::POST, "/rag/search", Some(legacy)).await.0, 400);
    let mut both = search(json!({"parent_doc_id": Uuid::new_v4()}));
    both["filter"] = json!(format!("parent_doc_id == \"{}\"", Uuid::new_v4()));
    assert_eq!(stack.call(&user, Method::POST, "/rag/search", Some(both)).await.0, 400);
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:view"], false);
    let (_, ghost) = stack
        .call(
            &stranger,
            Method::POST,
            "/rag/search",
            Some(json!({"query": "x", "collections": ["no_such_collection_x"]})),
        )
        .await;
    let (status, refused) =
        stack.call(&stranger, Method::POST, "/rag/search", Some(json!({"query": "x", "collections": [name]}))).await;
    assert_eq!((status, refused), (404, ghost.clone()), "another tenant's collection reads as absent");
    let (own_name, _) = {
        let (_, mine) = stack
            .call_json(
                &stranger,
                Method::POST,
                "/kb",
                Some(json!({"name": "Mine", "scope": "personal",
                "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})),
            )
            .await;
        (mine["collection_name"].as_str().expect("name").to_owned(), ())
    };
    let (status, refused) = stack
        .call(&stranger, Method::POST, "/rag/search", Some(json!({"query": "x", "collections": [own_name, name]})))
        .await;
    assert_eq!((status, refused), (404, ghost), "one unreachable collection refuses the whole search");
}

#[tokio::test]
async fn a_rate_limited_query_ends_inside_the_gateways_timeout_with_sluices_503_and_retry_after() {
    use sluice_e2e::stub::{Scripted, StubProvider};
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    // The provider keeps asking for 40 s more, in the HTTP-date form.
    let later = httpdate::fmt_http_date(std::time::SystemTime::now() + std::time::Duration::from_secs(40));
    let stub = StubProvider::start(vec![Scripted::status(429, "{}").header("retry-after", &later)], 384).await;
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let body = json!({"name": "Busy", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"]});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");

    let started = std::time::Instant::now();
    let response = stack
        .http
        .post(stack.url("/rag/search"))
        .header("authorization", user.bearer())
        .json(&json!({"query": "tides", "knowledge_base_ids": [base["id"]]}))
        .send()
        .await
        .expect("search");
    let took = started.elapsed();
    assert_eq!(response.status().as_u16(), 503);
    assert!(took < std::time::Duration::from_secs(25), "past the gateway's 29 s budget: {took:?}");
    let wait: u64 = response.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((25..=40).contains(&wait), "the provider's own ask, from its date: {wait}");
    let answer: Value = response.json().await.expect("JSON");
    let message = answer["error"]["message"].as_str().expect("message");
    assert!(message.contains("local embedding provider") && message.contains("rate limiting"), "{message}");
    assert!(stub.requests() >= 2, "the search retried within its budget");
}

#[tokio::test]
async fn an_exact_identifier_in_one_chunk_of_ten_thousand_comes_first_in_hybrid_and_keyword_and_to_no_one_else() {
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let (org_a, org_b) = (Uuid::new_v4(), Uuid::new_v4());
    let reader_a = User::with(Some(org_a), &["collections:view"], false);
    let reader_b = User::with(Some(org_b), &["collections:view"], false);
    let endpoint: Uuid = db
        .query_one("SELECT id FROM embedding_endpoints WHERE org_id IS NULL AND provider = 'local' LIMIT 1", &[])
        .await
        .expect("the stack's local service")
        .get(0);
    // One name, two organizations' bases.
    let name = format!("parts_{}", &Uuid::new_v4().simple().to_string()[..10]);
    let (base_a, base_b) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, org) in [(base_a, org_a), (base_b, org_b)] {
        db.execute(
            "INSERT INTO knowledge_bases (id, name, scope, owner_id, org_id, collection_name, embedding_provider, \
             embedding_model, embedding_dim, embedding_endpoint_id) \
             VALUES ($1, 'Parts', 'org', $2, $3, $4, 'local', 'all-minilm-l6-v2', 384, $5)",
            &[&id, &Uuid::new_v4(), &Some(org), &name, &endpoint],
        )
        .await
        .expect("base");
    }
    stack.store(1).await.ensure_vector_table(&name, 384).await.expect("table");
    // 9,999 notes alike in words, random in vectors, and one naming the part.
    let table = format!("rag_{name}");
    db.execute(
        &format!(
            "INSERT INTO {table} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
             SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), g, \
                    'Maintenance note ' || g || ': the pump housing, its seals and the valve train were inspected.', \
                    ARRAY(SELECT random()::real - 0.5 FROM generate_series(1, 384) WHERE g > 0)::vector \
             FROM generate_series(1, 9999) AS g"
        ),
        &[&base_a, &org_a],
    )
    .await
    .expect("chunks");
    let answer = Uuid::new_v4();
    let text = "Replace seal kit XJ-4471-B on the pump before the next inspection.";
    db.execute(
        &format!(
            "INSERT INTO {table} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
             VALUES ($1, $2, $3, gen_random_uuid(), 0, $4, ARRAY(SELECT random()::real - 0.5 FROM generate_series(1, 384))::vector)"
        ),
        &[&answer, &base_a, &org_a, &text],
    )
    .await
    .expect("the one chunk");
    db.batch_execute(&format!("ANALYZE {table}")).await.expect("analyze");

    for mode in ["keyword", "hybrid"] {
        let body = json!({"query": "XJ-4471-B", "collections": [name], "top_k": 5, "mode": mode, "explain": true});
        let (status, found) = stack.call_json(&reader_a, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{mode}: {found}");
        let first = &found["results"][0];
        assert_eq!(first["metadata"]["chunk_id"], answer.to_string(), "{mode}: {found}");
        assert_eq!(first["explain"]["keyword"]["rank"], 1, "{mode}: {found}");
        if mode == "hybrid" {
            assert!(first["explain"]["fused"].as_f64().is_some_and(|f| f > 0.0), "{found}");
        } else {
            assert!(first["explain"]["vector"].is_null(), "a keyword search runs no vector leg: {found}");
        }
    }
    // A user's words are never a syntax error: quotes, a dangling minus, operators.
    for query in ["\"seal kit", "-", "pump & | ! <->", "'); DROP TABLE x; --"] {
        let body = json!({"query": query, "collections": [name], "mode": "keyword"});
        let (status, found) = stack.call_json(&reader_a, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{query}: {found}");
    }
    // The other organization's base holds the same name and none of it: nothing matches.
    for mode in ["keyword", "hybrid"] {
        let body = json!({"query": "XJ-4471-B", "collections": [name], "top_k": 100, "mode": mode});
        let (status, found) = stack.call_json(&reader_b, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{mode}: {found}");
        assert_eq!(found["results"], json!([]), "{mode}: another tenant's chunk leaked: {found}");
    }
}

/// BM25 by hand, from the texts themselves: the words here are their own English stems and
/// none is a stop word, so a chunk's length is its word count.
fn bm25(texts: &[&str], query: &[&str], text: &str) -> f64 {
    let chunks = texts.len() as f64;
    let average = texts.iter().map(|t| t.split_whitespace().count()).sum::<usize>() as f64 / chunks;
    let length = text.split_whitespace().count() as f64;
    query
        .iter()
        .map(|word| {
            let holding = texts.iter().filter(|t| t.split_whitespace().any(|w| w == *word)).count() as f64;
            let idf = (1.0 + (chunks - holding + 0.5) / (holding + 0.5)).ln();
            let tf = text.split_whitespace().filter(|w| w == word).count() as f64;
            idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
        })
        .sum()
}

/// A new collection's table of 3 dimensions, written straight into with `INSERT`s: its
/// name, and a base and tenant to write under.
async fn bare_collection(store: &sluice_store::Db, prefix: &str) -> (String, Uuid, Uuid) {
    let name = format!("{prefix}_{}", &Uuid::new_v4().simple().to_string()[..10]);
    store.ensure_vector_table(&name, 3).await.expect("table");
    (name, Uuid::new_v4(), Uuid::new_v4())
}

/// Writes each of `texts` into collection `name`'s table as a chunk of base `kb` under
/// tenant `org`, each its own document, all with the same vector.
async fn insert_texts(db: &tokio_postgres::Client, name: &str, kb: Uuid, org: Uuid, texts: &[&str]) {
    let sql = format!(
        "INSERT INTO rag_{name} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
         VALUES (gen_random_uuid(), $1, $2, gen_random_uuid(), 0, $3, '[1,0,0]')"
    );
    for text in texts {
        db.execute(&sql, &[&kb, &org, text]).await.expect("chunk");
    }
}

#[tokio::test]
async fn keyword_feedback_reorders_the_same_matches_by_the_words_of_the_best_chunks() {
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let store = stack.store(1).await;
    let (name, base, org) = bare_collection(&store, "feedback").await;
    let texts = [
        "gasket pump",
        "gasket impel",
        "gasket pump impel",
        "gasket seal ring lamp hose",
        "gasket pump impel volut hous",
        "valv door",
    ];
    insert_texts(&db, &name, base, org, &texts).await;
    // The scope also holds another tenant's base, empty. Chunks under the two bases' ids with
    // each other's tenant are in neither base: they match nothing, but every added word's idf
    // would change were they counted.
    let (other_base, other_org) = (Uuid::new_v4(), Uuid::new_v4());
    for (kb, tenant) in [(base, other_org), (other_base, org)] {
        insert_texts(&db, &name, kb, tenant, &["pump impel", "pump volut", "pump hous ring", "valv"]).await;
    }
    let scope = [
        sluice_store::ScopeBase { kb_id: base, org_id: Some(org) },
        sluice_store::ScopeBase { kb_id: other_base, org_id: Some(other_org) },
    ];
    let feedback = sluice_domain::config::KeywordFeedback { chunks: 3, terms: 20, original_weight_percent: 50 };
    let search = async |query: &str, feedback| {
        let reading = sluice_domain::config::KeywordReading { feedback, time_budget: None };
        let hits = store.search_keyword(&name, &scope, &Default::default(), query, 10, reading).await.expect("search");
        hits.into_iter().map(|h| (h.content, h.score)).collect::<Vec<_>>()
    };
    let plain = search("gasket", None).await;
    let score_of = |hits: &[(String, f64)], text: &str| hits.iter().find(|(t, _)| t == text).expect("a hit").1;
    let (pumps, seals) = ("gasket pump impel volut hous", "gasket seal ring lamp hose");
    assert_eq!(score_of(&plain, pumps), score_of(&plain, seals), "one word, the same length: a tie");

    // RM3 by hand: each word's share of each of the three best chunks, weighed by the chunk's
    // score, joins the query so that the query keeps half the weight.
    let matching: Vec<&str> = texts.iter().copied().filter(|t| t.contains("gasket")).collect();
    let best = ["gasket pump", "gasket impel", "gasket pump impel"];
    let total: f64 = best.iter().map(|t| bm25(&texts, &["gasket"], t)).sum();
    let mut weights: HashMap<&str, f64> = HashMap::new();
    for text in &best {
        let length = text.split_whitespace().count() as f64;
        for word in text.split_whitespace() {
            *weights.entry(word).or_default() += bm25(&texts, &["gasket"], text) / total / length;
        }
    }
    let shares: f64 = weights.values().sum();
    weights.values_mut().for_each(|w| *w /= shares);
    *weights.get_mut("gasket").expect("gasket") += 1.0;
    let expected = |text: &str| weights.iter().map(|(word, w)| w * bm25(&texts, &[word], text)).sum::<f64>();

    let expanded = search("gasket", Some(feedback)).await;
    assert_eq!(expanded.len(), matching.len(), "the same chunks match: {expanded:?}");
    for (text, score) in &expanded {
        assert!((score - expected(text)).abs() < 1e-9, "{text}: {score} is not {}", expected(text));
    }
    assert!(score_of(&expanded, pumps) > score_of(&expanded, seals), "the best chunks' words lift their like");
    // A phrase asks for its own wording: no feedback.
    assert_eq!(search("\"gasket pump\"", Some(feedback)).await, search("\"gasket pump\"", None).await);
}

#[tokio::test]
async fn a_query_word_its_text_does_not_hold_is_still_counted_for_bm25() {
    // PostgreSQL reads `http://example.org` in a query as the words `http` and `/example.org`,
    // but in a text (as `to_tsvector` reads the query's own text) as `example.org`: the leg
    // counts the query's words in the statement that parses it, from that text, so `http` is
    // missing there and must be counted apart — else it would weigh as a word no chunk holds.
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let store = stack.store(1).await;
    let (name, base, org) = bare_collection(&store, "parsed").await;
    let texts = ["http pump", "http http seal", "pump kit", "valv door", "seal lamp"];
    insert_texts(&db, &name, base, org, &texts).await;
    let scope = [sluice_store::ScopeBase { kb_id: base, org_id: Some(org) }];
    let hits = store
        .search_keyword(&name, &scope, &Default::default(), "pump http://example.org", 10, Default::default())
        .await
        .expect("keyword search");
    let matching: Vec<&str> = texts.iter().copied().filter(|t| t.contains("http") || t.contains("pump")).collect();
    assert_eq!(hits.len(), matching.len(), "{hits:?}");
    for hit in &hits {
        let expected = bm25(&texts, &["http", "pump"], &hit.content);
        assert!((hit.score - expected).abs() < 1e-9, "{}: {} is not BM25's {expected}", hit.content, hit.score);
    }
}

#[tokio::test]
async fn past_its_time_budget_the_keyword_leg_answers_with_the_words_it_has_read() {
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let store = stack.store(1).await;
    let (name, base, org) = bare_collection(&store, "budget").await;
    // 2,250 long chunks hold "gasket" (read first: rarer), 2,750 one-word chunks "pump"; BM25
    // ranks a short "pump" chunk above any long "gasket" one, so the exact answer needs the
    // second, commoner word read. (A scope of a few thousand chunks would be read whole at once.)
    let sql = format!(
        "INSERT INTO rag_{name} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
         SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), g, \
                CASE WHEN g <= 2250 THEN 'gasket' || repeat(' lamp', 20) ELSE 'pump' END, '[1,0,0]' \
         FROM generate_series(1, 5000) AS g"
    );
    db.execute(&sql, &[&base, &org]).await.expect("chunks");
    let scope = [sluice_store::ScopeBase { kb_id: base, org_id: Some(org) }];
    let search = async |time_budget| {
        let reading = sluice_domain::config::KeywordReading { feedback: None, time_budget };
        let hits = store.search_keyword(&name, &scope, &Default::default(), "gasket pump", 2, reading).await;
        hits.expect("search").into_iter().map(|h| h.content).collect::<Vec<_>>()
    };
    assert_eq!(search(None).await, ["pump", "pump"], "read whole, the exact answer");
    let hurried = search(Some(std::time::Duration::from_millis(1))).await;
    assert_eq!(hurried.len(), 2, "a full answer: {hurried:?}");
    assert!(hurried.iter().all(|c| c.starts_with("gasket")), "the rarer word's best: {hurried:?}");
    // An answer short of the depth reads on, budget or not: never fewer rows than match.
    let reading = sluice_domain::config::KeywordReading {
        feedback: None,
        time_budget: Some(std::time::Duration::from_millis(1)),
    };
    let all = store.search_keyword(&name, &scope, &Default::default(), "gasket pump", 5000, reading).await;
    assert_eq!(all.expect("search").len(), 5000);
}

#[tokio::test]
async fn keyword_scores_are_bm25_over_the_callers_own_bases_through_every_write() {
    let stack = Stack::from_env().await;
    let db = stack.db().await;
    let store = stack.store(1).await;
    let (org_a, org_b) = (Uuid::new_v4(), Uuid::new_v4());
    let name = format!("terms_{}", &Uuid::new_v4().simple().to_string()[..10]);
    store.ensure_vector_table(&name, 3).await.expect("table");
    let table = format!("rag_{name}");
    let (base_a, base_b) = (Uuid::new_v4(), Uuid::new_v4());
    let insert = |kb: Uuid, org: Uuid, text: String| {
        let sql = format!(
            "INSERT INTO {table} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
             VALUES (gen_random_uuid(), $1, $2, gen_random_uuid(), 0, $3, '[1,0,0]')"
        );
        let db = &db;
        async move { db.execute(&sql, &[&kb, &org, &text]).await.expect("chunk") }
    };
    let mut texts = vec!["pump seal kit", "pump pump blue", "blue kit", "seal", "green valv door lamp"];
    for text in &texts {
        insert(base_a, org_a, (*text).to_owned()).await;
    }
    let scope_a = [sluice_store::ScopeBase { kb_id: base_a, org_id: Some(org_a) }];
    let scores = async |store: &sluice_store::Db| -> HashMap<String, f64> {
        let hits = store
            .search_keyword(&name, &scope_a, &Default::default(), "pump kit", 50, Default::default())
            .await
            .expect("keyword search");
        hits.into_iter().map(|h| (h.content, h.score)).collect()
    };
    let check = |found: &HashMap<String, f64>, texts: &[&str]| {
        let matching: Vec<&&str> = texts.iter().filter(|t| t.contains("pump") || t.contains("kit")).collect();
        assert_eq!(found.len(), matching.len(), "{found:?}");
        for text in matching {
            let expected = bm25(texts, &["pump", "kit"], text);
            let got = found[*text];
            assert!((got - expected).abs() < 1e-9, "{text}: {got} is not BM25's {expected}");
        }
    };
    let before = scores(&store).await;
    check(&before, &texts);

    // Another tenant's base under the same name, full of the same words: not one score moves.
    for _ in 0..200 {
        insert(base_b, org_b, "pump pump pump kit".to_owned()).await;
    }
    assert_eq!(scores(&store).await, before, "another tenant's words weighed on a score");

    // Every kind of write keeps the statistics exact: an update, a delete, an insert.
    db.execute(&format!("UPDATE {table} SET content = 'blue kit kit' WHERE content = 'blue kit'"), &[])
        .await
        .expect("update");
    db.execute(&format!("DELETE FROM {table} WHERE content = 'seal'"), &[]).await.expect("delete");
    texts = vec!["pump seal kit", "pump pump blue", "blue kit kit", "green valv door lamp", "kit"];
    insert(base_a, org_a, "kit".to_owned()).await;
    check(&scores(&store).await, &texts);

    // Many chunks holding a common word: the rarest words are read first, and the answer is
    // still exactly BM25's best, whether the rare word's chunks fill it or not.
    let table_rows = format!(
        "INSERT INTO {table} (id, kb_id, org_id, document_id, chunk_index, content, embedding) \
         SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), g, \
                repeat('pump ', g % 3 + 1) || 'valve' || CASE WHEN g % 100 = 0 THEN ' gasket' ELSE '' END, '[1,0,0]' \
         FROM generate_series(1, 2500) AS g"
    );
    db.execute(&table_rows, &[&base_a, &org_a]).await.expect("common chunks");
    let bulk: Vec<String> = (1..=2500)
        .map(|g| format!("{}valve{}", "pump ".repeat(g % 3 + 1), if g % 100 == 0 { " gasket" } else { "" }))
        .collect();
    let all: Vec<&str> = texts.iter().copied().chain(bulk.iter().map(String::as_str)).collect();
    let mut expected: Vec<f64> = all
        .iter()
        .filter(|t| t.contains("pump") || t.contains("gasket"))
        .map(|t| bm25(&all, &["gasket", "pump"], t))
        .collect();
    expected.sort_by(|a, b| b.total_cmp(a));
    for depth in [10, 50] {
        let hits = store
            .search_keyword(&name, &scope_a, &Default::default(), "gasket pump", depth, Default::default())
            .await
            .expect("keyword search");
        let got: Vec<f64> = hits.iter().map(|h| h.score).collect();
        assert_eq!(got.len(), depth as usize);
        for (rank, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert!((got - want).abs() < 1e-9, "depth {depth}, rank {rank}: {got} is not BM25's {want}");
        }
    }

    // The other base emptied, its statistics go with its last chunk.
    db.execute(&format!("DELETE FROM {table} WHERE kb_id = $1"), &[&base_b]).await.expect("delete b");
    let left: i64 = db
        .query_one(&format!("SELECT count(*) FROM \"{table}$terms\" WHERE kb_id = $1"), &[&base_b])
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 0);

    // The statistics are the triggers' alone: the functions' logins read them, never write.
    for login in [&stack.vector_login, &stack.app_login] {
        let client = sluice_store::connect_once(&stack.db_target, login).await.expect("login");
        client.query(&format!("SELECT count(*) FROM \"{table}$terms\""), &[]).await.expect("read");
        let refused = client
            .execute(&format!("UPDATE \"{table}$terms\" SET chunks = chunks + 1"), &[])
            .await
            .expect_err("a login wrote the statistics");
        assert_eq!(refused.code(), Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    }
    // Dropping the collection drops its statistics.
    db.execute("SELECT sluice_drop_vector_table($1)", &[&name]).await.expect("drop");
    let gone: bool =
        db.query_one("SELECT to_regclass($1) IS NULL", &[&format!("{table}$terms")]).await.expect("regclass").get(0);
    assert!(gone);
}

#[tokio::test]
async fn a_base_reads_its_words_with_the_text_search_language_it_was_made_with() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let base = |extra: Value| {
        let mut body = json!({"name": "Words", "scope": "org", "embedding_provider": "local",
            "embedding_model": "all-minilm-l6-v2"});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    let (status, refused) =
        stack.call_json(&user, Method::POST, "/kb", Some(base(json!({"text_search_language": "klingon"})))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["text_search_language"].is_string(), "{refused}");

    // `simple` keeps every word; English drops "the" and "who" as stop words.
    let (status, simple) =
        stack.call_json(&user, Method::POST, "/kb", Some(base(json!({"text_search_language": "simple"})))).await;
    assert_eq!((status, simple["text_search_language"].as_str()), (201, Some("simple")), "{simple}");
    let (status, english) = stack.call_json(&user, Method::POST, "/kb", Some(base(json!({})))).await;
    assert_eq!((status, english["text_search_language"].as_str()), (201, Some("english")), "{english}");
    for kb in [&simple, &english] {
        let kb = kb["id"].as_str().expect("id");
        stack.upload_document(&user, kb, "band.txt", b"The Who played at the festival all night.").await;
        stack.upload_document(&user, kb, "garden.txt", b"Tomatoes want sun and a stake to climb.").await;
        stack.indexed(&user, kb).await;
    }
    let ask = async |kb: &Value| {
        let body = json!({"query": "the who", "knowledge_base_ids": [kb["id"]], "mode": "keyword"});
        let (status, found) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{found}");
        found["results"].as_array().expect("results").iter().map(|r| r["filename"].clone()).collect::<Vec<_>>()
    };
    assert_eq!(ask(&simple).await, [json!("band.txt")]);
    assert_eq!(ask(&english).await, Vec::<Value>::new(), "English reads no word to look for in \"the who\"");

    // A base joining the name adopts the way it reads words, and may not ask another.
    let name = simple["collection_name"].as_str().expect("name");
    let (status, joined) =
        stack.call_json(&user, Method::POST, "/kb", Some(base(json!({"collection_name": name})))).await;
    assert_eq!((status, joined["text_search_language"].as_str()), (201, Some("simple")), "{joined}");
    let other = base(json!({"collection_name": name, "text_search_language": "english"}));
    let (status, refused) = stack.call_json(&user, Method::POST, "/kb", Some(other)).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["text_search_language"].is_string(), "{refused}");
    // Fixed at creation.
    let path = format!("/kb/{}", simple["id"].as_str().expect("id"));
    let (status, refused) =
        stack.call_json(&user, Method::PATCH, &path, Some(json!({"text_search_language": "english"}))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["text_search_language"].is_string(), "{refused}");
    let (status, kept) =
        stack.call_json(&user, Method::PATCH, &path, Some(json!({"text_search_language": "simple"}))).await;
    assert_eq!((status, kept["text_search_language"].as_str()), (200, Some("simple")), "{kept}");
}

#[tokio::test]
async fn a_chunk_is_embedded_and_found_by_its_title_and_headings_and_a_reindex_pays_only_for_a_new_context() {
    let stack = Stack::from_env().await;
    let stub = sluice_e2e::stub::StubProvider::start(vec![sluice_e2e::stub::StubProvider::sized()], 384).await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let body = json!({"name": "Manuals", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"],
        "ingestion_config": {"chunk_size": 120, "chunk_overlap": 0, "chunking_strategy": "markdown"}});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();
    // Sections (`##`), no title heading (`#`): the file name titles the document.
    let text = "## Maintenance\nRoutine work on the pump, part by part.\n### Seals\nThey wear with every start; check them for weeping at the shaft.\n\n\
                Replace them every spring, before the irrigation season starts in earnest.\n\n\
                Order spares a month ahead: the supplier takes three weeks to ship them.\n";
    stack.upload_document(&user, &kb, "Centrifugal Pump.md", text.as_bytes()).await;
    stack.indexed(&user, &kb).await;

    // What was embedded: the title, the heading path, then the chunk.
    let embedded = stub.input_texts();
    assert!(embedded.len() >= 4, "{embedded:?}");
    assert!(embedded[0].starts_with("Centrifugal Pump\nMaintenance\n\n## Maintenance"), "{embedded:?}");
    for input in &embedded[1..] {
        assert!(input.starts_with("Centrifugal Pump\nMaintenance > Seals\n\n"), "{input:?}");
    }
    let keyword = async |query: &str| {
        let body = json!({"query": query, "knowledge_base_ids": [kb], "mode": "keyword", "top_k": 20});
        let (status, found) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{found}");
        found["results"].as_array().expect("results").clone()
    };
    // Found by the title and the heading its own text never names; returned unchanged.
    let by_title = keyword("centrifugal").await;
    assert_eq!(by_title.len(), embedded.len(), "every chunk of the document: {by_title:?}");
    let by_heading = keyword("seals").await;
    assert_eq!(by_heading.len(), embedded.len() - 1, "the section's chunks: {by_heading:?}");
    let unnamed = by_heading
        .iter()
        .find(|hit| !hit["content"].as_str().expect("content").contains("Seals"))
        .expect("a chunk whose text never names its section");
    assert_eq!(unnamed["metadata"]["heading"], json!(["Maintenance", "Seals"]), "{unnamed}");
    assert!(by_title.iter().all(|hit| !hit["content"].as_str().expect("content").contains("Centrifugal")));

    let reindexed = async || {
        let (status, started) = stack.call_json(&user, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
        assert_eq!(status, 202, "{started}");
        let began = std::time::Instant::now();
        loop {
            let (_, ingestion) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
            if ingestion["reindexing"].is_null() && ingestion["indexing_status"] == "complete" {
                break;
            }
            assert!(began.elapsed() < std::time::Duration::from_secs(60), "still re-indexing: {ingestion}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    // An unchanged context embeds nothing; a new one embeds each chunk once.
    let paid = stub.inputs();
    reindexed().await;
    assert_eq!(stub.inputs(), paid, "an unchanged re-index embedded again");
    let patch = json!({"ingestion_config": {"chunk_context": "none"}});
    let (status, patched) = stack.call_json(&user, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    reindexed().await;
    assert_eq!(stub.inputs(), paid + embedded.len(), "a new context embeds each chunk once");
    assert!(stub.input_texts()[paid..].iter().all(|input| !input.contains("Centrifugal")));
    assert_eq!(keyword("centrifugal").await, Vec::<Value>::new(), "no title indexed under chunk_context none");
    reindexed().await;
    assert_eq!(stub.inputs(), paid + embedded.len());
}

#[tokio::test]
async fn grouped_by_document_each_document_answers_once_with_its_other_chunks_as_citations() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body = json!({"name": "Pilots", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"chunk_size": 100, "chunk_overlap": 0}});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();
    // Three paragraphs about the pilot boat in one document, one in another.
    let long = "The pilot boat leaves the north quay at dawn with two pilots aboard.\n\n\
                The pilot boat returns at noon once the tankers are berthed safely.\n\n\
                The pilot boat is refuelled at the east pontoon every Friday evening.\n";
    stack.upload_document(&user, &kb, "pilots.txt", long.as_bytes()).await;
    stack.upload_document(&user, &kb, "ferry.txt", b"The ferry also carries a pilot boat spare engine.").await;
    stack.indexed(&user, &kb).await;
    let search = async |extra: Value| {
        let mut body = json!({"query": "pilot boat", "knowledge_base_ids": [kb], "mode": "keyword", "top_k": 10});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await
    };
    let (status, flat) = search(json!({})).await;
    assert_eq!(status, 200, "{flat}");
    let flat = flat["results"].as_array().expect("results").clone();
    assert_eq!(flat.len(), 4, "every matching chunk: {flat:?}");

    let (status, grouped) = search(json!({"group_by": "document"})).await;
    assert_eq!(status, 200, "{grouped}");
    let grouped = grouped["results"].as_array().expect("results").clone();
    let names: Vec<&str> = grouped.iter().filter_map(|r| r["filename"].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["ferry.txt", "pilots.txt"], "one hit per document: {grouped:?}");
    let pilots = grouped.iter().find(|r| r["filename"] == "pilots.txt").expect("pilots.txt");
    let cited = pilots["citations"].as_array().expect("citations");
    assert_eq!(cited.len(), 2, "its two other chunks: {pilots}");
    // The leader is the document's best chunk, its citations the rest in order, and together
    // they are exactly the document's hits of the flat search.
    let flat_of_pilots: Vec<&Value> = flat.iter().filter(|r| r["filename"] == "pilots.txt").collect();
    assert_eq!(pilots["chunk_index"], flat_of_pilots[0]["chunk_index"]);
    let cited_indexes: Vec<&Value> = cited.iter().map(|c| &c["chunk_index"]).collect();
    let flat_rest: Vec<&Value> = flat_of_pilots[1..].iter().map(|r| &r["chunk_index"]).collect();
    assert_eq!(cited_indexes, flat_rest);
    assert!(cited.iter().all(|c| c["chunk_id"].is_string() && c["score"].is_number() && c["char_start"].is_number()));
    let ferry = grouped.iter().find(|r| r["filename"] == "ferry.txt").expect("ferry.txt");
    assert_eq!(ferry["citations"], json!([]));
    // top_k counts documents.
    let (_, one) = search(json!({"group_by": "document", "top_k": 1})).await;
    assert_eq!(one["results"].as_array().map(Vec::len), Some(1), "{one}");
    // Any other grouping is refused naming the field.
    let (status, refused) = search(json!({"group_by": "page"})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["group_by"].is_string(), "{refused}");
}
