//! S3 sync sources on the running stack, with a second bucket of the emulator as the
//! source: runs that ingest, skip unread and unembedded what did not change, update and
//! remove by claims; hostile keys; removal guards; events; schedules; credentials.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::stub::StubProvider;
use sluice_e2e::{Stack, User, eventually};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A fresh bucket of the emulator, standing in for a tenant's.
async fn source_bucket(stack: &Stack) -> String {
    let bucket = format!("tenant-docs-{}", &Uuid::new_v4().simple().to_string()[..12]);
    stack.s3.create_bucket().bucket(&bucket).send().await.expect("create the source bucket");
    bucket
}

async fn put(stack: &Stack, bucket: &str, key: &str, body: &str) {
    stack.s3.put_object().bucket(bucket).key(key).body(body.as_bytes().to_vec().into()).send().await.expect("put");
}

async fn remove(stack: &Stack, bucket: &str, key: &str) {
    stack.s3.delete_object().bucket(bucket).key(key).send().await.expect("delete");
}

/// An org editor who may store and use credentials, on a base embedding through `stub`.
async fn editor_and_base(stack: &Stack, stub: &StubProvider) -> (User, String) {
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit", "secrets:edit"], false);
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let body = json!({"name": "Shared drive", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"]});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    (user, base["id"].as_str().expect("id").to_owned())
}

/// An `aws_credentials` secret in the vault (the emulator takes any key pair).
async fn key_pair(stack: &Stack, user: &User) -> String {
    let body = json!({"name": format!("reader {}", Uuid::new_v4().simple()), "kind": "aws_credentials",
        "visibility": "org", "value": {"access_key_id": "AKIAEXAMPLEREADER", "secret_access_key": "not-a-real-secret"}});
    let (status, secret) = stack.call_json(user, Method::POST, "/secrets", Some(body)).await;
    assert_eq!(status, 201, "{secret}");
    assert!(secret.get("value").is_none(), "a secret's value is never answered: {secret}");
    secret["id"].as_str().expect("id").to_owned()
}

async fn new_source(stack: &Stack, user: &User, kb: &str, body: Value) -> String {
    let (status, source) = stack.call_json(user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(body)).await;
    assert_eq!(status, 201, "{source}");
    source["id"].as_str().expect("id").to_owned()
}

fn s3_source(bucket: &str, prefix: &str, secret: &str) -> Value {
    json!({"type": "s3", "name": format!("{bucket}/{prefix}"), "config": {"bucket": bucket, "prefix": prefix},
        "credential": {"secret_id": secret}, "sync_mode": "new_only"})
}

/// Starts a run and waits for it to end; its log.
async fn run(stack: &Stack, user: &User, kb: &str, source: &str, body: Option<Value>) -> Value {
    let path = format!("/kb/{kb}/sync-sources/{source}/sync");
    let (status, started) = stack.call_json(user, Method::POST, &path, body).await;
    assert_eq!(status, 202, "{started}");
    let run_id = started["run_id"].as_str().expect("run id").to_owned();
    finished(stack, user, kb, source, &run_id).await
}

async fn finished(stack: &Stack, user: &User, kb: &str, source: &str, run_id: &str) -> Value {
    let started = Instant::now();
    loop {
        let (status, logs) =
            stack.call_json(user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}/logs"), None).await;
        assert_eq!(status, 200, "{logs}");
        let log = logs["logs"].as_array().expect("logs").iter().find(|l| l["id"] == run_id).cloned();
        if let Some(log) = log.filter(|l| l["status"] != "running") {
            return log;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "run still going: {logs}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn counts(log: &Value) -> [i64; 6] {
    ["total", "ingested", "updated", "skipped", "failed", "removed"].map(|k| log[k].as_i64().expect(k))
}

/// The base's documents: (source_path, filename, status), once the API's listing and the
/// table agree (a sync may add a row between the two reads).
async fn documents(stack: &Stack, user: &User, kb: &str) -> Vec<(String, String, String)> {
    let mut tries = 0;
    loop {
        let (status, listed) = stack.call_json(user, Method::GET, &format!("/kb/{kb}/documents?limit=100"), None).await;
        assert_eq!(status, 200, "{listed}");
        let mut rows: Vec<(String, String, String)> = stack
            .db()
            .await
            .query(
                "SELECT coalesce(source_path, ''), filename, status FROM rag_documents WHERE kb_id = $1::text::uuid",
                &[&kb],
            )
            .await
            .expect("documents")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let listed = listed["documents"].as_array().expect("documents");
        tries += 1;
        if rows.len() != listed.len() && tries < 20 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        assert_eq!(rows.len(), listed.len(), "{listed:?}");
        // A synced document keeps no original, and says so.
        for document in listed.iter().filter(|d| d["source"] == "s3") {
            assert_eq!(document["has_file"], false, "{document}");
            assert!(document["source_path"].as_str().is_some_and(|p| p.starts_with("s3://")), "{document}");
        }
        rows.sort();
        return rows;
    }
}

#[tokio::test]
async fn a_prefix_is_kept_in_step_and_an_unchanged_object_costs_only_its_listing_line() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let bucket = source_bucket(&stack).await;
    let long_key = format!("docs/{}.md", "k".repeat(1024 - "docs/".len() - 3));
    assert_eq!(long_key.len(), 1024);
    for (key, body) in [
        ("docs/a/readme.md", "Alpha team readme: the deploy runs on Tuesdays."),
        ("docs/b/readme.md", "Beta team readme: the deploy runs on Thursdays."),
        ("docs/keep.md", "A note that never changes."),
        ("docs/change.md", "The first version of the changing note."),
        ("docs/remove.md", "A note that will be removed."),
        ("docs/../../escape.md", "A key that tries to climb out."),
        ("docs/%2e%2e/encoded.md", "A key with an encoded climb."),
        (long_key.as_str(), "The longest key S3 stores."),
        ("docs/folder/", ""),
        ("docs/tool.exe", "not a document"),
        ("elsewhere/outside.md", "Not under the prefix."),
    ] {
        put(&stack, &bucket, key, body).await;
    }
    let secret = key_pair(&stack, &user).await;
    let source = new_source(&stack, &user, &kb, s3_source(&bucket, "docs/", &secret)).await;

    let first = run(&stack, &user, &kb, &source, None).await;
    // Eight documents; the marker is no file; the .exe is listed and skipped.
    assert_eq!(counts(&first), [9, 8, 0, 1, 0, 0], "{first}");
    assert_eq!((first["status"].as_str(), first["fetched"].as_i64()), (Some("done"), Some(8)), "{first}");
    let docs = documents(&stack, &user, &kb).await;
    assert_eq!(docs.len(), 8, "{docs:?}");
    assert!(docs.iter().all(|(_, _, status)| status == "done"), "{docs:?}");
    for (path, filename, _) in &docs {
        assert!(path.starts_with(&format!("s3://{bucket}/docs/")), "{path}");
        assert!(!filename.contains('/') && !filename.starts_with('.'), "a label, not a path: {filename}");
    }
    // Read back alone each is the document listed; its text is there, its original is not.
    let (_, listed) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/documents?limit=100"), None).await;
    for document in listed["documents"].as_array().expect("documents") {
        let id = document["id"].as_str().expect("id");
        let (status, alone) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}"), None).await;
        assert_eq!((status, &alone), (200, document));
        let (status, file) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}/file"), None).await;
        assert_eq!((status, file["error"]["message"].as_str()), (404, Some("Document file not found")), "{file}");
        let (status, text) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
        assert_eq!(status, 200, "{text}");
        assert!(text["total_chars"].as_u64().is_some_and(|n| n > 0), "{text}");
    }
    let readmes: Vec<_> = docs.iter().filter(|(_, f, _)| f == "readme.md").map(|(p, _, _)| p.clone()).collect();
    assert_eq!(readmes, [format!("s3://{bucket}/docs/a/readme.md"), format!("s3://{bucket}/docs/b/readme.md")]);
    // A synced document keeps no original; its text is under its id, never under its key.
    let rows = stack
        .db()
        .await
        .query("SELECT storage_path, parsed_path FROM rag_documents WHERE kb_id = $1::text::uuid", &[&kb])
        .await
        .expect("paths");
    for row in rows {
        assert_eq!(row.get::<_, Option<String>>(0), None);
        assert!(row.get::<_, String>(1).starts_with("parsed/"));
    }
    let embedded = stub.requests();
    assert!(embedded > 0);

    let second = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(counts(&second), [9, 0, 0, 9, 0, 0], "{second}");
    assert_eq!(second["fetched"].as_i64(), Some(0), "an unchanged object is not downloaded: {second}");
    assert_eq!(stub.requests(), embedded, "nor embedded");

    put(&stack, &bucket, "docs/change.md", "The second version of the changing note, longer.").await;
    remove(&stack, &bucket, "docs/remove.md").await;
    put(&stack, &bucket, "docs/new.md", "A note added after the first run.").await;
    let third = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(counts(&third), [9, 1, 1, 7, 0, 1], "{third}");
    assert_eq!(third["fetched"].as_i64(), Some(2), "{third}");
    let docs = documents(&stack, &user, &kb).await;
    let paths: Vec<&str> = docs.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(docs.len(), 8, "{docs:?}");
    assert!(paths.contains(&format!("s3://{bucket}/docs/new.md").as_str()));
    assert!(!paths.contains(&format!("s3://{bucket}/docs/remove.md").as_str()));
    let chunks: i64 = stack
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM rag_documents WHERE kb_id = $1::text::uuid AND source_path LIKE '%/docs/change.md'",
            &[&kb],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(chunks, 1, "the replacement retired the document it replaced");

    // The run is logged where the caller can reach it, and nowhere else.
    let (_, all) = stack.call_json(&user, Method::GET, "/rag/sync/logs", None).await;
    assert!(all["logs"].as_array().expect("logs").iter().any(|l| l["id"] == third["id"]), "{all}");
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (_, theirs) = stack.call_json(&stranger, Method::GET, "/rag/sync/logs", None).await;
    assert!(!theirs["logs"].as_array().expect("logs").iter().any(|l| l["id"] == third["id"]), "{theirs}");
}

#[tokio::test]
async fn removal_follows_claims_holds_past_the_threshold_and_never_follows_a_broken_listing() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let bucket = source_bucket(&stack).await;
    for key in ["p/one.md", "p/two.md", "p/three.md", "p/shared/four.md"] {
        put(&stack, &bucket, key, &format!("The note called {key}.")).await;
    }
    let secret = key_pair(&stack, &user).await;
    let wide = new_source(&stack, &user, &kb, s3_source(&bucket, "p/", &secret)).await;
    let narrow = new_source(&stack, &user, &kb, s3_source(&bucket, "p/shared/", &secret)).await;
    assert_eq!(counts(&run(&stack, &user, &kb, &wide, None).await)[1], 4);
    let narrow_run = run(&stack, &user, &kb, &narrow, None).await;
    assert_eq!(counts(&narrow_run), [1, 0, 0, 1, 0, 0], "the same object, claimed by both: {narrow_run}");

    // Two sources list one object: it stays until both stop.
    let path = format!("/kb/{kb}/sync-sources/{wide}");
    let (status, _) = stack
        .call_json(&user, Method::PATCH, &path, Some(json!({"config": {"bucket": bucket, "prefix": "p/o"}})))
        .await;
    assert_eq!(status, 200);
    // Narrowed to p/o…, the wide source no longer lists three of its four documents: past
    // its 50% threshold, nothing is removed and the log says so.
    let held = run(&stack, &user, &kb, &wide, None).await;
    assert_eq!((held["removed"].as_i64(), held["removals_held"].as_i64()), (Some(0), Some(3)), "{held}");
    assert!(held["message"].as_str().expect("message").contains("confirm_removals"), "{held}");
    assert_eq!(documents(&stack, &user, &kb).await.len(), 4);
    let confirmed = run(&stack, &user, &kb, &wide, Some(json!({"confirm_removals": true}))).await;
    assert_eq!(confirmed["removed"].as_i64(), Some(2), "four.md is still the narrow source's: {confirmed}");
    let mut names: Vec<String> = documents(&stack, &user, &kb).await.into_iter().map(|(_, f, _)| f).collect();
    names.sort();
    assert_eq!(names, ["four.md", "one.md"]);
    // Deleting the narrow source drops its claim, and four.md goes with it.
    let (status, deleted) =
        stack.call_json(&user, Method::DELETE, &format!("/kb/{kb}/sync-sources/{narrow}"), None).await;
    assert_eq!((status, deleted["documents_removed"].as_i64()), (200, Some(1)), "{deleted}");
    let names: Vec<String> = documents(&stack, &user, &kb).await.into_iter().map(|(_, f, _)| f).collect();
    assert_eq!(names, ["one.md"]);
    // Each decision about who reads what is recorded: created, repointed, deleted.
    let store = stack.admin_store().await;
    let actions =
        |entries: Vec<Value>| entries.iter().map(|e| e["action"].as_str().unwrap_or("").to_owned()).collect::<Vec<_>>();
    let wide_audit = store.audit_entries(Uuid::parse_str(&wide).expect("id")).await.expect("audit");
    // Its prefix narrowed is a move: its credential lent again, and audited as one.
    assert_eq!(actions(wide_audit), ["sync_source.created", "sync_source.moved"]);
    let narrow_audit = store.audit_entries(Uuid::parse_str(&narrow).expect("id")).await.expect("audit");
    assert_eq!(actions(narrow_audit.clone()), ["sync_source.created", "sync_source.deleted"]);
    assert!(narrow_audit.iter().all(|e| e["credential_id"] == secret.as_str() && e["actor_id"] == user.id.to_string()));

    // A listing that cannot complete (the bucket is gone) fails the run and removes nothing.
    for key in ["p/one.md", "p/two.md", "p/three.md", "p/shared/four.md"] {
        remove(&stack, &bucket, key).await;
    }
    stack.s3.delete_bucket().bucket(&bucket).send().await.expect("delete the bucket");
    let broken = run(&stack, &user, &kb, &wide, Some(json!({"confirm_removals": true}))).await;
    assert_eq!((broken["status"].as_str(), broken["removed"].as_i64()), (Some("failed"), Some(0)), "{broken}");
    assert!(broken["message"].as_str().expect("message").starts_with("sync: NoSuchBucket: "), "{broken}");
    assert_eq!(documents(&stack, &user, &kb).await.len(), 1);

    // A source whose credential was deleted refuses to run, naming it.
    let (status, _) = stack.call(&user, Method::DELETE, &format!("/secrets/{secret}"), None).await;
    assert_eq!(status, 204);
    let refused = run(&stack, &user, &kb, &wide, None).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    let message = refused["message"].as_str().expect("message");
    assert!(message.starts_with("sync: CredentialDeleted: ") && message.contains(&secret), "{message}");
}

