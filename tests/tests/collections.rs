//! Collection names on the running stack: a name mid-teardown or holding another tenant's
//! unfiled content is not free; deletes queue their teardown with the rows they change;
//! vector tables are created once, at their width, and told from the schema's own tables.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use uuid::Uuid;

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", &Uuid::new_v4().simple().to_string()[..10])
}

fn local_base(collection: &str, scope: &str) -> Value {
    json!({"name": "Handbook", "scope": scope, "collection_name": collection,
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})
}

fn conflict_field(answer: &Value) -> bool {
    answer["error"]["details"]["fields"]["collection_name"].is_string()
}

/// Uploads a small document into the base and waits until it is indexed; its id.
async fn indexed_document(stack: &Stack, user: &User, kb_id: &str, text: &str) -> Uuid {
    let answer = stack.upload_document(user, kb_id, "note.md", text.as_bytes()).await;
    let started = std::time::Instant::now();
    loop {
        let (_, status) = stack.call_json(user, Method::GET, &format!("/kb/{kb_id}/ingestion"), None).await;
        if status["indexing_status"] == "complete" {
            assert_eq!(status["indexed_count"], 1, "{status}");
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "not indexed: {status}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    Uuid::parse_str(answer["tracking_id"].as_str().expect("id")).expect("uuid")
}

/// Waits until `check` holds, for at most 30 seconds.
async fn eventually(what: &str, check: impl AsyncFnMut() -> bool) {
    sluice_e2e::eventually(what, std::time::Duration::from_secs(30), check).await;
}

#[tokio::test]
async fn a_deleted_base_is_torn_down_after_its_commit_and_its_name_released() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("gone");
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 201, "{base}");
    let id = base["id"].as_str().expect("id");
    let document = indexed_document(&stack, &owner, id, "# Gone\n\nSoon deleted.\n").await;
    assert!(!stack.keys_under(&format!("documents/{id}/")).await.is_empty());

    let (status, queued) = stack.call_json(&owner, Method::DELETE, &format!("/kb/{id}"), None).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!((queued["drops_table"].clone(), queued["cleared"].clone()), (json!(true), json!(false)));
    assert_eq!(stack.call(&owner, Method::GET, &format!("/kb/{id}"), None).await.0, 404);
    let db = stack.db().await;
    let rows: i64 =
        db.query_one("SELECT count(*) FROM rag_documents WHERE id = $1", &[&document]).await.expect("count").get(0);
    assert_eq!(rows, 0, "the base's documents go with it, in the request");
    let teardown = Uuid::parse_str(queued["teardown_id"].as_str().expect("id")).expect("uuid");
    let outbox: Value = db
        .query_one("SELECT payload FROM outbox WHERE id = $1 AND topic = 'teardown'", &[&teardown])
        .await
        .expect("the outbox row committed with the delete")
        .get(0);
    assert_eq!(outbox["collection_name"], name.as_str());

    // After the commit the teardown drops the table, releases the name, removes the files.
    let table = format!("rag_{name}");
    eventually("the table dropped and the name released", async || {
        let row = db
            .query_one(
                "SELECT to_regclass($1) IS NULL, NOT EXISTS (SELECT 1 FROM collection_teardowns WHERE collection_name = $2)",
                &[&table, &name],
            )
            .await
            .expect("state");
        row.get::<_, bool>(0) && row.get::<_, bool>(1)
    })
    .await;
    eventually("the stored files removed", async || {
        stack.keys_under(&format!("documents/{id}/")).await.is_empty()
            && stack.keys_under(&format!("parsed/{document}")).await.is_empty()
    })
    .await;
    let (status, again) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 201, "the released name is free: {again}");

    // A redelivered teardown finds the end state and changes nothing.
    let job: sluice_store::TeardownJob = serde_json::from_value(outbox).expect("job");
    let store = stack.store(2).await;
    store.finish_teardown(&job, std::time::Duration::from_secs(5)).await.expect("again");
    assert_eq!(
        stack.call(&owner, Method::GET, &format!("/kb/{}", again["id"].as_str().expect("id")), None).await.0,
        200
    );
}

