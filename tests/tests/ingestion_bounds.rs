//! What one tenant can cost everyone's ingestion, bounded, on the running stack: a chunk
//! size floor, a ceiling on chunks per document counted before anything is embedded,
//! batches staged as they are embedded and published whole (a redelivery resumes after
//! them), a time budget per document, and a turn for another tenant's waiting document.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::stub::{Scripted, StubProvider};
use sluice_e2e::{Stack, User};
use sluice_store::{Stage, Turn};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A base chunking at the floor (100 characters, no overlap) that embeds through `stub`,
/// registered as the caller's organization's service.
async fn base_on(stack: &Stack, user: &User, stub: &StubProvider) -> String {
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let body = json!({"name": "Bounds", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"],
        "ingestion_config": {"chunk_size": 100, "chunk_overlap": 0}});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base["id"].as_str().expect("id").to_owned()
}

/// `paragraphs` paragraphs of about 90 characters: one chunk each at chunk_size 100.
fn paragraphs(count: usize) -> Vec<u8> {
    (0..count)
        .map(|n| format!("Paragraph {n:06} records the tide gauge reading and the wind over the harbour wall.\n\n"))
        .collect::<String>()
        .into_bytes()
}

fn user() -> User {
    User::with(Some(Uuid::new_v4()), &["collections:edit"], false)
}