#[tokio::test]
async fn a_source_refuses_what_it_may_not_decide_and_answers_strangers_as_missing() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let secret = key_pair(&stack, &user).await;
    let fields_of = |answer: &Value| -> Vec<String> {
        answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
    };
    let base = s3_source("team-docs", "hr/", &secret);
    let with = |patch: Value| {
        let mut body = base.clone();
        for (k, v) in patch.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    for (body, field) in [
        (
            with(json!({"config": {"bucket": "team-docs", "aws_secret_access_key": "x"}})),
            "config.aws_secret_access_key",
        ),
        (with(json!({"config": {"bucket": "Not_A_Bucket"}})), "config.bucket"),
        (with(json!({"config": {"prefix": "hr/"}})), "config.bucket"),
        (with(json!({"credential": {"role_arn": "arn:aws:iam::12:role/x"}})), "credential.role_arn"),
        // The deployment's own account (the emulator's) is never a tenant's.
        (with(json!({"credential": {"role_arn": "arn:aws:iam::123456789012:role/hr-reader"}})), "credential.role_arn"),
        (with(json!({"credential": {"secret_id": Uuid::new_v4().to_string()}})), "credential.secret_id"),
        (with(json!({"sync_mode": "mirror"})), "sync_mode"),
        (with(json!({"schedule": "rate(1 minute)"})), "schedule"),
        (with(json!({"max_removal_percent": 150})), "max_removal_percent"),
    ] {
        let (status, refused) =
            stack.call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(body.clone())).await;
        assert_eq!((status, fields_of(&refused)), (400, vec![field.to_owned()]), "{body}: {refused}");
    }
    let credential_refusal = stack
        .call_json(
            &user,
            Method::POST,
            &format!("/kb/{kb}/sync-sources"),
            Some(with(json!({"config": {"bucket": "team-docs", "aws_secret_access_key": "x"}}))),
        )
        .await
        .1;
    assert!(
        credential_refusal["error"]["message"]
            .as_str()
            .expect("message")
            .contains("a credential does not go in a source's configuration")
    );
    // Another organization's key pair is not one this source can name.
    let other = User::with(Some(Uuid::new_v4()), &["collections:edit", "secrets:edit"], false);
    let foreign = key_pair(&stack, &other).await;
    let (status, refused) = stack
        .call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(s3_source("team-docs", "", &foreign)))
        .await;
    assert_eq!((status, fields_of(&refused)), (400, vec!["credential.secret_id".to_owned()]), "{refused}");

    let role = json!({"type": "s3", "name": "by role", "config": {"bucket": "team-docs"},
        "credential": {"role_arn": "arn:aws:iam::210987654321:role/sluice-reader"}, "schedule": "cron(0 3 ? * MON *)"});
    let source = new_source(&stack, &user, &kb, role).await;
    let (status, listed) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources"), None).await;
    assert_eq!(status, 200);
    assert!(listed["sources"].as_array().expect("sources").iter().any(|s| s["id"] == source.as_str()), "{listed}");
    let (_, shown) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}"), None).await;
    let external_id = shown["credential"]["external_id"].as_str().expect("the editor sees the id").to_owned();
    assert!(external_id.starts_with("sluice-") && external_id.len() == 71, "{external_id}");
    assert!(shown["next_run_at"].is_string(), "{shown}");
    // Each source has its own: a second source naming the same role gets another id.
    let again = json!({"type": "s3", "name": "same role", "config": {"bucket": "team-docs"},
        "credential": {"role_arn": "arn:aws:iam::210987654321:role/sluice-reader"}});
    let second = new_source(&stack, &user, &kb, again).await;
    let (_, second) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources/{second}"), None).await;
    assert_ne!(second["credential"]["external_id"].as_str(), Some(external_id.as_str()), "{second}");
    // A change that keeps the role keeps the id; another role gets a new one.
    let source_path = format!("/kb/{kb}/sync-sources/{source}");
    let patch = |body: Value| stack.call_json(&user, Method::PATCH, &source_path, Some(body));
    let (status, kept) = patch(json!({"name": "renamed",
        "credential": {"role_arn": "arn:aws:iam::210987654321:role/sluice-reader"}}))
    .await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept["credential"]["external_id"].as_str(), Some(external_id.as_str()));
    let (status, moved) = patch(json!({"credential": {"role_arn": "arn:aws:iam::210987654321:role/other"}})).await;
    assert_eq!(status, 200, "{moved}");
    let moved_id = moved["credential"]["external_id"].as_str().expect("id").to_owned();
    assert!(moved_id != external_id && moved_id.starts_with("sluice-"), "{moved}");
    // The same role pointed at another bucket is a new credential: a new id, and a move audited.
    let (status, elsewhere) = patch(json!({"config": {"bucket": "finance-docs"}})).await;
    assert_eq!(status, 200, "{elsewhere}");
    let elsewhere_id = elsewhere["credential"]["external_id"].as_str().expect("id");
    assert!(elsewhere_id != moved_id && elsewhere_id.starts_with("sluice-"), "{elsewhere}");
    // A viewer of the base sees which role, never the id its trust policy requires.
    let viewer = User::with(Some(user_org(&stack, &user, &kb).await), &["collections:view"], false);
    let (status, seen) = stack.call_json(&viewer, Method::GET, &format!("/kb/{kb}/sync-sources/{source}"), None).await;
    assert_eq!(status, 200, "{seen}");
    assert_eq!(seen["credential"]["role_arn"], "arn:aws:iam::210987654321:role/other");
    assert!(seen["credential"].get("external_id").is_none(), "{seen}");
    // Repointing at another base's collection is refused here.
    let (status, refused) = stack
        .call_json(
            &user,
            Method::PATCH,
            &format!("/kb/{kb}/sync-sources/{source}"),
            Some(json!({"collection_name": "elsewhere"})),
        )
        .await;
    assert_eq!((status, fields_of(&refused)), (400, vec!["collection_name".to_owned()]), "{refused}");
    // Who created and changed it, and with which credential, is recorded; the config is not.
    let audit = stack.admin_store().await.audit_entries(Uuid::parse_str(&source).expect("id")).await.expect("audit");
    assert_eq!(audit.len(), 4, "{audit:?}");
    assert_eq!(audit[0]["action"], "sync_source.created");
    assert_eq!(audit[3]["action"], "sync_source.moved", "{audit:?}");
    assert_eq!(audit[0]["credential_id"], "arn:aws:iam::210987654321:role/sluice-reader");
    assert!(!audit[0].to_string().contains("team-docs"), "{audit:?}");

    // A stranger, and a viewer who may not write, are answered as if the base did not exist.
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (status, missing) =
        stack.call_json(&stranger, Method::GET, &format!("/kb/{kb}/sync-sources/{source}/logs"), None).await;
    let (absent_status, absent) =
        stack.call_json(&stranger, Method::GET, &format!("/kb/{}/sync-sources", Uuid::new_v4()), None).await;
    assert_eq!((status, &missing), (absent_status, &absent));
    assert_eq!(status, 404);
    // Another base's source under this base is missing, not an empty log.
    let (_, other_kb) = editor_and_base(&stack, &stub).await;
    let (status, _) =
        stack.call_json(&user, Method::GET, &format!("/kb/{other_kb}/sync-sources/{source}/logs"), None).await;
    assert_eq!(status, 404);
}