#[tokio::test]
async fn a_name_reserved_for_a_teardown_is_refused_to_every_claim() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("reserved");
    let db = stack.db().await;
    let reservation = Uuid::new_v4();
    db.execute(
        "INSERT INTO collection_teardowns (id, collection_name, kb_id, drop_table) VALUES ($1, $2, $3, true)",
        &[&reservation, &name, &Uuid::new_v4()],
    )
    .await
    .expect("reservation");
    let (status, refused) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 409, "{refused}");
    assert!(conflict_field(&refused) && refused.to_string().contains("teardown"), "{refused}");
    let embedding = json!({"embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, refused) =
        stack.call_json(&owner, Method::POST, &format!("/rag/collections/{name}"), Some(embedding)).await;
    assert_eq!(status, 409, "{refused}");
    db.execute("DELETE FROM collection_teardowns WHERE id = $1", &[&reservation]).await.expect("release");
    assert_eq!(stack.call(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await.0, 201);
}

#[tokio::test]
async fn a_default_base_is_cleared_not_deleted_and_a_shared_name_is_not_reserved() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("default");
    let mut body = local_base(&name, "personal");
    body["is_default"] = true.into();
    let (_, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    let id = base["id"].as_str().expect("id");
    let (status, queued) = stack.call_json(&owner, Method::DELETE, &format!("/rag/collections/{name}"), None).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!((queued["kb_id"].as_str(), queued["cleared"].clone()), (Some(id), json!(true)));
    assert_eq!(stack.call(&owner, Method::GET, &format!("/kb/{id}"), None).await.0, 200, "the default stays");

    let shared = unique("shared");
    let (_, first) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&shared, "personal"))).await;
    let (status, second) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&shared, "personal"))).await;
    assert_eq!(status, 201, "{second}");
    let first_id = first["id"].as_str().expect("id").to_owned();
    let second_id = second["id"].as_str().expect("id").to_owned();
    indexed_document(&stack, &owner, &first_id, "# First\n\nthe first base's note\n").await;
    indexed_document(&stack, &owner, &second_id, "# Second\n\nthe second base's note\n").await;
    let (status, queued) =
        stack.call_json(&owner, Method::DELETE, &format!("/kb/{}", first["id"].as_str().expect("id")), None).await;
    assert_eq!(status, 202);
    assert_eq!(queued["drops_table"], false, "a sibling still holds the table: {queued}");
    let db = stack.db().await;
    let chunks_of = |kb: String| {
        let (db, table) = (&db, format!("rag_{shared}"));
        async move {
            db.query_one(&format!("SELECT count(*) FROM {table} WHERE kb_id = $1::text::uuid"), &[&kb])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    eventually("the deleted base's chunks removed", async || chunks_of(first_id.clone()).await == 0).await;
    assert_eq!(chunks_of(second_id.clone()).await, 1, "the sibling keeps its chunks and the table");
    let (status, third) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&shared, "personal"))).await;
    assert_eq!(status, 201, "a name a base still holds is not reserved: {third}");
}

