//! Knowledge-base documents on the running stack, through upload → parse → ingest with the
//! real local embedding service: every format becomes vectors a query in other words finds;
//! refusals store nothing; provider faults end as recorded failures, never `processing`.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::stub::{Scripted, StubProvider};
use sluice_e2e::vectors::{literal, local_embedding};
use sluice_e2e::{Stack, User, file_form};
use sluice_fixtures as fixtures;
use std::time::{Duration, Instant};
use uuid::Uuid;

async fn base_with(stack: &Stack, user: &User, endpoint: Option<&str>) -> Value {
    let mut body = json!({"name": "Handbook", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    if let Some(endpoint) = endpoint {
        body["embedding_endpoint_id"] = endpoint.into();
    }
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base
}

async fn upload(stack: &Stack, user: &User, path: &str, form: reqwest::multipart::Form) -> (u16, Value) {
    stack.post_form(user, path, form).await
}

/// Waits until the base reports `complete`; its ingestion counts.
async fn settled(stack: &Stack, user: &User, kb_id: &str) -> Value {
    stack.indexed(user, kb_id).await
}

#[tokio::test]
async fn documents_of_every_kind_become_vectors_a_query_in_other_words_finds() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let base = base_with(&stack, &user, None).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let documents: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "volcanoes.md",
            b"# Volcanoes\n\nMagma rises through cracks in the crust and erupts as glowing lava.\n".to_vec(),
            "molten rock bursting out of a mountain",
        ),
        (
            "benefits.docx",
            fixtures::docx(
                "<w:p><w:r><w:t>The company pension plan matches employee retirement contributions up to five percent of salary.</w:t></w:r></w:p>",
            ),
            "employer support for saving money for old age",
        ),
        (
            "orders.xlsx",
            fixtures::xlsx(
                r#"<row r="1"><c r="A1" t="inlineStr"><is><t>Office chairs and standing desks purchased for the Berlin branch</t></is></c></row>"#,
            ),
            "furniture bought for the German office",
        ),
        (
            "biology.pdf",
            fixtures::pdf(&["Photosynthesis turns sunlight, water and carbon dioxide into sugar inside plant leaves."]),
            "how green plants make food from light",
        ),
    ];
    for (name, bytes, _) in &documents {
        let form = file_form(name, None, bytes.clone()).text("organizational_unit", "  Research  ");
        let (status, answer) = upload(&stack, &user, &format!("/kb/{kb_id}/documents"), form).await;
        assert_eq!(status, 202, "{name}: {answer}");
        let fields: Vec<&str> = answer.as_object().expect("object").keys().map(String::as_str).collect();
        assert_eq!(fields, ["collection_name", "document_id", "filename", "kb_id", "message", "status", "tracking_id"]);
        assert_eq!((answer["document_id"].clone(), answer["status"].clone()), (Value::Null, json!("processing")));
    }
    let counts = settled(&stack, &user, kb_id).await;
    assert_eq!((counts["indexed_count"].clone(), counts["failed_count"].clone()), (json!(4), json!(0)), "{counts}");

    let db = stack.db().await;
    for (name, _, query) in &documents {
        let vector = literal(&local_embedding(query).await);
        let row = db
            .query_one(
                &format!(
                    "SELECT filename, source, document_type, organizational_unit, kb_id::text, org_id IS NOT NULL \
                     FROM rag_{collection} WHERE kb_id = $1::text::uuid ORDER BY embedding <=> '{vector}'::vector LIMIT 1"
                ),
                &[&kb_id],
            )
            .await
            .expect("nearest chunk");
        assert_eq!(row.get::<_, String>(0), *name, "{query:?} found the wrong document");
        assert_eq!(row.get::<_, String>(1), "upload");
        assert_eq!(row.get::<_, String>(2), name.rsplit('.').next().expect("ext"));
        assert_eq!(row.get::<_, Option<String>>(3).as_deref(), Some("Research"), "the unit, trimmed");
        assert_eq!(row.get::<_, String>(4), kb_id);
        assert!(row.get::<_, bool>(5), "the tenant is stamped");
    }
    let (status, info) =
        stack.call_json(&user, Method::GET, &format!("/rag/collections/{collection}/info"), None).await;
    assert_eq!(status, 200);
    assert_eq!(info["document_count"], 4);
    assert!(info["total_vectors"].as_i64().expect("vectors") >= 4, "{info}");
    let done: Vec<(String, i32, bool)> = db
        .query(
            "SELECT status, chunk_count, vector_document_id IS NOT NULL FROM rag_documents WHERE kb_id = $1::text::uuid",
            &[&kb_id],
        )
        .await
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert!(done.iter().all(|(s, n, v)| s == "done" && *n >= 1 && *v), "{done:?}");

    // The base lists them, newest first, a page at a time.
    let (status, first) = stack.call_json(&user, Method::GET, &format!("/kb/{kb_id}/documents?limit=3"), None).await;
    assert_eq!(status, 200, "{first}");
    let names = |page: &Value| -> Vec<String> {
        page["documents"]
            .as_array()
            .expect("list")
            .iter()
            .map(|d| d["filename"].as_str().expect("name").to_owned())
            .collect()
    };
    assert_eq!(names(&first), ["biology.pdf", "orders.xlsx", "benefits.docx"]);
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let (_, second) =
        stack.call_json(&user, Method::GET, &format!("/kb/{kb_id}/documents?limit=3&cursor={cursor}"), None).await;
    assert_eq!((names(&second), second["next_cursor"].clone()), (vec!["volcanoes.md".to_owned()], Value::Null));
    assert_eq!(first["documents"][0]["status"], "done");
    assert_eq!(first["documents"][0]["has_file"], true);
}