async fn user_org(stack: &Stack, user: &User, kb: &str) -> Uuid {
    let (_, base) = stack.call_json(user, Method::GET, &format!("/kb/{kb}"), None).await;
    Uuid::parse_str(base["org_id"].as_str().expect("org")).expect("uuid")
}

#[tokio::test]
async fn sources_are_capped_per_base_and_event_driven_ones_per_bucket() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let secret = key_pair(&stack, &user).await;
    let bucket = source_bucket(&stack).await;
    // An event-driven source is checked against its bucket first: a bucket that is not
    // there is refused by name, before anything is stored; a scheduled one is not checked.
    let mut missing = s3_source(&format!("absent-{}", &Uuid::new_v4().simple().to_string()[..12]), "", &secret);
    missing["event_driven"] = json!(true);
    let (status, refused) =
        stack.call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(missing)).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["config.bucket"].is_string(), "{refused}");
    let limit = sluice_knowledge::MAX_EVENT_SOURCES_PER_BUCKET as usize;
    for n in 0..limit {
        let mut body = s3_source(&bucket, &format!("p{n}/"), &secret);
        body["event_driven"] = json!(true);
        new_source(&stack, &user, &kb, body).await;
    }
    let mut one_more = s3_source(&bucket, "more/", &secret);
    one_more["event_driven"] = json!(true);
    let (status, refused) =
        stack.call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(one_more.clone())).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["event_driven"].is_string(), "{refused}");
    // Scheduled instead, it is taken; then the base's own cap holds.
    one_more["event_driven"] = json!(false);
    new_source(&stack, &user, &kb, one_more).await;
    for n in (limit + 1)..sluice_knowledge::MAX_SOURCES_PER_BASE {
        new_source(&stack, &user, &kb, s3_source(&bucket, &format!("s{n}/"), &secret)).await;
    }
    let (status, refused) = stack
        .call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(s3_source(&bucket, "last/", &secret)))
        .await;
    assert_eq!(status, 409, "{refused}");
    // Another tenant's sources on the same bucket count against their own cap only.
    let (other, other_kb) = editor_and_base(&stack, &stub).await;
    let other_secret = key_pair(&stack, &other).await;
    let mut theirs = s3_source(&bucket, "p0/", &other_secret);
    theirs["event_driven"] = json!(true);
    new_source(&stack, &other, &other_kb, theirs).await;
}

