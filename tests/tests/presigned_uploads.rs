//! Presigned uploads on the running stack: an intent, a real PUT to the emulator's S3, the
//! bucket's notification through SQS, the parse function run by the local poller, and the
//! row's final state read back over HTTP.

use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use sluice_fixtures::{RawZipEntry, pdf, raw_zip};

async fn presigned(stack: &Stack, user: &User, filename: &str, mime: &str, bytes: Vec<u8>) -> Value {
    let (status, intent) =
        stack.intent(user, json!({"filename": filename, "size": bytes.len(), "mime_type": mime})).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(intent["status"], "pending");
    assert_eq!(stack.put_presigned(&intent, bytes).await, 200);
    stack.settled(user, intent["id"].as_str().expect("id")).await
}

#[tokio::test]
async fn a_nine_megabyte_file_put_to_its_presigned_url_ends_ready_with_its_preview() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let mut text = String::from("Quarterly ledger\nregion,amount\n");
    while text.len() < 9 * 1024 * 1024 {
        text.push_str("north,1200\nsouth,900\n");
    }
    let size = text.len() as i64;
    assert!(size > 9 * 1024 * 1024, "over what one Lambda request may carry");
    let file = presigned(&stack, &user, "ledger.csv", "text/csv", text.into_bytes()).await;
    assert_eq!(file["status"], "ready", "{file}");
    assert_eq!(file["preview"], "Quarterly ledger\nregion,amount\nnorth,1200");
    assert_eq!(file["size"].as_i64(), Some(size));
    let keys = stack.keys_under(&format!("uploads/{}/", user.id)).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let head = stack.s3.head_object().bucket(&stack.bucket).key(keys.first().expect("key")).send().await.expect("head");
    assert_eq!(head.ssekms_key_id(), Some(stack.kms_key_arn().await.as_str()));
}

#[tokio::test]
async fn the_inline_and_the_presigned_path_record_the_same_file_alike() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let bytes = pdf(&["Minutes of the board", "Second page"]);
    let (status, inline) = stack.upload(&user, "minutes.pdf", Some("application/pdf"), bytes.clone()).await;
    assert_eq!(status, 201, "{inline}");
    let presigned = presigned(&stack, &user, "minutes.pdf", "application/pdf", bytes).await;
    for field in ["filename", "mime_type", "size", "file_type", "status", "preview", "checksum_sha256", "rejection"] {
        assert_eq!(inline[field], presigned[field], "{field} differs");
    }
}

#[tokio::test]
async fn bytes_that_contradict_the_declared_type_end_rejected_and_their_object_is_gone() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let file = presigned(&stack, &user, "photo.png", "image/png", pdf(&["not a picture"])).await;
    assert_eq!(file["status"], "rejected", "{file}");
    assert!(file["rejection"].as_str().expect("a reason").starts_with("parse: content_mismatch: "), "{file}");
    // The row is rejected first, then the object deleted (a crash between leaves a row the
    // redelivery finishes): the object goes just after the answer says so.
    let started = std::time::Instant::now();
    while !stack.keys_under(&format!("uploads/{}/", user.id)).await.is_empty() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the refused object stayed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_unsafe_archive_ends_rejected_and_its_object_is_gone() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let zip = raw_zip(&[RawZipEntry::file("../../etc/cron.d/evil", b"* * * * * root sh")]);
    let file = presigned(&stack, &user, "repo.zip", "application/zip", zip).await;
    assert_eq!(file["status"], "rejected", "{file}");
    assert!(file["rejection"].as_str().expect("a reason").contains("path_traversal"), "{file}");
    assert!(stack.keys_under(&format!("uploads/{}/", user.id)).await.is_empty());
}

#[tokio::test]
async fn an_intent_is_refused_clearly_when_its_declaration_is() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let cases = [
        (json!({"size": 10, "mime_type": "text/plain"}), 400, "filename"),
        (json!({"filename": "a.txt", "mime_type": "text/plain"}), 400, "size"),
        (json!({"filename": "a.txt", "size": -1, "mime_type": "text/plain"}), 400, "size"),
        (json!({"filename": "a.txt", "size": 10}), 400, "mime_type"),
        (json!({"filename": "a.exe", "size": 10, "mime_type": "application/octet-stream"}), 415, "filename"),
        (json!({"filename": "a.pdf", "size": 10, "mime_type": "image/png"}), 415, "mime_type"),
        (json!({"filename": "a.pdf", "size": 11 * 1024 * 1024, "mime_type": "application/pdf"}), 413, "size"),
    ];
    for (body, expected, field) in cases {
        let (status, answer) = stack.intent(&user, body.clone()).await;
        assert_eq!(status, expected, "{body}: {answer}");
        assert!(answer["error"]["details"]["fields"][field].is_string(), "{body}: {answer}");
    }
    assert_eq!(stack.stored_for(&user).await, (0, 0));
}