#[tokio::test]
async fn a_refused_document_stores_nothing_and_says_why() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base_with(&stack, &user, None).await;
    let kb_id = base["id"].as_str().expect("id").to_owned();
    let path = format!("/kb/{kb_id}/documents");
    let text = || file_form("notes.txt", None, b"some words".to_vec());

    let (status, refused) =
        upload(&stack, &user, &path, file_form("bundle.zip", None, fixtures::zip(&[("a.txt", "x")]))).await;
    assert_eq!(status, 415, "{refused}");
    assert!(refused["error"]["details"]["fields"]["file"].is_string());
    let (status, refused) =
        upload(&stack, &user, &path, file_form("fake.pdf", None, b"not a pdf at all".to_vec())).await;
    assert_eq!(status, 415, "{refused}");
    let (status, refused) = upload(&stack, &user, &path, text().text("ingestion", r#"{"chunk_overlap": 4096}"#)).await;
    assert_eq!(status, 400, "{refused}");
    let fields = refused["error"]["details"]["fields"].as_object().expect("fields");
    assert!(
        fields.contains_key("ingestion_config.chunk_overlap") && fields.contains_key("ingestion_config.chunk_size")
    );
    let (status, _) = upload(&stack, &user, &path, text().text("ingestion", "not json")).await;
    assert_eq!(status, 400);

    // Another caller, and an id that does not exist, read alike.
    let (ghost_status, ghost) = upload(&stack, &user, &format!("/kb/{}/documents", Uuid::new_v4()), text()).await;
    let (status, stranger) = upload(&stack, &User::new(), &path, text()).await;
    assert_eq!((status, stranger), (ghost_status, ghost));
    let (status, _) = upload(&stack, &user, "/rag/collections/no_such_name_here/ingest", text()).await;
    assert_eq!(status, 404);

    let db = stack.db().await;
    let rows: i64 = db
        .query_one("SELECT count(*) FROM rag_documents WHERE kb_id = $1::text::uuid", &[&kb_id])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0, "a refused upload left a row");
    assert!(stack.keys_under(&format!("documents/{kb_id}/")).await.is_empty(), "a refused upload left an object");

    // Through the collection's name, the same upload is accepted.
    let (status, accepted) = upload(
        &stack,
        &user,
        &format!("/rag/collections/{}/ingest", base["collection_name"].as_str().expect("name")),
        text(),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["document_id"], Value::Null);
    let (status, formats) = stack.call_json(&user, Method::GET, "/rag/supported-formats", None).await;
    assert_eq!(status, 200);
    let formats: Vec<&str> = formats["formats"].as_array().expect("list").iter().filter_map(Value::as_str).collect();
    // Images and TIFF pages are read by OCR.
    for ext in [".pdf", ".docx", ".xlsx", ".md", ".txt", ".pptx", ".msg", ".png", ".jpg", ".tiff", ".webp", ".gif"] {
        assert!(formats.contains(&ext), "{ext} missing from {formats:?}");
    }
    for ext in [".zip", ".tgz"] {
        assert!(!formats.contains(&ext), "{ext} cannot be ingested");
    }
    settled(&stack, &user, &kb_id).await;
}