#[tokio::test]
async fn an_event_applies_one_object_and_a_due_schedule_starts_one_run() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let bucket = source_bucket(&stack).await;
    let secret = key_pair(&stack, &user).await;
    let mut body = s3_source(&bucket, "inbox/", &secret);
    body["event_driven"] = json!(true);
    body["schedule"] = json!("rate(1 day)");
    let source = new_source(&stack, &user, &kb, body).await;
    // The tenant's bucket notifies the deployment's queue, as the source's page tells them.
    let queue = stack.sqs.get_queue_url().queue_name("sluice-parse").send().await.expect("queue");
    let arn = sluice_local::resources::queue_arn(&stack.sqs, queue.queue_url().expect("url")).await.expect("arn");
    sluice_local::resources::ensure_upload_notifications(&stack.s3, &bucket, &arn, &["inbox/"]).await.expect("notify");
    // Another tenant's event-driven source on the same bucket, whose credential is gone: the
    // event becomes one job per source, and that source's failure is its own.
    let (other, other_kb) = editor_and_base(&stack, &stub).await;
    let other_secret = key_pair(&stack, &other).await;
    let mut broken = s3_source(&bucket, "inbox/", &other_secret);
    broken["event_driven"] = json!(true);
    new_source(&stack, &other, &other_kb, broken).await;
    let (status, _) = stack.call(&other, Method::DELETE, &format!("/secrets/{other_secret}"), None).await;
    assert!(status < 300, "the other tenant's credential deleted: {status}");

    put(&stack, &bucket, "inbox/memo.md", "A memo that arrived by event.").await;
    put(&stack, &bucket, "outbox/other.md", "Not under the prefix.").await;
    eventually("the event's document is indexed", Duration::from_secs(60), async || {
        documents(&stack, &user, &kb).await.iter().any(|(p, _, s)| p.ends_with("/inbox/memo.md") && s == "done")
    })
    .await;
    remove(&stack, &bucket, "inbox/memo.md").await;
    eventually("the removal event removes it", Duration::from_secs(60), async || {
        documents(&stack, &user, &kb).await.is_empty()
    })
    .await;

    // A due schedule: the stack's sweep starts one run, and moves the next time on.
    put(&stack, &bucket, "inbox/late.md", "A memo listed by the scheduled run.").await;
    stack
        .db()
        .await
        .execute(
            "UPDATE sync_sources SET next_run_at = now() - interval '1 minute' WHERE id = $1::text::uuid",
            &[&source],
        )
        .await
        .expect("make it due");
    eventually("the scheduled run finishes", Duration::from_secs(60), async || {
        let (_, logs) =
            stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}/logs"), None).await;
        logs["logs"].as_array().is_some_and(|l| l.iter().any(|r| r["trigger"] == "schedule" && r["status"] == "done"))
    })
    .await;
    let (_, logs) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}/logs"), None).await;
    assert_eq!(logs["total"], 1, "one run for one due time: {logs}");
    let (_, shown) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}"), None).await;
    let next = time::OffsetDateTime::parse(
        shown["next_run_at"].as_str().expect("next"),
        &time::format_description::well_known::Rfc3339,
    )
    .expect("time");
    assert!(next > time::OffsetDateTime::now_utc() + time::Duration::hours(23), "{shown}");
}