#[tokio::test]
async fn the_same_event_twice_leaves_one_row_one_object_and_one_result() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let file = presigned(&stack, &user, "notes.txt", "text/plain", b"first line\nsecond\n".to_vec()).await;
    assert_eq!(file["status"], "ready");
    let key = stack.keys_under(&format!("uploads/{}/", user.id)).await.pop_first().expect("the object");
    let db = stack.db().await;
    let before: (String, time::OffsetDateTime) = {
        let row = db
            .query_one("SELECT status, updated_at FROM chat_files WHERE storage_path = $1", &[&key])
            .await
            .expect("row");
        (row.get(0), row.get(1))
    };
    let encoded = key.replace('/', "%2F");
    let event = json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": stack.bucket}, "object": {"key": encoded}}}]});
    let queue = stack.sqs.get_queue_url().queue_name("sluice-parse").send().await.expect("queue");
    let queue = queue.queue_url().expect("url");
    for _ in 0..2 {
        stack.sqs.send_message().queue_url(queue).message_body(event.to_string()).send().await.expect("send");
    }
    stack.drained("sluice-parse").await;
    let row =
        db.query_one("SELECT status, updated_at FROM chat_files WHERE storage_path = $1", &[&key]).await.expect("row");
    assert_eq!((row.get::<_, String>(0), row.get::<_, time::OffsetDateTime>(1)), before);
    assert_eq!(stack.stored_for(&user).await, (0, 1));
    assert_eq!(stack.keys_under(&format!("uploads/{}/", user.id)).await.len(), 1);
}

#[tokio::test]
async fn an_object_no_intent_asked_for_is_deleted() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let key = format!("uploads/{}/0000_stray.txt", user.id);
    stack
        .s3
        .put_object()
        .bucket(&stack.bucket)
        .key(&key)
        .body(b"nobody asked".to_vec().into())
        .send()
        .await
        .expect("stray put");
    let started = std::time::Instant::now();
    while !stack.keys_under(&format!("uploads/{}/", user.id)).await.is_empty() {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the stray object is still there");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_intent_whose_link_expired_is_swept_and_bytes_landing_late_are_deleted() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, intent) =
        stack.intent(&user, json!({"filename": "late.txt", "size": 5, "mime_type": "text/plain"})).await;
    assert_eq!(status, 201, "{intent}");
    let id: uuid::Uuid = intent["id"].as_str().expect("id").parse().expect("uuid");
    // The emulator does not check a presigned URL's expiry (S3 does), so the clock is moved.
    let db = stack.db().await;
    db.execute("UPDATE chat_files SET expires_at = now() - interval '2 hours' WHERE id = $1", &[&id])
        .await
        .expect("age the intent");
    let file = stack.settled(&user, &id.to_string()).await;
    assert_eq!(file["status"], "rejected", "{file}");
    assert!(file["rejection"].as_str().expect("a reason").starts_with("sweep: intent_expired: "), "{file}");
    // Bytes that arrive anyway are deleted, not judged.
    assert_eq!(stack.put_presigned(&intent, b"hello".to_vec()).await, 200);
    let started = std::time::Instant::now();
    while !stack.keys_under(&format!("uploads/{}/", user.id)).await.is_empty() {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "the late object is still there");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(stack.settled(&user, &id.to_string()).await["status"], "rejected");
}

#[tokio::test]
async fn a_message_that_always_fails_reaches_the_dead_letter_queue_alone() {
    let stack = Stack::from_env().await;
    let queue = stack.sqs.get_queue_url().queue_name("sluice-parse").send().await.expect("queue").queue_url;
    let queue = queue.expect("url");
    let poison =
        format!("{{\"Records\": [{{\"eventName\": \"ObjectCreated:Put\", \"unfinished\": \"{}", uuid::Uuid::new_v4());
    stack.sqs.send_message().queue_url(&queue).message_body(&poison).send().await.expect("send");
    stack.dead_letter("sluice-parse-dlq", std::time::Duration::from_secs(90), |body| body == poison).await;
}

#[tokio::test]
async fn judged_bytes_cannot_be_replaced_through_the_same_url() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let bytes = b"Minutes: the budget was approved.".to_vec();
    let (status, intent) =
        stack.intent(&user, json!({"filename": "minutes.txt", "size": bytes.len(), "mime_type": "text/plain"})).await;
    assert_eq!(status, 201, "{intent}");
    // The URL is signed for a write that happens once: S3 refuses it where the key exists.
    assert_eq!(intent["upload"]["headers"]["if-none-match"], "*", "{intent}");
    assert_eq!(stack.put_presigned(&intent, bytes.clone()).await, 200);
    let file = stack.settled(&user, intent["id"].as_str().expect("id")).await;
    assert_eq!(file["status"], "ready", "{file}");
    let mut swapped = bytes.clone();
    swapped[0] = b'X';
    let second = stack.put_presigned(&intent, swapped).await;
    assert!(second == 412 || second == 409, "a second PUT to the same URL was answered {second}");
    let id = intent["id"].as_str().expect("id");
    let (_, text) = stack.call(&user, reqwest::Method::GET, &format!("/files/{id}/text"), None).await;
    assert!(text.starts_with("Minutes: the budget"), "{text}");
}