#[tokio::test]
async fn a_name_holding_another_tenants_unfiled_content_is_not_free() {
    let stack = Stack::from_env().await;
    let (org_x, org_y) = (Uuid::new_v4(), Uuid::new_v4());
    let db = stack.db().await;
    let unfiled = |name: String, org: Option<Uuid>, status: &'static str, vector: Option<Uuid>| {
        let db = &db;
        async move {
            db.execute(
                "INSERT INTO rag_documents (id, collection_name, org_id, writer_kind, filename, filesize, filetype, \
                 status, vector_document_id) VALUES ($1, $2, $3, 'operator', 'a.txt', 1, 'txt', $4, $5)",
                &[&Uuid::new_v4(), &name, &org, &status, &vector],
            )
            .await
            .expect("unfiled row");
            name
        }
    };
    let editor = |org| User::with(Some(org), &["collections:edit"], false);
    // Another organization's indexed chunks, or an ingest still running, hold the name.
    for (status, vector) in [("done", Some(Uuid::new_v4())), ("processing", None)] {
        let name = unfiled(unique("unfiled"), Some(org_x), status, vector).await;
        let (code, refused) =
            stack.call_json(&editor(org_y), Method::POST, "/kb", Some(local_base(&name, "org"))).await;
        assert_eq!(code, 409, "{status}: {refused}");
        assert!(conflict_field(&refused));
        let (code, refused) =
            stack.call_json(&User::new(), Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
        assert_eq!(code, 409, "outside any organization: {refused}");
        let (code, own) = stack.call_json(&editor(org_x), Method::POST, "/kb", Some(local_base(&name, "org"))).await;
        assert_eq!(code, 201, "the organization whose content it is: {own}");
    }
    // A failed row with no vector describes no chunk; an app admin may adopt an operator's import.
    let failed = unfiled(unique("failed"), Some(org_x), "error", None).await;
    assert_eq!(stack.call(&editor(org_y), Method::POST, "/kb", Some(local_base(&failed, "org"))).await.0, 201);
    let global = unfiled(unique("operator"), None, "done", Some(Uuid::new_v4())).await;
    assert_eq!(stack.call(&editor(org_y), Method::POST, "/kb", Some(local_base(&global, "org"))).await.0, 409);
    let admin = User::with(None, &[], true);
    assert_eq!(stack.call(&admin, Method::POST, "/kb", Some(local_base(&global, "app"))).await.0, 201);
}