#[tokio::test]
async fn an_assumed_role_carries_the_source_s_own_external_id() {
    let stack = Stack::from_env().await;
    let (sts, seen) = sluice_e2e::recording_sts(&stack.sdk);
    let remote = sluice_sources::Remote::with_sts(&stack.sdk, sts);
    let bucket = source_bucket(&stack).await;
    put(&stack, &bucket, "x/a.md", "listed through the assumed role").await;
    let (org, user) = (Uuid::new_v4(), Uuid::new_v4());
    let now = time::OffsetDateTime::now_utc();
    let source = sluice_store::SyncSource {
        id: Uuid::new_v4(),
        kb_id: Some(Uuid::new_v4()),
        collection_name: "c".into(),
        org_id: Some(org),
        created_by: user,
        name: "by role".into(),
        location: sluice_domain::sync::S3Location { bucket: bucket.clone(), prefix: "x/".into(), region: None },
        role_arn: Some("arn:aws:iam::123456789012:role/tenant-reader".into()),
        external_id: Some(sluice_domain::sync::new_external_id()),
        secret_id: None,
        sync_mode: sluice_domain::sync::SyncMode::NewOnly,
        schedule: None,
        next_run_at: None,
        event_driven: false,
        organizational_unit: None,
        max_removal_percent: 50,
        created_at: now,
        updated_at: now,
        detached_at: None,
    };
    let db = stack.store(1).await;
    let vault = sluice_vault::Vault::new(stack.kms.clone(), stack.kms_key_arn().await);
    let client = remote.client_for(&db, &vault, &source).await.expect("assumed");
    let page = client.list_page("x/", None, 10).await.expect("listed with the session's keys");
    assert_eq!(page.objects.len(), 1);
    // A second client for the same role and tenant reuses the live session.
    remote.client_for(&db, &vault, &source).await.expect("reused");
    let requests = seen.lock().expect("lock").clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let expected = format!("ExternalId={}", source.external_id.as_deref().expect("id"));
    assert!(requests[0].contains(&expected), "{}", requests[0]);
    assert!(
        requests[0].contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Ftenant-reader"),
        "{}",
        requests[0]
    );
    assert_eq!(client.get_requests(), 0);
    client.get("x/a.md", 1024).await.expect("fetched");
    assert_eq!(client.get_requests(), 1, "the interceptor counts each GetObject sent");
}