/// A base embedding through a scripted provider registered as the caller's organization's
/// local service.
async fn base_on_stub(stack: &Stack, user: &User, stub: &StubProvider) -> Value {
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    base_with(stack, user, endpoint["id"].as_str()).await
}

async fn document_row(stack: &Stack, kb_id: &str) -> (String, Option<String>, i32) {
    let row = stack
        .db()
        .await
        .query_one(
            "SELECT status, error_message, chunk_count FROM rag_documents WHERE kb_id = $1::text::uuid",
            &[&kb_id],
        )
        .await
        .expect("row");
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn provider_faults_end_recorded_with_stage_type_and_advice() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let secret_body = r#"{"error": "invalid key sk-live-123 for tenant at 10.1.2.3"}"#;
    let cases = [
        (
            "rate limited once",
            vec![Scripted::status(429, "{}").header("retry-after", "1"), StubProvider::sized()],
            None,
        ),
        ("key refused", vec![Scripted::status(401, secret_body)], Some("embed: CredentialRefused: ")),
        ("failing forever", vec![Scripted::status(500, secret_body)], Some("embed: ProviderFailing: ")),
    ];
    let mut running = Vec::new();
    for (what, script, _) in &cases {
        let stub = StubProvider::start(script.clone(), 384).await;
        let base = base_on_stub(&stack, &user, &stub).await;
        let kb_id = base["id"].as_str().expect("id").to_owned();
        let form = file_form("note.md", None, format!("# {what}\n\nA short note about {what}.\n").into_bytes());
        let (status, answer) = upload(&stack, &user, &format!("/kb/{kb_id}/documents"), form).await;
        assert_eq!(status, 202, "{what}: {answer}");
        running.push((kb_id, stub));
    }
    for ((what, _, failure), (kb_id, stub)) in cases.iter().zip(&running) {
        let counts = settled(&stack, &user, kb_id).await;
        let (status, message, chunks) = document_row(&stack, kb_id).await;
        match failure {
            None => {
                assert_eq!((status.as_str(), chunks), ("done", 1), "{what}: {counts}");
                assert!(stub.requests() >= 2, "{what}: the 429 was retried");
            }
            Some(prefix) => {
                assert_eq!(status, "error", "{what}: {counts}");
                let message = message.expect("a message");
                assert!(message.starts_with(prefix), "{what}: {message}");
                for leak in ["sk-live", "10.1.2.3", "127.0.0.1", "invalid key"] {
                    assert!(!message.contains(leak), "{what}: the provider's words leaked: {message}");
                }
                assert_eq!(counts["failed_count"], 1);
            }
        }
    }
    // A refused key is not retried; a failing provider is, on every delivery up to the last.
    assert_eq!(running[1].1.requests(), 1);
    assert!(running[2].1.requests() >= 3, "{}", running[2].1.requests());
}