async fn row(stack: &Stack, id: &str) -> (String, Option<String>, i32) {
    let row = stack
        .db()
        .await
        .query_one("SELECT status, error_message, chunk_count FROM rag_documents WHERE id = $1::text::uuid", &[&id])
        .await
        .expect("row");
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn a_chunk_size_below_the_floor_is_refused_wherever_it_is_set() {
    let stack = Stack::from_env().await;
    let user = user();
    let body = json!({"name": "Fine", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"chunk_size": 1, "chunk_overlap": 0}});
    let (status, refused) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    let why = refused["error"]["details"]["fields"]["ingestion_config.chunk_size"].as_str().expect("field");
    assert!(why.contains("100"), "{why}");
    let body = json!({"name": "Fine", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (_, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    let path = format!("/kb/{}", base["id"].as_str().expect("id"));
    let patch = json!({"ingestion_config": {"chunk_size": 99, "chunk_overlap": 0}});
    let (status, refused) = stack.call_json(&user, Method::PATCH, &path, Some(patch)).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["details"]["fields"]["ingestion_config.chunk_size"].is_string(), "{refused}");
}

#[tokio::test]
async fn a_document_over_the_chunk_ceiling_fails_before_anything_is_embedded() {
    let stack = Stack::from_env().await;
    let user = user();
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let kb_id = base_on(&stack, &user, &stub).await;
    let ceiling = stack.config().await.max_chunks_per_document;
    let accepted = stack.upload_document(&user, &kb_id, "gauges.txt", &paragraphs(ceiling + 50)).await;
    stack.indexed(&user, &kb_id).await;
    let (status, message, chunks) = row(&stack, accepted["tracking_id"].as_str().expect("id")).await;
    assert_eq!((status.as_str(), chunks), ("error", 0));
    let message = message.expect("a message");
    assert!(message.starts_with("ingest: TooManyChunks: "), "{message}");
    assert!(message.contains(&ceiling.to_string()) && message.contains("chunk_size"), "{message}");
    assert_eq!(stub.requests(), 0, "nothing was to be embedded");
}

#[tokio::test]
async fn batches_are_staged_as_they_come_and_a_redelivery_resumes_after_them_unseen_until_whole() {
    let stack = Stack::from_env().await;
    let user = user();
    // Two batches answer; the third fails on both attempts of its delivery; the rest answer.
    let failing = Scripted::status(500, "{}");
    let stub = StubProvider::start(
        vec![StubProvider::sized(), StubProvider::sized(), failing.clone(), failing, StubProvider::sized()],
        384,
    )
    .await;
    let kb_id = base_on(&stack, &user, &stub).await;
    let accepted = stack.upload_document(&user, &kb_id, "gauges.txt", &paragraphs(300)).await;
    let id = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");

    // Between the failed delivery and the next, two batches are staged and none is visible.
    let started = Instant::now();
    while stub.requests() < 4 {
        assert!(started.elapsed() < Duration::from_secs(60), "the third batch was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let db = stack.db().await;
    let staged: i64 = db
        .query_one("SELECT count(*) FROM rag_chunk_staging WHERE document_id = $1", &[&id])
        .await
        .expect("staged")
        .get(0);
    assert_eq!(staged, 128, "two batches of 64 staged");
    let (_, base) = stack.call_json(&user, Method::GET, &format!("/kb/{kb_id}"), None).await;
    let table = format!("rag_{}", base["collection_name"].as_str().expect("name"));
    let exists: bool = db.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await.expect("table").get(0);
    if exists {
        let visible: i64 = db
            .query_one(&format!("SELECT count(*) FROM {table} WHERE document_id = $1"), &[&id])
            .await
            .expect("visible")
            .get(0);
        assert_eq!(visible, 0, "a part of the document was searchable");
    }

    stack.indexed(&user, &kb_id).await;
    let (status, message, chunks) = row(&stack, &id.to_string()).await;
    assert_eq!(status, "done", "{message:?}");
    let batches = (chunks as usize).div_ceil(64);
    assert!(batches >= 4, "{chunks} chunks");
    // Every batch asked once, plus the two failed attempts: the staged two were not asked again.
    assert_eq!(stub.requests(), batches + 2);
    let staged: i64 = db
        .query_one("SELECT count(*) FROM rag_chunk_staging WHERE document_id = $1", &[&id])
        .await
        .expect("staged")
        .get(0);
    assert_eq!(staged, 0, "staging is emptied by the publish");
    each_chunk_once(&db, &table, id, chunks).await;
}

#[tokio::test]
async fn a_document_whose_embedding_outlasts_its_budget_is_failed_and_its_slot_freed() {
    let stack = Stack::from_env().await;
    let user = user();
    let stub = StubProvider::start(vec![StubProvider::sized().after(Duration::from_secs(8))], 384).await;
    let (kb_id, id, db) = taken_over(&stack, &user, &stub, 3).await;
    // The ingest handler itself, with a two-second budget, over the stack's own services.
    let mut config = stack.config().await;
    config.document_embed_time_limit = Duration::from_secs(2);
    let state = ingest_state(&stack, config).await;
    let job = sluice_queue::jobs::DocumentJob { document_id: id, yields: 0 };
    let timed = Instant::now();
    sluice_ingest::ingest(&state, job, 1).await.expect("recorded, not retried");
    assert!(timed.elapsed() < Duration::from_secs(6), "the budget did not bound the wait: {:?}", timed.elapsed());
    let (status, message, chunks) = row(&stack, &id.to_string()).await;
    assert_eq!((status.as_str(), chunks), ("error", 0));
    let message = message.expect("a message");
    assert!(message.starts_with("embed: TimeBudgetExceeded: "), "{message}");
    stack.indexed(&user, &kb_id).await;
    let claim: Option<Uuid> =
        db.query_one("SELECT ingest_claim FROM rag_documents WHERE id = $1", &[&id]).await.expect("row").get(0);
    assert_eq!(claim, None, "the attempt released its claim");
}

/// The ingest handler over the stack's own services, with `config`.
async fn ingest_state(stack: &Stack, config: sluice_domain::Config) -> sluice_ingest::State {
    let blob = sluice_blob::Blob::new(stack.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    sluice_ingest::State::new(config, stack.store(2).await, blob, stack.kms.clone(), stack.sqs.clone())
}

/// A document of `count` paragraphs uploaded to a new base embedding through `stub`: parsed,
/// and the stack's own delivery ingesting it (slowly, by the stub), its attempt then taken to
/// have died (its claim's lease run out), so a handler the test calls may take it over. The
/// base's id, the document's, and a database client.
async fn taken_over(
    stack: &Stack,
    user: &User,
    stub: &StubProvider,
    count: usize,
) -> (String, Uuid, tokio_postgres::Client) {
    let kb_id = base_on(stack, user, stub).await;
    let accepted = stack.upload_document(user, &kb_id, "gauges.txt", &paragraphs(count)).await;
    let id = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    claimed_by_a_delivery(&db, id).await;
    db.execute("UPDATE rag_documents SET ingest_claimed_until = now() WHERE id = $1", &[&id]).await.expect("expire");
    (kb_id, id, db)
}

/// Waits until one of the stack's deliveries has claimed document `id`'s ingest.
async fn claimed_by_a_delivery(db: &tokio_postgres::Client, id: Uuid) {
    let started = Instant::now();
    loop {
        let claimed: bool = db
            .query_one("SELECT ingest_claim IS NOT NULL FROM rag_documents WHERE id = $1", &[&id])
            .await
            .expect("row")
            .get(0);
        if claimed {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no delivery claimed the document");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SQS delivers at least once, and a delivery yielding its turn may ingest another tenant's
/// document in that one's place: a second delivery while an attempt runs is sent back for
/// later, never run beside it (two attempts staged the same batches and failed the document).
#[tokio::test]
async fn a_second_delivery_of_a_document_being_ingested_comes_back_later_instead_of_running_beside_it() {
    let stack = Stack::from_env().await;
    let user = user();
    let stub = StubProvider::start(vec![StubProvider::sized().after(Duration::from_secs(2))], 384).await;
    let kb_id = base_on(&stack, &user, &stub).await;
    let accepted = stack.upload_document(&user, &kb_id, "gauges.txt", &paragraphs(200)).await;
    let id = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    claimed_by_a_delivery(&db, id).await;

    // Two more deliveries of the same job, at once, while the stack's own attempt embeds.
    let state = ingest_state(&stack, stack.config().await).await;
    let job = sluice_queue::jobs::DocumentJob { document_id: id, yields: 0 };
    let timed = Instant::now();
    let (first, second) = tokio::join!(sluice_ingest::ingest(&state, job, 1), sluice_ingest::ingest(&state, job, 1));
    first.expect("sent back, acknowledged");
    second.expect("sent back, acknowledged");
    // An attempt waits two seconds for its first batch: these ran none.
    assert!(timed.elapsed() < Duration::from_millis(1500), "a second attempt ran: {:?}", timed.elapsed());

    stack.indexed(&user, &kb_id).await;
    let (status, message, chunks) = row(&stack, &id.to_string()).await;
    assert_eq!(status, "done", "{message:?}");
    assert!(chunks > 128, "{chunks} chunks: at least three batches");
    assert_eq!(stub.requests(), (chunks as usize).div_ceil(64), "each batch embedded once");
    let claim: Option<Uuid> =
        db.query_one("SELECT ingest_claim FROM rag_documents WHERE id = $1", &[&id]).await.expect("row").get(0);
    assert_eq!(claim, None, "the attempt released its claim");

    // A claim is one attempt's: taken only when free or past its lease, and a late release
    // of an expired claim leaves the claim that replaced it.
    let store = stack.store(2).await;
    let lease = Duration::from_secs(60);
    let dead = store.claim_ingest(id, lease).await.expect("claim").expect("free");
    assert_eq!(store.claim_ingest(id, lease).await.expect("claim"), None, "held");
    db.execute("UPDATE rag_documents SET ingest_claimed_until = now() WHERE id = $1", &[&id]).await.expect("expire");
    let live = store.claim_ingest(id, lease).await.expect("claim").expect("past its lease");
    assert!(store.renew_ingest(live, lease).await.expect("renew"), "the holder renews its claim");
    assert!(!store.renew_ingest(dead, lease).await.expect("renew"), "a lapsed claim taken by another is not renewed");
    store.release_ingest(dead).await.expect("release");
    assert_eq!(store.claim_ingest(id, lease).await.expect("claim"), None, "the late release freed nothing");
    store.release_ingest(live).await.expect("release");
    assert!(store.claim_ingest(id, lease).await.expect("claim").is_some(), "released");
}

/// An attempt holds its document by a short lease it renews while it runs, so one that dies
/// frees the document in two minutes, not the function's fifteen; an attempt whose lease
/// lapsed and whose claim another delivery took stages and publishes nothing more and comes
/// back later; the document is then ingested once, whole.
#[tokio::test]
async fn an_attempt_whose_claim_lapsed_and_was_taken_writes_nothing_more_and_comes_back_later() {
    let stack = Stack::from_env().await;
    let user = user();
    let stub = StubProvider::start(vec![StubProvider::sized().after(Duration::from_secs(2))], 384).await;
    // This handler takes the document over; the stack's attempt finds its claim gone at its
    // next write.
    let (kb_id, id, db) = taken_over(&stack, &user, &stub, 200).await;
    let state = ingest_state(&stack, stack.config().await).await;
    let job = sluice_queue::jobs::DocumentJob { document_id: id, yields: 0 };
    let handler = tokio::spawn(async move { sluice_ingest::ingest(&state, job, 1).await });
    let count_staged = async |db: &tokio_postgres::Client| -> i64 {
        db.query_one("SELECT count(*) FROM rag_chunk_staging WHERE document_id = $1", &[&id])
            .await
            .expect("staged")
            .get(0)
    };
    let started = Instant::now();
    while count_staged(&db).await < 64 {
        assert!(started.elapsed() < Duration::from_secs(30), "the handler staged no batch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lease: f64 = db
        .query_one(
            "SELECT extract(epoch FROM ingest_claimed_until - now())::float8 FROM rag_documents WHERE id = $1",
            &[&id],
        )
        .await
        .expect("lease")
        .get(0);
    let most = sluice_ingest::CLAIM_LEASE.as_secs_f64();
    assert!(lease > most - 35.0 && lease <= most + 1.0, "the claim is held {lease} s unrenewed, not {most}");
    // Its lease lapses and another delivery takes the claim (the update waits for a batch
    // being staged): the handler stages nothing after this.
    db.execute(
        "UPDATE rag_documents SET ingest_claim = gen_random_uuid(), ingest_claimed_until = now() + interval '1 hour' \
         WHERE id = $1",
        &[&id],
    )
    .await
    .expect("taken");
    let before = count_staged(&db).await;
    let timed = Instant::now();
    handler.await.expect("joined").expect("sent back, acknowledged");
    assert!(timed.elapsed() < Duration::from_secs(10), "the handler went on: {:?}", timed.elapsed());
    assert_eq!(count_staged(&db).await, before, "staged after its claim was taken");
    let (status, message, _) = row(&stack, &id.to_string()).await;
    assert_eq!(status, "processing", "published without its claim: {message:?}");

    // The other holder goes away; the jobs sent back find the document free and finish it.
    db.execute("UPDATE rag_documents SET ingest_claim = NULL, ingest_claimed_until = NULL WHERE id = $1", &[&id])
        .await
        .expect("released");
    stack.indexed(&user, &kb_id).await;
    let (status, message, chunks) = row(&stack, &id.to_string()).await;
    assert_eq!(status, "done", "{message:?}");
    let (_, base) = stack.call_json(&user, Method::GET, &format!("/kb/{kb_id}"), None).await;
    let table = format!("rag_{}", base["collection_name"].as_str().expect("name"));
    each_chunk_once(&db, &table, id, chunks).await;
}

/// Document `id`'s chunks in `table` are its `chunks` chunks, each once, in order.
async fn each_chunk_once(db: &tokio_postgres::Client, table: &str, id: Uuid, chunks: i32) {
    let indexes: Vec<i32> = db
        .query(&format!("SELECT chunk_index FROM {table} WHERE document_id = $1 ORDER BY chunk_index"), &[&id])
        .await
        .expect("chunks")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(indexes, (0..chunks).collect::<Vec<_>>(), "each chunk once, in order");
}

#[tokio::test]
async fn a_tenant_over_its_share_yields_to_another_tenants_waiting_document_in_each_stage() {
    let stack = Stack::from_env().await;
    let db = stack.store(2).await;
    let admin = stack.db().await;
    for stage in [Stage::Parse, Stage::Ingest] {
        let (org_a, org_b) = (Uuid::new_v4(), Uuid::new_v4());
        // A document waiting for `stage` (parsed for ingest, not yet for parse), or in it.
        let insert = |org: Uuid, started: bool| {
            let admin = &admin;
            async move {
                let id = Uuid::new_v4();
                let parsed = (stage == Stage::Ingest).then_some("parsed/x");
                let column = started_column(stage);
                admin
                    .execute(
                        &format!(
                            "INSERT INTO rag_documents (id, collection_name, org_id, owner_id, filename, filesize, \
                             filetype, status, parsed_path, {column}) VALUES ($1, 'fairness_probe', $2, $3, 'a.txt', \
                             1, 'txt', 'processing', $4, CASE WHEN $5 THEN now() END)"
                        ),
                        &[&id, &org, &Uuid::new_v4(), &parsed, &started],
                    )
                    .await
                    .expect("row");
                id
            }
        };
        let lease = Duration::from_secs(900);
        // A has a document in the stage and B none, with one waiting: A's next one yields,
        // and takes the oldest waiting document of another tenant for its delivery to do.
        // Another test's delivery giving up its turn takes such a document too, and may take
        // B's first: then B waits no more, and the scene is set again.
        let mut attempts = 0;
        let (a_running, a_next, b_waiting, taken) = loop {
            let a_running = insert(org_a, true).await;
            let a_next = insert(org_a, false).await;
            let b_waiting = insert(org_b, false).await;
            let turn = db.take_turn(a_next, stage, true, lease).await.expect("turn");
            if let Turn::Yield { instead: Some(taken) } = turn {
                break (a_running, a_next, b_waiting, taken);
            }
            let waits: bool = admin
                .query_one(
                    &format!(
                        "SELECT status = 'processing' AND {} IS NULL FROM rag_documents WHERE id = $1",
                        started_column(stage)
                    ),
                    &[&b_waiting],
                )
                .await
                .expect("B's document")
                .get(0);
            assert!(!waits && attempts < 5, "{stage:?}: {turn:?} with B's document still waiting");
            admin
                .execute("DELETE FROM rag_documents WHERE id = ANY($1)", &[&vec![a_running, a_next, b_waiting]])
                .await
                .expect("cleared");
            attempts += 1;
        };
        let row = admin
            .query_one(
                &format!("SELECT org_id, {} IS NOT NULL FROM rag_documents WHERE id = $1", started_column(stage)),
                &[&taken],
            )
            .await
            .expect("taken");
        assert_ne!(row.get::<_, Option<Uuid>>(0), Some(org_a), "{stage:?}: a tenant's own document is not another's");
        assert!(row.get::<_, bool>(1), "{stage:?}: the document taken is started, so no other delivery takes it");
        // B's own job goes (taken already, or not allowed to yield any more).
        assert_eq!(db.take_turn(b_waiting, stage, false, lease).await.expect("turn"), Turn::Go, "{stage:?}");
        // A started document never yields (its redelivery holds its slot).
        assert_eq!(db.take_turn(a_running, stage, true, lease).await.expect("turn"), Turn::Go, "{stage:?}");
        // A job that has yielded its most goes.
        assert_eq!(db.take_turn(a_next, stage, false, lease).await.expect("turn"), Turn::Go, "{stage:?}");
        // Finished documents take no turn.
        admin.execute("UPDATE rag_documents SET status = 'done' WHERE id = $1", &[&a_running]).await.expect("done");
        assert_eq!(db.take_turn(a_running, stage, true, lease).await.expect("turn"), Turn::NotProcessing);
        admin
            .execute("DELETE FROM rag_documents WHERE id = ANY($1)", &[&vec![a_running, a_next, b_waiting]])
            .await
            .expect("cleared");
    }
}

fn started_column(stage: Stage) -> &'static str {
    match stage {
        Stage::Parse => "parse_started_at",
        Stage::Ingest => "ingest_started_at",
    }
}