#[tokio::test]
async fn an_uploaded_copy_of_a_synced_file_is_adopted_rather_than_duplicated() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let text = "The travel policy: book economy for flights under six hours.";
    stack.upload_document(&user, &kb, "travel.md", text.as_bytes()).await;
    eventually("the upload is indexed", Duration::from_secs(60), async || {
        documents(&stack, &user, &kb).await.iter().any(|(_, _, s)| s == "done")
    })
    .await;
    let embedded = stub.requests();
    // The same bytes under another name: no address, no filename matches; the content hash
    // after the download finds the upload, which the source adopts.
    let bucket = source_bucket(&stack).await;
    put(&stack, &bucket, "policies/travel-policy.md", text).await;
    let secret = key_pair(&stack, &user).await;
    let source = new_source(&stack, &user, &kb, s3_source(&bucket, "policies/", &secret)).await;
    let first = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(counts(&first), [1, 0, 0, 1, 0, 0], "{first}");
    assert_eq!(first["fetched"].as_i64(), Some(1), "{first}");
    assert_eq!(stub.requests(), embedded, "nothing embedded again");
    let docs = documents(&stack, &user, &kb).await;
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(docs[0].0, format!("s3://{bucket}/policies/travel-policy.md"));
    // Adopted, it is the source's from now on: the next run skips it unread.
    let second = run(&stack, &user, &kb, &source, None).await;
    assert_eq!((second["skipped"].as_i64(), second["fetched"].as_i64()), (Some(1), Some(0)), "{second}");
}