#[tokio::test]
async fn a_job_sent_again_or_after_a_crash_leaves_each_chunk_once() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base_with(&stack, &user, None).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let text = "A paragraph about tides.\n\n".repeat(200);
    let form =
        file_form("tides.txt", None, text.into_bytes()).text("ingestion", r#"{"chunk_size": 300, "chunk_overlap": 0}"#);
    let (status, answer) = upload(&stack, &user, &format!("/kb/{kb_id}/documents"), form).await;
    assert_eq!(status, 202, "{answer}");
    settled(&stack, &user, kb_id).await;
    let id = Uuid::parse_str(answer["tracking_id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    async fn count(db: &tokio_postgres::Client, collection: &str, id: Uuid) -> i64 {
        let sql = format!("SELECT count(*) FROM rag_{collection} WHERE document_id = $1");
        db.query_one(&sql, &[&id]).await.expect("count").get(0)
    }
    let written = count(&db, collection, id).await;
    let recorded: i32 =
        db.query_one("SELECT chunk_count FROM rag_documents WHERE id = $1", &[&id]).await.expect("row").get(0);
    assert_eq!(written, i64::from(recorded));
    assert!(written > 10, "{written}");

    // A job delivered again after the document is done changes nothing.
    let ingest_url = stack.sqs.get_queue_url().queue_name("sluice-ingest").send().await.expect("queue");
    let job = json!({"document_id": id}).to_string();
    stack
        .sqs
        .send_message()
        .queue_url(ingest_url.queue_url().expect("url"))
        .message_body(&job)
        .send()
        .await
        .expect("sent");
    stack.drained("sluice-ingest").await;
    assert_eq!(count(&db, collection, id).await, written);

    // A crash after part of a write (rows left behind, the row still processing): the next
    // delivery replaces them rather than adding to them.
    db.execute("UPDATE rag_documents SET status = 'processing' WHERE id = $1", &[&id]).await.expect("reopen");
    db.execute(
        &format!(
            "INSERT INTO rag_{collection} (id, kb_id, document_id, chunk_index, content, embedding) \
             SELECT gen_random_uuid(), kb_id, document_id, chunk_index, 'left by a crash', embedding \
             FROM rag_{collection} WHERE document_id = $1"
        ),
        &[&id],
    )
    .await
    .expect("debris");
    stack
        .sqs
        .send_message()
        .queue_url(ingest_url.queue_url().expect("url"))
        .message_body(&job)
        .send()
        .await
        .expect("sent");
    settled(&stack, &user, kb_id).await;
    assert_eq!(count(&db, collection, id).await, written, "chunks duplicated by a redelivery");
    let debris: i64 = db
        .query_one(&format!("SELECT count(*) FROM rag_{collection} WHERE content = 'left by a crash'"), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(debris, 0);
}

#[tokio::test]
async fn a_job_whose_send_failed_is_sent_by_the_sweep_from_the_outbox() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base_with(&stack, &user, None).await;
    let kb_id = Uuid::parse_str(base["id"].as_str().expect("id")).expect("uuid");
    // What an upload commits when its send then fails: the object, the row, the outbox row.
    let id = Uuid::new_v4();
    let key = format!("documents/{kb_id}/{}/lost.txt", id.simple());
    let bytes = b"A note whose job was never sent.".to_vec();
    stack
        .s3
        .put_object()
        .bucket(&stack.bucket)
        .key(&key)
        .body(bytes.clone().into())
        .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms)
        .ssekms_key_id(stack.kms_key_arn().await)
        .send()
        .await
        .expect("object");
    let db = stack.db().await;
    db.execute(
        "INSERT INTO rag_documents (id, collection_name, kb_id, owner_id, filename, filesize, filetype, status, storage_path) \
         VALUES ($1, $2, $3, $4, 'lost.txt', $5, 'txt', 'processing', $6)",
        &[&id, &base["collection_name"].as_str().expect("name"), &kb_id, &user.id, &(bytes.len() as i64), &key],
    )
    .await
    .expect("row");
    db.execute(
        "INSERT INTO outbox (id, topic, payload) VALUES ($1, 'parse-document', $2)",
        &[&Uuid::new_v4(), &json!({"document_id": id})],
    )
    .await
    .expect("outbox");
    let counts = settled(&stack, &user, &kb_id.to_string()).await;
    assert_eq!(counts["indexed_count"], 1, "{counts}");
}