#[tokio::test]
async fn a_collection_is_created_and_read_by_name_within_reach() {
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let editor = User::with(org, &["collections:edit"], false);
    let viewer = User::with(org, &["collections:view"], false);
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let name = unique("byname");
    let (status, base) = stack
        .call_json(
            &editor,
            Method::POST,
            &format!("/rag/collections/{name}"),
            Some(json!({"embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})),
        )
        .await;
    assert_eq!(status, 201, "{base}");
    assert_eq!((base["scope"].as_str(), base["collection_name"].as_str()), (Some("org"), Some(name.as_str())));
    let (status, info) = stack.call_json(&viewer, Method::GET, &format!("/rag/collections/{name}/info"), None).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!(
        info,
        json!({"name": name, "knowledge_base_ids": [base["id"]], "indexing_status": "complete", "processing_count": 0, "indexed_count": 0,
            "failed_count": 0, "document_count": 0, "total_vectors": 0,
            "embedding_model": "all-minilm-l6-v2", "embedding_dim": 384})
    );
    let (_, ghost) = stack.call(&stranger, Method::GET, "/rag/collections/never_made_anywhere/info", None).await;
    let (status, refused) = stack.call(&stranger, Method::GET, &format!("/rag/collections/{name}/info"), None).await;
    assert_eq!((status, refused), (404, ghost));
    let (status, refused) = stack
        .call_json(
            &editor,
            Method::POST,
            &format!("/rag/collections/{name}"),
            Some(json!({"collection_name": "other"})),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    let (status, refused) = stack.call_json(&editor, Method::POST, "/rag/collections/Bad-Name", None).await;
    assert_eq!(status, 400, "{refused}");
    assert!(conflict_field(&refused), "the name is the field at fault: {refused}");
}

#[tokio::test]
async fn vector_tables_are_created_once_at_their_width_and_never_mistaken_for_the_schema() {
    let stack = Stack::from_env().await;
    let db = stack.store(24).await;
    let name = unique("vectors");
    let creates = (0..12).map(|_| db.ensure_vector_table(&name, 384));
    for created in futures_util::future::join_all(creates).await {
        created.expect("concurrent first writes all succeed");
    }
    assert_eq!(db.vector_table_width(&name).await.expect("width"), Some(384));
    assert!(matches!(
        db.ensure_vector_table(&name, 1536).await,
        Err(sluice_store::VectorTableError::Width { existing: 384, wanted: 1536 })
    ));
    let client = stack.db().await;
    let indexes: Vec<String> = client
        .query("SELECT indexdef FROM pg_indexes WHERE tablename = $1", &[&format!("rag_{name}")])
        .await
        .expect("indexes")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(indexes.iter().any(|d| d.contains("USING hnsw (embedding vector_cosine_ops)")), "{indexes:?}");
    for column in ["source_path", "filename", "content_hash"] {
        assert!(indexes.iter().any(|d| d.contains(&format!("USING hash ({column})"))), "{column}: {indexes:?}");
    }
    let schema = db.schema_tables().await.expect("schema");
    assert!(!schema.contains(&format!("rag_{name}")), "a vector table is not the schema's");
    assert!(schema.contains(&"rag_documents".to_owned()));
    assert!(db.ensure_vector_table("documents", 384).await.is_err(), "the store refuses a schema table's name");

    let wide = unique("wide");
    db.ensure_vector_table(&wide, 3072).await.expect("a 3072-wide table");
    let indexdef: String = client
        .query_one("SELECT indexdef FROM pg_indexes WHERE indexname = $1", &[&format!("rag_{wide}$embedding")])
        .await
        .expect("index")
        .get(0);
    assert!(indexdef.contains("halfvec_cosine_ops"), "{indexdef}");
}

#[tokio::test]
async fn no_collection_name_collides_with_another_collections_index_or_the_schemas() {
    let stack = Stack::from_env().await;
    let db = stack.store(4).await;
    // Both orders: the shorter name first, then the one spelling its index's old name, and
    // the other way round. Each gets its own table.
    let first = unique("clash");
    for (a, b) in [(first.clone(), format!("{first}_kb_idx")), (format!("{first}x_pkey"), format!("{first}x"))] {
        db.ensure_vector_table(&a, 8).await.unwrap_or_else(|e| panic!("{a}: {e}"));
        db.ensure_vector_table(&b, 8).await.unwrap_or_else(|e| panic!("{b}: {e}"));
        assert_eq!(db.vector_table_width(&a).await.expect("width"), Some(8));
        assert_eq!(db.vector_table_width(&b).await.expect("width"), Some(8));
    }
    // A name whose table would be one of the schema's own indexes is refused by name, through
    // the API, before anything is created.
    let owner = User::new();
    let (status, refused) =
        stack.call_json(&owner, Method::POST, "/kb", Some(local_base("documents_kb_idx", "personal"))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["collection_name"].is_string(), "{refused}");
    assert!(db.schema_tables().await.expect("schema").contains(&"rag_documents_kb_idx".to_owned()));
}

#[tokio::test]
async fn a_teardown_lost_after_its_commit_is_finished_by_the_sweep() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("lost");
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 201, "{base}");
    let kb = Uuid::parse_str(base["id"].as_str().expect("id")).expect("uuid");
    let store = stack.store(2).await;
    store.ensure_vector_table(&name, 384).await.expect("table");
    // What a delete commits when its job is then lost: the row gone, the name reserved an
    // hour and more ago, the job in the outbox marked sent.
    let db = stack.db().await;
    let teardown = Uuid::new_v4();
    let job = json!({"teardown_id": teardown, "collection_name": name, "kb_id": kb, "drop_table": true,
        "cleared": false, "document_ids": [], "objects": []});
    db.batch_execute("BEGIN").await.expect("begin");
    db.execute("DELETE FROM knowledge_bases WHERE id = $1", &[&kb]).await.expect("delete");
    db.execute(
        "INSERT INTO collection_teardowns (id, collection_name, kb_id, drop_table, reserved_at) \
         VALUES ($1, $2, $3, true, now() - interval '2 hours')",
        &[&teardown, &name, &kb],
    )
    .await
    .expect("reservation");
    db.execute(
        "INSERT INTO outbox (id, topic, payload, dispatched_at) VALUES ($1, 'teardown', $2, now() - interval '2 hours')",
        &[&teardown, &job],
    )
    .await
    .expect("outbox");
    db.batch_execute("COMMIT").await.expect("commit");
    let table = format!("rag_{name}");
    eventually("the sweep sent the teardown again and it finished", async || {
        let row = db
            .query_one(
                "SELECT to_regclass($1) IS NULL, NOT EXISTS (SELECT 1 FROM collection_teardowns WHERE id = $2)",
                &[&table, &teardown],
            )
            .await
            .expect("state");
        row.get::<_, bool>(0) && row.get::<_, bool>(1)
    })
    .await;
    assert_eq!(stack.call(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await.0, 201);
}

#[tokio::test]
async fn a_document_left_processing_with_no_attempt_is_failed_by_the_sweep() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let (_, base) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&unique("stale"), "personal"))).await;
    let kb = Uuid::parse_str(base["id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    let (stale, live) = (Uuid::new_v4(), Uuid::new_v4());
    // Their parse began (so no other tenant's parse delivery takes them over as waiting).
    for (id, age) in [(stale, "13 hours"), (live, "1 minute")] {
        db.execute(
            &format!(
                "INSERT INTO rag_documents (id, collection_name, kb_id, filename, filesize, filetype, status, \
                 storage_path, attempt_started_at, parse_started_at) VALUES ($1, $2, $3, 'a.txt', 1, 'txt', \
                 'processing', 'documents/x', now() - interval '{age}', now() - interval '{age}')"
            ),
            &[&id, &base["collection_name"].as_str().expect("name"), &kb],
        )
        .await
        .expect("row");
    }
    eventually("the stale document failed", async || {
        let status: String =
            db.query_one("SELECT status FROM rag_documents WHERE id = $1", &[&stale]).await.expect("row").get(0);
        status == "error"
    })
    .await;
    let row = db.query_one("SELECT error_message FROM rag_documents WHERE id = $1", &[&stale]).await.expect("row");
    let message: String = row.get(0);
    assert!(message.starts_with("sweep: IngestionNotFinished: ") && message.contains("retry"), "{message}");
    let live_status: String =
        db.query_one("SELECT status FROM rag_documents WHERE id = $1", &[&live]).await.expect("row").get(0);
    assert_eq!(live_status, "processing", "a document with a live attempt is left alone");
}

#[tokio::test]
async fn a_teardown_held_up_by_a_lock_fails_its_deliveries_and_is_finished_by_the_sweep() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("held");
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 201, "{base}");
    let store = stack.store(2).await;
    store.ensure_vector_table(&name, 384).await.expect("table");
    let table = format!("rag_{name}");
    // A long reader of the table: the teardown's DROP waits for it, gives up after the
    // configured lock timeout (SLUICE_TEARDOWN_LOCK_TIMEOUT_MS), and fails the delivery.
    let reader = stack.db().await;
    reader.batch_execute(&format!("BEGIN; LOCK TABLE {table} IN ACCESS SHARE MODE")).await.expect("lock");
    let (status, queued) =
        stack.call_json(&owner, Method::DELETE, &format!("/kb/{}", base["id"].as_str().expect("id")), None).await;
    assert_eq!(status, 202, "{queued}");
    let teardown = queued["teardown_id"].as_str().expect("id").to_owned();

    // Every delivery of the job fails until SQS gives it up to the dead-letter queue.
    stack
        .dead_letter("sluice-teardown-dlq", std::time::Duration::from_secs(120), |body| body.contains(&teardown))
        .await;
    let db = stack.db().await;
    let state = async || {
        let row = db
            .query_one(
                "SELECT to_regclass($1) IS NULL, NOT EXISTS (SELECT 1 FROM collection_teardowns WHERE id = $2::text::uuid)",
                &[&table, &teardown],
            )
            .await
            .expect("state");
        (row.get::<_, bool>(0), row.get::<_, bool>(1))
    };
    assert_eq!(state().await, (false, false), "nothing finished while the lock was held");
    let (status, refused) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    assert_eq!(status, 409, "the name stays reserved: {refused}");

    // The reader lets go; the sweep, past SLUICE_TEARDOWN_RETRY_SECS, sends the job again.
    reader.batch_execute("ROLLBACK").await.expect("release");
    eventually("the sweep's job dropped the table and released the name", async || state().await == (true, true)).await;
    assert_eq!(stack.call(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await.0, 201);
}