#[tokio::test]
async fn update_only_ignores_what_is_new_and_full_re_indexes_what_it_matches() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let bucket = source_bucket(&stack).await;
    put(&stack, &bucket, "m/a.md", "The first version of a.").await;
    let secret = key_pair(&stack, &user).await;
    let source = new_source(&stack, &user, &kb, s3_source(&bucket, "m/", &secret)).await;
    assert_eq!(counts(&run(&stack, &user, &kb, &source, None).await)[1], 1);

    let path = format!("/kb/{kb}/sync-sources/{source}");
    let (status, _) = stack.call_json(&user, Method::PATCH, &path, Some(json!({"sync_mode": "update_only"}))).await;
    assert_eq!(status, 200);
    put(&stack, &bucket, "m/a.md", "The second version of a, changed.").await;
    put(&stack, &bucket, "m/b.md", "A new file update_only does not take.").await;
    let update_only = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(counts(&update_only), [2, 0, 1, 1, 0, 0], "{update_only}");
    assert_eq!(update_only["fetched"].as_i64(), Some(1), "the new file is skipped before any download: {update_only}");

    let (status, _) = stack.call_json(&user, Method::PATCH, &path, Some(json!({"sync_mode": "full"}))).await;
    assert_eq!(status, 200);
    let embedded = stub.requests();
    let full = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(counts(&full), [2, 1, 1, 0, 0, 0], "{full}");
    assert_eq!(full["fetched"].as_i64(), Some(2), "{full}");
    assert!(stub.requests() > embedded, "full re-embeds what it matches");
    assert_eq!(documents(&stack, &user, &kb).await.len(), 2);
}

