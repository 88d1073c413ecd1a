//! The sweep's janitor tasks on the running stack: unlinked chat files past their
//! retention (rows first, then bytes, the row restored when the bytes stay), objects no row
//! names, and removals whose first run failed.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// Waits until `check` holds, for at most 45 seconds.
async fn eventually(what: &str, check: impl AsyncFnMut() -> bool) {
    sluice_e2e::eventually(what, Duration::from_secs(45), check).await;
}

/// A ready chat file of `user`'s: its id and its object's key.
async fn chat_file(stack: &Stack, user: &User, name: &str) -> (Uuid, String) {
    let (status, file) = stack.upload(user, name, Some("text/plain"), format!("notes of {name}\n").into_bytes()).await;
    assert_eq!(status, 201, "{file}");
    let id = Uuid::parse_str(file["id"].as_str().expect("id")).expect("uuid");
    let key: String = stack
        .db()
        .await
        .query_one("SELECT storage_path FROM chat_files WHERE id = $1", &[&id])
        .await
        .expect("row")
        .get(0);
    (id, key)
}

async fn link(stack: &Stack, user: &User, ids: &[Uuid]) {
    let (status, answer) = stack
        .call_json(
            user,
            Method::POST,
            &format!("/messages/{}/attachments", Uuid::new_v4()),
            Some(json!({"file_ids": ids})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn unlinked_chat_files_past_the_retention_are_removed_and_linked_or_recent_ones_stay() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (abandoned, abandoned_key) = chat_file(&stack, &user, "abandoned.txt").await;
    let (sent, sent_key) = chat_file(&stack, &user, "sent.txt").await;
    let (recent, recent_key) = chat_file(&stack, &user, "recent.txt").await;
    link(&stack, &user, &[sent]).await;
    // Two days old: past the day a file may wait for its message.
    stack
        .db()
        .await
        .execute(
            "UPDATE chat_files SET created_at = now() - interval '2 days' WHERE id = ANY($1)",
            &[&vec![abandoned, sent]],
        )
        .await
        .expect("age");
    eventually("the stack's sweep removed the abandoned file", async || {
        stack.call(&user, Method::GET, &format!("/files/{abandoned}"), None).await.0 == 404
    })
    .await;
    assert!(stack.keys_under(&abandoned_key).await.is_empty(), "its bytes went with its row");
    for (id, key) in [(sent, &sent_key), (recent, &recent_key)] {
        assert_eq!(stack.call(&user, Method::GET, &format!("/files/{id}"), None).await.0, 200);
        assert_eq!(stack.keys_under(key).await.len(), 1, "{key}");
    }
}

#[tokio::test]
async fn a_retention_removal_restores_the_row_when_the_bytes_stay_and_spares_a_file_linked_since_the_scan() {
    let stack = Stack::from_env().await;
    let user = User::new();
    // The sweep's login: chat files are the application login's.
    let db = stack.app_store(2).await;
    // A cutoff an hour ahead reaches these fresh files; the stack's own sweep (a day back) does not.
    let cutoff = OffsetDateTime::now_utc() + time::Duration::hours(1);
    let (stuck, stuck_key) = chat_file(&stack, &user, "stuck.txt").await;
    let candidates = db.unlinked_chat_files(cutoff, 100_000).await.expect("scan");
    assert!(candidates.iter().any(|(id, _)| *id == stuck), "an unlinked file is a candidate");
    let failed = db
        .reap_unlinked_chat_file(stuck, cutoff, async |_: &str| Err::<(), &str>("storage unavailable"))
        .await
        .expect("store");
    assert_eq!(failed, Err("storage unavailable"));
    assert_eq!(stack.call(&user, Method::GET, &format!("/files/{stuck}"), None).await.0, 200, "the row is back");
    assert_eq!(stack.keys_under(&stuck_key).await.len(), 1);

    // Linked after the scan: the removal re-checks and spares it.
    link(&stack, &user, &[stuck]).await;
    let spared = db.reap_unlinked_chat_file(stuck, cutoff, async |_: &str| Ok::<(), &str>(())).await.expect("store");
    assert_eq!(spared, Ok(sluice_store::Reaped::Spared));
    assert_eq!(stack.call(&user, Method::GET, &format!("/files/{stuck}"), None).await.0, 200);

    let (gone, gone_key) = chat_file(&stack, &user, "gone.txt").await;
    let s3 = &stack.s3;
    let removed = db
        .reap_unlinked_chat_file(gone, cutoff, async |key: &str| {
            s3.delete_object().bucket(&stack.bucket).key(key).send().await.map(|_| ()).map_err(|_| "delete failed")
        })
        .await
        .expect("store");
    assert_eq!(removed, Ok(sluice_store::Reaped::Removed));
    assert_eq!(stack.call(&user, Method::GET, &format!("/files/{gone}"), None).await.0, 404);
    assert!(stack.keys_under(&gone_key).await.is_empty());
}

#[tokio::test]
async fn objects_no_row_names_are_removed_by_the_scan_and_named_ones_stay() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (file, key) = chat_file(&stack, &user, "kept.txt").await;
    let prefix = format!("media/{}/", user.id);
    assert!(key.starts_with(&prefix), "{key}");
    let stray = format!("{prefix}stray.bin");
    stack.put_plain(&stray, b"left by a crash").await;
    let mut state = stack.sweep_state().await;
    state.thresholds.unnamed_object_grace = Duration::ZERO;
    // S3 stamps objects to the second: the stray must be older than the second the scan runs in.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let removed = sluice_sweep::remove_unnamed_objects(&state, &prefix, OffsetDateTime::now_utc()).await.expect("scan");
    assert_eq!(removed, 1);
    assert_eq!(stack.keys_under(&prefix).await.into_iter().collect::<Vec<_>>(), vec![key]);
    assert_eq!(stack.call(&user, Method::GET, &format!("/files/{file}"), None).await.0, 200);

    // With the default grace, an object written moments ago is left alone.
    let fresh = format!("{prefix}fresh.bin");
    stack.put_plain(&fresh, b"just written").await;
    let state = stack.sweep_state().await;
    assert_eq!(
        sluice_sweep::remove_unnamed_objects(&state, &prefix, OffsetDateTime::now_utc()).await.expect("scan"),
        0
    );
    assert_eq!(stack.keys_under(&fresh).await.len(), 1);
}

#[tokio::test]
async fn a_removal_whose_first_run_failed_is_finished_by_the_sweep() {
    let stack = Stack::from_env().await;
    let key = format!("parsed/{}", Uuid::new_v4());
    stack.put_plain(&key, b"orphaned text").await;
    let db = stack.store(2).await;
    let removal = db.queue_removal(std::slice::from_ref(&key), "test").await.expect("queue").expect("a removal");
    let failed = db.run_removal(removal, |_| async { Err::<(), &str>("storage unavailable") }).await.expect("store");
    assert_eq!(failed, Err("storage unavailable"));
    let pending = async || {
        stack
            .db()
            .await
            .query_one("SELECT count(*) FROM pending_removals WHERE id = $1", &[&removal])
            .await
            .expect("count")
            .get::<_, i64>(0)
    };
    assert_eq!(pending().await, 1, "a failed removal stays queued");
    assert_eq!(stack.keys_under(&key).await.len(), 1);
    // Past the grace the sweep leaves to whoever queued it.
    stack
        .db()
        .await
        .execute("UPDATE pending_removals SET queued_at = now() - interval '1 hour' WHERE id = $1", &[&removal])
        .await
        .expect("age");
    eventually("the sweep ran the removal", async || pending().await == 0).await;
    assert!(stack.keys_under(&key).await.is_empty());
}

#[tokio::test]
async fn a_sweep_reports_a_count_for_every_task() {
    let state = Stack::from_env().await.sweep_state().await;
    let report = sluice_sweep::handle(&state, OffsetDateTime::now_utc()).await.expect("a clean run");
    let logged = serde_json::to_value(&report).expect("json");
    let counts = logged.as_object().expect("an object");
    assert_eq!(counts.len(), 13, "twelve counts and the failed ones: {logged}");
    for (task, count) in counts.iter().filter(|(task, _)| *task != "failed_tasks") {
        assert!(count.is_u64(), "{task}: {logged}");
    }
    assert_eq!(logged["failed_tasks"], Value::Array(Vec::new()));
}

#[tokio::test]
async fn a_document_intent_that_expired_is_listed_as_failed_then_removed_after_the_retention() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let base = json!({"name": "Intents", "scope": "org", "collection_name": format!("intents_{}", &Uuid::new_v4().simple().to_string()[..10]),
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(base)).await;
    assert_eq!(status, 201, "{base}");
    let kb = Uuid::parse_str(base["id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    // Two failed documents whose links expired three days ago: one failed for want of a file,
    // one for a reason of its own (kept: the user may read it and retry).
    let (expired, other) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, message) in [
        (expired, sluice_sweep::INTENT_EXPIRED),
        (other, "parse: UnreadableDocument: upload a version with a text layer"),
    ] {
        db.execute(
            "INSERT INTO rag_documents (id, collection_name, kb_id, filename, filesize, filetype, status, storage_path, \
             error_message, upload_expires_at) VALUES ($1, $2, $3, 'a.pdf', 1, 'pdf', 'error', $4, $5, now() - interval '3 days')",
            &[&id, &base["collection_name"].as_str().expect("name"), &kb, &format!("document-uploads/{kb}/{}", id.simple()), &message],
        )
        .await
        .expect("row");
    }
    let present = async |id: Uuid| {
        db.query_one("SELECT count(*) FROM rag_documents WHERE id = $1", &[&id]).await.expect("count").get::<_, i64>(0)
            == 1
    };
    eventually("the expired intent's row removed", async || !present(expired).await).await;
    assert!(present(other).await, "a document that failed for another reason stays listed");
}

/// The state a lost or dead-lettered S3 event leaves, a day at most after the link expired:
/// the bytes stored, the row never judged. The sweep has the parse judge them: the upload
/// ends as if its event had come, neither refused for want of it nor left pending.
#[tokio::test]
async fn an_expired_upload_whose_bytes_landed_unjudged_is_judged_not_refused() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let bytes = b"Minutes: the harbour survey is approved.".to_vec();
    let (status, intent) =
        stack.intent(&user, json!({"filename": "minutes.txt", "size": bytes.len(), "mime_type": "text/plain"})).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(stack.put_presigned(&intent, bytes).await, 200);
    let id = Uuid::parse_str(intent["id"].as_str().expect("id")).expect("uuid");
    assert_eq!(stack.settled(&user, &id.to_string()).await["status"], "ready");
    let db = stack.db().await;
    db.execute(
        "UPDATE chat_files SET status = 'pending', object_etag = NULL, parsed_content = NULL, \
         expires_at = now() - interval '2 hours' WHERE id = $1",
        &[&id],
    )
    .await
    .expect("the event lost");
    let status = async || -> String {
        db.query_one("SELECT status FROM chat_files WHERE id = $1", &[&id]).await.expect("row").get(0)
    };
    eventually("the landed upload judged", async || status().await != "pending").await;
    let file = stack.settled(&user, &id.to_string()).await;
    assert_eq!(file["status"], "ready", "{file}");
    let key: String =
        db.query_one("SELECT storage_path FROM chat_files WHERE id = $1", &[&id]).await.expect("row").get(0);
    assert!(stack.keys_under(&key).await.contains(&key), "the judged bytes stay");
}

/// The same for a document: its bytes landed, its event never came; it is parsed and
/// indexed once, its chunks one copy.
#[tokio::test]
async fn an_expired_document_upload_whose_bytes_landed_unjudged_is_indexed_not_failed() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let base = json!({"name": "Runbooks", "scope": "org", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(base)).await;
    assert_eq!(status, 201, "{base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let bytes = b"# Runbook\n\nRestart the ingestion workers when the queue backs up.\n".to_vec();
    let declared = json!({"filename": "runbook.md", "size": bytes.len(), "mime_type": "text/markdown"});
    let (status, intent) =
        stack.call_json(&user, Method::POST, &format!("/kb/{kb}/documents/uploads"), Some(declared)).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(stack.put_presigned(&intent, bytes).await, 200);
    let id = Uuid::parse_str(intent["tracking_id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    // The vector table is made with the base's first chunks: counted once the document is done.
    let state = async || -> (String, i32, i64) {
        let row = db
            .query_one("SELECT status, coalesce(chunk_count, 0) FROM rag_documents WHERE id = $1", &[&id])
            .await
            .expect("row");
        let status: String = row.get(0);
        let chunks: i64 = if status == "done" {
            db.query_one(&format!("SELECT count(*) FROM \"rag_{collection}\" WHERE document_id = $1"), &[&id])
                .await
                .expect("chunks")
                .get(0)
        } else {
            0
        };
        (status, row.get(1), chunks)
    };
    eventually("the document indexed", async || state().await.0 == "done").await;
    db.execute(
        "UPDATE rag_documents SET status = 'processing', parsed_path = NULL, bytes_judged = false, \
         upload_expires_at = now() - interval '2 hours' WHERE id = $1",
        &[&id],
    )
    .await
    .expect("the event lost");
    eventually("the landed document finished", async || state().await.0 != "processing").await;
    let (status, chunk_count, chunks) = state().await;
    assert_eq!(status, "done", "not failed for want of its event");
    assert!(chunk_count > 0 && i64::from(chunk_count) == chunks, "{chunk_count} chunks recorded, {chunks} stored");
}

/// An upload whose bytes landed but that nothing could judge for a day after it was asked
/// for is given up: the document fails saying so, and its bytes are removed.
#[tokio::test]
async fn a_landed_document_upload_still_unjudged_a_day_on_fails_saying_so() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let base = json!({"name": "Archive", "scope": "org", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(base)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id");
    let bytes = b"Ledger of the old harbour dues.\n".to_vec();
    let declared = json!({"filename": "ledger.txt", "size": bytes.len(), "mime_type": "text/plain"});
    let (status, intent) =
        stack.call_json(&user, Method::POST, &format!("/kb/{kb}/documents/uploads"), Some(declared)).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(stack.put_presigned(&intent, bytes).await, 200);
    let id = Uuid::parse_str(intent["tracking_id"].as_str().expect("id")).expect("uuid");
    let db = stack.db().await;
    let status = async || -> String {
        db.query_one("SELECT status FROM rag_documents WHERE id = $1", &[&id]).await.expect("row").get(0)
    };
    eventually("the document indexed", async || status().await == "done").await;
    // Its event lost, and the upload asked for a day ago.
    db.execute(
        "UPDATE rag_documents SET status = 'processing', parsed_path = NULL, bytes_judged = false, \
         created_at = now() - interval '25 hours', upload_expires_at = now() - interval '2 hours' WHERE id = $1",
        &[&id],
    )
    .await
    .expect("the event lost");
    let key: String =
        db.query_one("SELECT storage_path FROM rag_documents WHERE id = $1", &[&id]).await.expect("row").get(0);
    let row = async || -> (String, String) {
        let row = db
            .query_one("SELECT status, coalesce(error_message, '') FROM rag_documents WHERE id = $1", &[&id])
            .await
            .expect("row");
        (row.get(0), row.get(1))
    };
    eventually("the day-old upload given up", async || row().await.0 != "processing").await;
    assert_eq!(row().await, ("error".to_owned(), sluice_sweep::NEVER_JUDGED.to_owned()));
    eventually("its bytes removed", async || !stack.keys_under(&key).await.contains(&key)).await;
}