#[tokio::test]
async fn rag_drop_refuses_a_name_several_bases_hold_and_otherwise_goes_through_the_teardown() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("drop");
    let (_, first) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    let (_, second) = stack.call_json(&owner, Method::POST, "/kb", Some(local_base(&name, "personal"))).await;
    let (first_id, second_id) = (first["id"].as_str().expect("id"), second["id"].as_str().expect("id"));
    let store = stack.store(2).await;
    store.ensure_vector_table(&name, 384).await.expect("table");
    let table = format!("rag_{name}");
    let db = stack.db().await;
    let table_exists = async || {
        db.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await.expect("regclass").get::<_, bool>(0)
    };

    let (code, refused) = sluice_e2e::sluice_command(&["rag-drop", &name]);
    assert_eq!(code, 1, "{refused}");
    let mut listed: Vec<&str> =
        refused["knowledge_base_ids"].as_array().expect("ids").iter().filter_map(Value::as_str).collect();
    listed.sort_unstable();
    let mut expected = vec![first_id, second_id];
    expected.sort_unstable();
    assert_eq!(listed, expected, "{refused}");
    assert!(refused["error"].as_str().expect("why").contains("--knowledge-base"), "{refused}");
    assert_eq!(stack.call(&owner, Method::GET, &format!("/kb/{first_id}"), None).await.0, 200, "nothing changed");

    let (code, dropped) = sluice_e2e::sluice_command(&["rag-drop", &name, "--knowledge-base", first_id]);
    assert_eq!(code, 0, "{dropped}");
    assert_eq!((dropped["kb_id"].as_str(), dropped["drops_table"].clone()), (Some(first_id), json!(false)));
    assert_eq!(stack.call(&owner, Method::GET, &format!("/kb/{first_id}"), None).await.0, 404);
    assert!(table_exists().await, "the sibling keeps the table");
    let (code, stranger) =
        sluice_e2e::sluice_command(&["rag-drop", &name, "--knowledge-base", &Uuid::new_v4().to_string()]);
    assert_eq!(code, 1, "{stranger}");

    let (code, dropped) = sluice_e2e::sluice_command(&["rag-drop", &name]);
    assert_eq!(code, 0, "the one holder left is named by the name alone: {dropped}");
    assert_eq!(dropped["drops_table"], true);
    eventually("the last holder's table dropped", async || !table_exists().await).await;

    // A name no base holds, as rag-ingest leaves it: everything under it goes.
    let orphan = unique("unheld");
    store.ensure_vector_table(&orphan, 384).await.expect("table");
    let (code, answer) = sluice_e2e::sluice_command(&["rag-drop", &orphan]);
    assert_eq!((code, answer["kb_id"].clone(), answer["drops_table"].clone()), (0, Value::Null, json!(true)));
    let orphan_table = format!("rag_{orphan}");
    eventually("the unheld name's table dropped", async || {
        db.query_one("SELECT to_regclass($1) IS NULL", &[&orphan_table]).await.expect("regclass").get::<_, bool>(0)
    })
    .await;
    let (code, nothing) = sluice_e2e::sluice_command(&["rag-drop", &orphan]);
    assert_eq!(code, 1, "{nothing}");
    assert_eq!(nothing["error"], "nothing holds this name");
}