/// A parse delivery for a synced document already parsed (a duplicate, or one whose turn
/// another tenant's delivery took) sends only its ingest job: the object is not downloaded
/// again, and the run's count of downloads stays what it cost.
#[tokio::test]
async fn a_parse_job_for_a_synced_document_already_parsed_downloads_nothing() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (user, kb) = editor_and_base(&stack, &stub).await;
    let bucket = source_bucket(&stack).await;
    put(&stack, &bucket, "notes/one.md", "The one note of this source.").await;
    let secret = key_pair(&stack, &user).await;
    let source = new_source(&stack, &user, &kb, s3_source(&bucket, "notes/", &secret)).await;
    let first = run(&stack, &user, &kb, &source, None).await;
    assert_eq!(first["fetched"].as_i64(), Some(1), "{first}");
    let run_id = Uuid::parse_str(first["id"].as_str().expect("id")).expect("uuid");

    // Parsed, not yet ingested: the window a late parse delivery can land in.
    let db = stack.db().await;
    let id: Uuid = db
        .query_one(
            "UPDATE rag_documents SET status = 'processing', completed_at = NULL, ingest_started_at = NULL \
             WHERE kb_id = $1::text::uuid AND sync_run_id = $2 RETURNING id",
            &[&kb, &run_id],
        )
        .await
        .expect("the synced document, counted to its run")
        .get(0);
    let job = json!({"document_id": id});
    stack.sweep_state().await.dispatcher.send(sluice_store::PARSE_DOCUMENT_TOPIC, &job).await.expect("sent");
    eventually("the document is ingested again", Duration::from_secs(60), async || {
        let row = db.query_one("SELECT status FROM rag_documents WHERE id = $1", &[&id]).await.expect("row");
        row.get::<_, String>(0) == "done"
    })
    .await;
    let fetched: i32 =
        db.query_one("SELECT fetched FROM sync_logs WHERE id = $1", &[&run_id]).await.expect("log").get(0);
    assert_eq!(fetched, 1, "downloaded again");
}

#[tokio::test]
async fn a_key_pair_source_moves_only_for_who_may_lend_its_key_pair_again() {
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let (owner, kb) = editor_and_base(&stack, &stub).await;
    let secret = key_pair(&stack, &owner).await;
    let source = new_source(&stack, &owner, &kb, s3_source("team-docs", "handbook/", &secret)).await;
    let fields_of = |answer: &Value| -> Vec<String> {
        answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
    };
    // An editor from another organization, granted edit on the base, cannot see the key pair.
    let grantee = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let grant = json!({"user_id": grantee.id, "level": "edit"});
    let (status, granted) = stack.call_json(&owner, Method::POST, &format!("/kb/{kb}/grants"), Some(grant)).await;
    assert_eq!(status, 201, "{granted}");
    let path = format!("/kb/{kb}/sync-sources/{source}");
    // Renaming needs no credential; moving it to another bucket lends the key pair again.
    let (status, renamed) = stack.call_json(&grantee, Method::PATCH, &path, Some(json!({"name": "Handbook"}))).await;
    assert_eq!(status, 200, "{renamed}");
    let moving = json!({"config": {"bucket": "payroll-exports", "prefix": ""}});
    let (status, refused) = stack.call_json(&grantee, Method::PATCH, &path, Some(moving.clone())).await;
    assert_eq!((status, fields_of(&refused)), (400, vec!["credential.secret_id".to_owned()]), "{refused}");
    let (_, kept) = stack.call_json(&owner, Method::GET, &path, None).await;
    assert_eq!(kept["config"]["bucket"], "team-docs", "{kept}");
    // Its owner may move it, and the move is audited as one.
    let (status, moved) = stack.call_json(&owner, Method::PATCH, &path, Some(moving)).await;
    assert_eq!(status, 200, "{moved}");
    let audit = stack.admin_store().await.audit_entries(Uuid::parse_str(&source).expect("id")).await.expect("audit");
    let actions: Vec<&str> = audit.iter().filter_map(|a| a["action"].as_str()).collect();
    assert_eq!(actions, ["sync_source.created", "sync_source.updated", "sync_source.moved"]);
}