#[tokio::test]
async fn a_failed_document_is_retried_from_its_stored_original() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let stub = StubProvider::start(vec![Scripted::status(401, "{}"), StubProvider::sized()], 384).await;
    let base = base_on_stub(&stack, &user, &stub).await;
    let kb_id = base["id"].as_str().expect("id").to_owned();
    let (_, answer) =
        upload(&stack, &user, &format!("/kb/{kb_id}/documents"), file_form("a.md", None, b"# A\n\ntext\n".to_vec()))
            .await;
    let id = answer["tracking_id"].as_str().expect("id").to_owned();
    settled(&stack, &user, &kb_id).await;
    assert_eq!(document_row(&stack, &kb_id).await.0, "error");

    let retry = format!("/rag/documents/{id}/retry");
    let (_, ghost) = stack.call(&user, Method::POST, &format!("/rag/documents/{}/retry", Uuid::new_v4()), None).await;
    let (status, stranger) = stack.call(&User::new(), Method::POST, &retry, None).await;
    assert_eq!((status, stranger), (404, ghost), "another's document reads as absent");
    let (status, again) = stack.call_json(&user, Method::POST, &retry, None).await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["document_id"], Value::Null);
    settled(&stack, &user, &kb_id).await;
    let (status, message, chunks) = document_row(&stack, &kb_id).await;
    assert_eq!((status.as_str(), message, chunks), ("done", None, 1), "the retry cleared the failure");
    let (status, refused) = stack.call_json(&user, Method::POST, &retry, None).await;
    assert_eq!(status, 400, "a document that did not fail: {refused}");
    assert!(refused["error"]["details"]["fields"]["document_id"].is_string());
}

#[tokio::test]
async fn an_ingest_racing_a_teardown_writes_nothing_and_brings_no_table_back() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    // The first document is indexed at once; the second's ingest is held three seconds by
    // the provider, while its base is deleted and torn down.
    let script =
        vec![StubProvider::sized(), Scripted::status(429, "{}").header("retry-after", "3"), StubProvider::sized()];
    let stub = StubProvider::start(script, 384).await;
    let base = base_on_stub(&stack, &user, &stub).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let (status, _) =
        upload(&stack, &user, &format!("/kb/{kb_id}/documents"), file_form("a.md", None, b"# A\n\nfirst\n".to_vec()))
            .await;
    assert_eq!(status, 202);
    settled(&stack, &user, kb_id).await;
    let (_, answer) =
        upload(&stack, &user, &format!("/kb/{kb_id}/documents"), file_form("b.md", None, b"# B\n\nsecond\n".to_vec()))
            .await;
    let id = Uuid::parse_str(answer["tracking_id"].as_str().expect("id")).expect("uuid");
    let started = Instant::now();
    while stub.requests() < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "the second ingest never asked the provider");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, queued) = stack.call_json(&user, Method::DELETE, &format!("/kb/{kb_id}"), None).await;
    assert_eq!(status, 202, "{queued}");
    let db = stack.db().await;
    let table = format!("rag_{collection}");
    let table_exists = async || {
        db.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await.expect("regclass").get::<_, bool>(0)
    };
    while table_exists().await {
        assert!(started.elapsed() < Duration::from_secs(60), "the teardown never dropped the table");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    while stub.requests() < 3 {
        assert!(started.elapsed() < Duration::from_secs(60), "the held ingest never finished embedding");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stack.drained("sluice-ingest").await;
    assert!(!table_exists().await, "the ingest that lost the race brought the table back");
    let rows: i64 =
        db.query_one("SELECT count(*) FROM rag_documents WHERE id = $1", &[&id]).await.expect("count").get(0);
    assert_eq!(rows, 0);
    let reserved: i64 = db
        .query_one("SELECT count(*) FROM collection_teardowns WHERE collection_name = $1", &[&collection])
        .await
        .expect("count")
        .get(0);
    assert_eq!(reserved, 0, "the teardown finished and released the name");
    while !(stack.keys_under(&format!("documents/{kb_id}/")).await.is_empty()
        && stack.keys_under(&format!("parsed/{id}")).await.is_empty())
    {
        assert!(started.elapsed() < Duration::from_secs(60), "the base's stored objects remain");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_document_deleted_while_indexing_leaves_no_chunks() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    // The provider holds the ingest for two seconds before it answers.
    let stub =
        StubProvider::start(vec![Scripted::status(429, "{}").header("retry-after", "2"), StubProvider::sized()], 384)
            .await;
    let base = base_on_stub(&stack, &user, &stub).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let (_, answer) =
        upload(&stack, &user, &format!("/kb/{kb_id}/documents"), file_form("b.md", None, b"# B\n\nwords\n".to_vec()))
            .await;
    let id = Uuid::parse_str(answer["tracking_id"].as_str().expect("id")).expect("uuid");
    let started = Instant::now();
    while stub.requests() == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "the ingest never asked the provider");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = stack.call(&user, Method::DELETE, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(status, 204);
    while stub.requests() < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "the ingest never finished embedding");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stack.drained("sluice-ingest").await;
    let db = stack.db().await;
    let table_exists: bool = db
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&format!("rag_{collection}")])
        .await
        .expect("regclass")
        .get(0);
    if table_exists {
        let chunks: i64 = db
            .query_one(&format!("SELECT count(*) FROM rag_{collection} WHERE document_id = $1"), &[&id])
            .await
            .expect("count")
            .get(0);
        assert_eq!(chunks, 0, "a deleted document's chunks were written");
    }
    let rows: i64 =
        db.query_one("SELECT count(*) FROM rag_documents WHERE id = $1", &[&id]).await.expect("count").get(0);
    assert_eq!(rows, 0);
    assert!(stack.keys_under(&format!("documents/{kb_id}/{}", id.simple())).await.is_empty());
    assert!(stack.keys_under(&format!("parsed/{id}")).await.is_empty());
}

#[tokio::test]
async fn a_presigned_document_is_ingested_when_its_bytes_land_and_judged_again_there() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base_with(&stack, &user, None).await;
    let kb_id = base["id"].as_str().expect("id").to_owned();
    let path = format!("/kb/{kb_id}/documents/uploads");
    let bytes = b"# Runbook\n\nRestart the ingestion workers when the queue backs up.\n".to_vec();
    let declare = |name: &str, size: usize, mime: &str| {
        json!({"filename": name, "size": size, "mime_type": mime, "organizational_unit": "Ops",
            "ingestion": {"chunk_size": 500}})
    };
    for (body, status, field) in [
        (declare("bundle.zip", 10, "application/zip"), 415, "filename"),
        (declare("guide.md", 10, "application/pdf"), 415, "mime_type"),
        (declare("guide.md", 60 * 1024 * 1024, "text/markdown"), 413, "size"),
        (
            json!({"filename": "guide.md", "size": 10, "mime_type": "text/markdown", "ingestion": {"chunk_overlap": 4096}}),
            400,
            "ingestion_config",
        ),
    ] {
        let (code, refused) = stack.call_json(&user, Method::POST, &path, Some(body.clone())).await;
        assert_eq!(code, status, "{body}: {refused}");
        assert!(refused["error"]["details"]["fields"][field].is_string(), "{body}: {refused}");
    }
    let (status, intent) =
        stack.call_json(&user, Method::POST, &path, Some(declare("guide.md", bytes.len(), "text/markdown"))).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(intent["document_id"], Value::Null);
    assert_eq!(stack.put_presigned(&intent, bytes).await, 200);
    let counts = settled(&stack, &user, &kb_id).await;
    assert_eq!(counts["indexed_count"], 1, "{counts}");

    // Bytes that are not the size declared are refused when they land, and removed.
    let (_, liar) = stack.call_json(&user, Method::POST, &path, Some(declare("short.md", 5000, "text/markdown"))).await;
    assert_eq!(stack.put_presigned(&liar, b"# Short\n\nnot five thousand bytes\n".to_vec()).await, 200);
    let counts = settled(&stack, &user, &kb_id).await;
    assert_eq!(counts["failed_count"], 1, "{counts}");
    let id = Uuid::parse_str(liar["tracking_id"].as_str().expect("id")).expect("uuid");
    let message: String = stack
        .db()
        .await
        .query_one("SELECT error_message FROM rag_documents WHERE id = $1", &[&id])
        .await
        .expect("row")
        .get(0);
    assert!(message.starts_with("parse: size_mismatch: "), "{message}");
    assert!(stack.keys_under(&format!("document-uploads/{kb_id}/{}", id.simple())).await.is_empty());
}

#[tokio::test]
async fn a_replacement_retires_the_earlier_document_of_its_name_and_nothing_else() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base_with(&stack, &user, None).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let path = format!("/kb/{kb_id}/documents");
    let send = |name: &str, text: &str, replace: Option<&str>| {
        let mut form = file_form(name, None, text.as_bytes().to_vec());
        if let Some(replace) = replace {
            form = form.text("replace", replace.to_owned());
        }
        form
    };
    for form in [
        send("policy.md", "# Policy\n\nVersion one.\n", None),
        send("policy.md", "# Policy\n\nVersion two.\n", None),
        send("other.md", "# Other\n\nUnrelated.\n", None),
    ] {
        assert_eq!(upload(&stack, &user, &path, form).await.0, 202);
    }
    settled(&stack, &user, kb_id).await;
    let (status, refused) = upload(&stack, &user, &path, send("policy.md", "x", Some("maybe"))).await;
    assert_eq!(status, 400, "{refused}");
    let (status, answer) =
        upload(&stack, &user, &path, send("policy.md", "# Policy\n\nVersion three.\n", Some("true"))).await;
    assert_eq!(status, 202, "{answer}");
    settled(&stack, &user, kb_id).await;

    let db = stack.db().await;
    let rows: Vec<(String, String)> = db
        .query("SELECT filename, id::text FROM rag_documents WHERE kb_id = $1::text::uuid ORDER BY filename", &[&kb_id])
        .await
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let kept: Vec<&str> = rows.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(kept, ["other.md", "policy.md"], "both earlier policy.md rows are retired");
    assert_eq!(rows[1].1, answer["tracking_id"].as_str().expect("id"), "the replacement is the one kept");
    let contents: Vec<String> = db
        .query(&format!("SELECT content FROM rag_{collection} ORDER BY content"), &[])
        .await
        .expect("chunks")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(contents.iter().all(|c| !c.contains("Version one") && !c.contains("Version two")), "{contents:?}");
    assert!(contents.iter().any(|c| c.contains("Version three")) && contents.iter().any(|c| c.contains("Unrelated")));
    // The retired originals are removed once the replacement's rows are committed, a moment
    // after it reads as indexed.
    let prefix = format!("documents/{kb_id}/");
    sluice_e2e::eventually("the retired originals are removed", std::time::Duration::from_secs(10), async || {
        stack.keys_under(&prefix).await.len() == 2
    })
    .await;
}
