//! The database as the functions reach it: TLS required and verified, logins from Secrets
//! Manager, the deploy's migrate step (idempotent, least privilege) and a function's refusal
//! of a schema older than its code.

use sluice_e2e::Stack;
use sluice_store::{Db, DbTarget, Login, SCHEMA_VERSION, StoreError, TrustRoots};
use uuid::Uuid;

/// Every message of an error's source chain, so a test can say which layer refused.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn a_plain_text_connection_is_refused() {
    let stack = Stack::from_env().await;
    let mut config = sluice_store::client_config(&stack.db_target, &stack.app_login);
    config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    let Err(refused) = config.connect(tokio_postgres::NoTls).await else {
        panic!("plain text must be refused");
    };
    let text = chain(&refused);
    assert!(text.contains("SSL required") || text.contains("TLS"), "{text}");
}

#[tokio::test]
async fn a_certificate_from_another_authority_is_refused() {
    let stack = Stack::from_env().await;
    // An authority of our own making, which never signed the server's certificate.
    let dir = std::env::temp_dir().join(format!("sluice-other-ca-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
        .args(["-days", "1", "-subj", "/CN=Not the stack's CA", "-addext", "basicConstraints=critical,CA:TRUE"])
        .arg("-keyout")
        .arg(dir.join("other.key"))
        .arg("-out")
        .arg(dir.join("other.pem"))
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));

    for roots in [TrustRoots::Bundle(dir.join("other.pem")), TrustRoots::Public] {
        let target = DbTarget { roots: roots.clone(), ..stack.db_target.clone() };
        let refused = sluice_store::connect_once(&target, &stack.app_login).await.expect_err("unknown issuer");
        let text = chain(&refused);
        assert!(text.contains("certificate"), "{roots:?}: {text}");
    }
    // The stack's own authority is accepted, by name (the certificate names localhost too).
    let by_name = DbTarget { host: "localhost".to_owned(), ..stack.db_target.clone() };
    let client = sluice_store::connect_once(&by_name, &stack.app_login).await.expect("the stack's CA");
    let one: i32 = client.query_one("SELECT 1", &[]).await.expect("query").get(0);
    assert_eq!(one, 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_wrong_password_is_refused() {
    let stack = Stack::from_env().await;
    let wrong = Login { username: stack.app_login.username.clone(), password: "not-the-password".to_owned() };
    let refused = sluice_store::connect_once(&stack.db_target, &wrong).await.expect_err("wrong password");
    assert!(chain(&refused).contains("authentication failed"), "{}", chain(&refused));
}

#[tokio::test]
async fn a_connection_that_died_in_the_pool_is_replaced_before_use() {
    let stack = Stack::from_env().await;
    let db = stack.store(1).await;
    let first = db.backend_pid().await.expect("pid");
    let admin = stack.db().await;
    let ended: bool = admin.query_one("SELECT pg_terminate_backend($1)", &[&first]).await.expect("terminate").get(0);
    assert!(ended);
    // The pooled connection is dead; the next use must get a live one, not an error.
    let mut second = None;
    for _ in 0..50 {
        let pid = db.backend_pid().await.expect("a live connection after the old one died");
        if pid != first {
            second = Some(pid);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(second.is_some(), "the dead connection was handed out again");
}

/// A database of its own on the stack's server, migrated by the deploy step.
async fn fresh_database(stack: &Stack) -> DbTarget {
    let name = format!("migrate_{}", &Uuid::new_v4().simple().to_string()[..12]);
    stack.db().await.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create database");
    DbTarget { dbname: name, ..stack.db_target.clone() }
}

#[tokio::test]
async fn the_migrate_step_is_idempotent_and_leaves_the_app_login_least_privileged() {
    let stack = Stack::from_env().await;
    let target = fresh_database(&stack).await;
    let admin = Db::open(&target, &stack.admin_login, 1).expect("pool");

    let app = Db::open(&target, &stack.app_login, 1).expect("pool");
    match app.require_current_schema().await {
        Err(StoreError::SchemaBehind { found: 0, needed }) => assert_eq!(needed, SCHEMA_VERSION),
        other => panic!("an unmigrated database must be refused, got {other:?}"),
    }

    let logins = (&stack.app_login, &stack.vector_login, &stack.search_login);
    let first = admin.migrate_deploy(logins.0, logins.1, logins.2).await.expect("first run");
    assert_eq!(first.applied, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    let second = admin.migrate_deploy(logins.0, logins.1, logins.2).await.expect("second run");
    assert!(second.applied.is_empty(), "{second:?}");
    assert_eq!(second.schema_version, SCHEMA_VERSION);
    app.require_current_schema().await.expect("current after the step");

    // The application login: rows yes, schema no.
    let client = sluice_store::connect_once(&target, &stack.app_login).await.expect("app login");
    let code = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_owned()).unwrap_or_default();
    let insufficient = "42501";
    client
        .execute("INSERT INTO sweep_cursors (prefix, start_after) VALUES ('x/', 'x/a')", &[])
        .await
        .expect("the app writes rows");
    for statement in [
        "DROP TABLE chat_files",
        "ALTER TABLE chat_files ADD COLUMN sneaky text",
        "CREATE TABLE rag_sneaky (id int)",
        "TRUNCATE chat_files",
        "INSERT INTO sluice_migrations (version, name) VALUES (999, 'forged')",
        "DELETE FROM sluice_migrations",
        "CREATE SCHEMA sneaky",
    ] {
        let refused = client.batch_execute(statement).await.expect_err(statement);
        assert_eq!(code(refused), insufficient, "{statement}");
    }
    // Vector tables only through the owner's functions, only by the vector login (ingest,
    // knowledge, teardown), and only tables marked as such.
    for call in ["SELECT sluice_create_vector_table('probe', 3, 'english')", "SELECT sluice_drop_vector_table('probe')"]
    {
        let refused = client.batch_execute(call).await.expect_err("the application login makes no tables");
        assert_eq!(code(refused), insufficient, "{call}");
    }
    let client = sluice_store::connect_once(&target, &stack.vector_login).await.expect("vector login");
    for statement in ["DROP TABLE chat_files", "CREATE TABLE rag_sneaky (id int)", "DELETE FROM sluice_migrations"] {
        let refused = client.batch_execute(statement).await.expect_err(statement);
        assert_eq!(code(refused), insufficient, "{statement}");
    }
    client.execute("SELECT sluice_create_vector_table('probe', 3, 'english')", &[]).await.expect("create");
    let refused = client.batch_execute("DROP TABLE rag_probe").await.expect_err("not the owner");
    assert_eq!(code(refused), insufficient);
    client
        .execute("INSERT INTO rag_probe (id, document_id, chunk_index, content, embedding) VALUES ($1, $1, 0, 'x', '[1,2,3]')", &[&Uuid::new_v4()])
        .await
        .expect("the app writes chunks");
    // The application login (upload, parse, sweep) reads and removes chunks, never writes
    // one, on a table made before its grants and on one made after.
    let app = sluice_store::connect_once(&target, &stack.app_login).await.expect("app login");
    client.execute("SELECT sluice_create_vector_table('later', 3, 'simple')", &[]).await.expect("a table made later");
    for table in ["rag_probe", "rag_later"] {
        let insert = format!(
            "INSERT INTO {table} (id, document_id, chunk_index, content, embedding) VALUES (gen_random_uuid(), gen_random_uuid(), 0, 'x', '[1,2,3]')"
        );
        assert_eq!(code(app.batch_execute(&insert).await.expect_err("no chunk written")), insufficient, "{table}");
        let update = format!("UPDATE {table} SET content = 'forged'");
        assert_eq!(code(app.batch_execute(&update).await.expect_err("no chunk changed")), insufficient, "{table}");
        app.batch_execute(&format!("DELETE FROM {table} WHERE document_id = gen_random_uuid()")).await.expect("delete");
        app.batch_execute(&format!("SELECT count(*) FROM {table}")).await.expect("read");
    }
    // The search login reads and never writes: every table search reads, vector tables made
    // before its grants and after; nothing else, and no table made, changed or dropped.
    let search = sluice_store::connect_once(&target, &stack.search_login).await.expect("search login");
    for table in ["rag_probe", "rag_later", "knowledge_bases", "kb_grants", "secrets", "embedding_endpoints"] {
        search.batch_execute(&format!("SELECT count(*) FROM {table}")).await.expect("search reads it");
        for statement in
            [format!("DELETE FROM {table}"), format!("INSERT INTO {table} DEFAULT VALUES"), format!("TRUNCATE {table}")]
        {
            assert_eq!(code(search.batch_execute(&statement).await.expect_err("refused")), insufficient, "{statement}");
        }
    }
    for statement in [
        "SELECT count(*) FROM chat_files",
        "SELECT count(*) FROM sweep_cursors",
        "SELECT count(*) FROM audit_log",
        "SELECT sluice_create_vector_table('mine', 3, 'simple')",
        "SELECT sluice_drop_vector_table('later')",
        "CREATE TABLE rag_search_own (id int)",
    ] {
        assert_eq!(code(search.batch_execute(statement).await.expect_err(statement)), insufficient, "{statement}");
    }
    client.execute("SELECT sluice_drop_vector_table('later')", &[]).await.expect("drop");
    // No login plans with a page cost of its own: one set on the search login by an earlier
    // migrate step (1.1) is reset by this one.
    let page_cost = |row: tokio_postgres::Row| row.get::<_, String>(0);
    let show = "SHOW random_page_cost";
    assert_eq!(page_cost(search.query_one(show, &[]).await.expect(show)), "4");
    assert_eq!(page_cost(app.query_one(show, &[]).await.expect(show)), "4");
    // The vault, the registered services and the grants: read by the application login,
    // changed only by the knowledge function's.
    for table in ["secrets", "embedding_endpoints", "kb_grants"] {
        app.batch_execute(&format!("SELECT count(*) FROM {table}")).await.expect("read");
        for statement in
            [format!("DELETE FROM {table}"), format!("INSERT INTO {table} DEFAULT VALUES"), format!("TRUNCATE {table}")]
        {
            assert_eq!(code(app.batch_execute(&statement).await.expect_err("refused")), insufficient, "{statement}");
        }
        client.batch_execute(&format!("DELETE FROM {table} WHERE false")).await.expect("the vector login writes it");
    }
    // Chat attachments and the sweep's cursors are the application login's alone.
    for statement in ["SELECT count(*) FROM chat_files", "SELECT count(*) FROM sweep_cursors"] {
        assert_eq!(code(client.batch_execute(statement).await.expect_err(statement)), insufficient, "{statement}");
        app.batch_execute(statement).await.expect("the application login reads it");
    }
    // The audit log takes inserts only, and only from the functions that record decisions
    // (knowledge, with the vector login): no login reads, changes or removes what it recorded.
    let insert = "INSERT INTO audit_log DEFAULT VALUES";
    assert_eq!(code(app.batch_execute(insert).await.expect_err(insert)), insufficient);
    for login in [&app, &client] {
        for statement in [
            "SELECT * FROM audit_log",
            "UPDATE audit_log SET action = 'x'",
            "DELETE FROM audit_log",
            "TRUNCATE audit_log",
        ] {
            assert_eq!(code(login.batch_execute(statement).await.expect_err(statement)), insufficient, "{statement}");
        }
    }
    client.execute("SELECT sluice_drop_vector_table('probe')", &[]).await.expect("drop");
    let refused = client.execute("SELECT sluice_drop_vector_table('x; DROP TABLE chat_files')", &[]).await;
    assert!(refused.is_err(), "a name that is not one is refused");
    admin_client(&stack, &target).await.batch_execute("CREATE TABLE rag_plain (id int)").await.expect("plain table");
    let refused = client.execute("SELECT sluice_drop_vector_table('plain')", &[]).await;
    assert!(refused.is_err(), "an unmarked table is not dropped");

    // A schema older than the code: every function refuses to start, saying what to run.
    admin_client(&stack, &target)
        .await
        .execute("DELETE FROM sluice_migrations WHERE version = $1", &[&SCHEMA_VERSION])
        .await
        .expect("roll the ledger back");
    let refused = Db::open(&target, &stack.app_login, 1).expect("pool").require_current_schema().await;
    match refused {
        Err(error @ StoreError::SchemaBehind { .. }) => {
            assert!(error.to_string().contains("sluice migrate"), "{error}");
        }
        other => panic!("an older schema must be refused, got {other:?}"),
    }
    // The teardown function's own binary, started as Lambda starts it, stops at init.
    let binary = std::env::current_exe()
        .expect("test binary")
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("sluice-teardown"));
    let binary = binary.filter(|b| b.exists()).expect("target/debug/sluice-teardown: `infra/local/test` builds it");
    let started = std::process::Command::new(binary)
        .env("SLUICE_DB_NAME", &target.dbname)
        .env("SLUICE_KMS_KEY_ID", "arn:aws:kms:us-east-1:000000000000:key/unused")
        .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
        .output()
        .expect("start the function");
    let stderr = format!("{}{}", String::from_utf8_lossy(&started.stdout), String::from_utf8_lossy(&started.stderr));
    assert!(!started.status.success(), "the function must not start: {stderr}");
    assert!(
        stderr.contains(&format!(
            "the database schema is at migration {} and this build needs {}",
            SCHEMA_VERSION - 1,
            SCHEMA_VERSION
        )),
        "{stderr}"
    );
    drop(client);
    drop(app);
    drop(admin);
}

async fn admin_client(stack: &Stack, target: &DbTarget) -> tokio_postgres::Client {
    sluice_store::connect_once(target, &stack.admin_login).await.expect("admin")
}

/// A custom-resource event as CloudFormation sends it, answered at `url`.
fn custom_resource_event(kind: &str, url: &str) -> sluice_migrate::Request {
    serde_json::from_value(serde_json::json!({
        "RequestType": kind,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:migrate",
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/sluice/1",
        "RequestId": Uuid::new_v4().to_string(),
        "ResourceType": "Custom::SchemaMigration",
        "LogicalResourceId": "SchemaMigration",
        "PhysicalResourceId": sluice_migrate::PHYSICAL_ID,
        "ResourceProperties": {"ServiceToken": "arn", "FunctionVersion": "7"},
        "OldResourceProperties": {"ServiceToken": "arn", "FunctionVersion": "6"}
    }))
    .expect("a custom-resource event")
}

const MIGRATION_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

#[tokio::test]
async fn a_migration_that_never_finishes_and_an_answer_never_taken_end_in_time() {
    use aws_lambda_events::event::cloudformation::CloudFormationCustomResourceResponseStatus as Status;
    // A database that never answers (a black-holed route): the step answers FAILED with
    // advice when its budget runs out, rather than leaving CloudFormation waiting.
    let started = std::time::Instant::now();
    let never = std::future::pending::<Result<sluice_store::MigrationReport, sluice_store::StoreError>>();
    let (_, response) = sluice_migrate::handle_with(
        custom_resource_event("Create", "http://127.0.0.1:9/r"),
        std::time::Duration::from_secs(1),
        never,
    )
    .await;
    assert_eq!(response.status, Status::Failed);
    let reason = response.reason.expect("a reason");
    assert!(reason.starts_with("migrate: Timeout: ") && reason.contains("route tables"), "{reason}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // A response URL that accepts the connection and never answers: the answer gives up.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let url = format!("http://{}/response", listener.local_addr().expect("addr"));
    let held = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("accept");
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        drop(socket);
    });
    let started = std::time::Instant::now();
    let outcome = sluice_migrate::respond(&url, &response_for_test(), std::time::Duration::from_secs(1)).await;
    assert!(outcome.is_err(), "an answer nobody takes is an error");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    held.abort();
}

fn response_for_test() -> aws_lambda_events::event::cloudformation::CloudFormationCustomResourceResponse {
    let mut response = aws_lambda_events::event::cloudformation::CloudFormationCustomResourceResponse::default();
    response.physical_resource_id = sluice_migrate::PHYSICAL_ID.to_owned();
    response
}

#[tokio::test]
async fn the_migrate_function_answers_cloudformation() {
    use aws_lambda_events::event::cloudformation::CloudFormationCustomResourceResponseStatus as Status;
    let stack = Stack::from_env().await;
    // A listener standing in for CloudFormation's presigned response URL.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let url = format!("http://{}/response?signed=1", listener.local_addr().expect("addr"));
    let received = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = socket.read(&mut buffer).await.expect("read");
            request.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&request);
            if let Some(split) = text.find("\r\n\r\n") {
                let length = text[..split]
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= split + 4 + length || n == 0 {
                    socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.expect("answer");
                    return String::from_utf8_lossy(&request).into_owned();
                }
            }
        }
    });

    for kind in ["Create", "Update"] {
        let (answer_url, response) =
            sluice_migrate::handle(&stack.sdk, custom_resource_event(kind, &url), None, MIGRATION_LIMIT).await;
        assert_eq!(answer_url, url);
        assert_eq!(response.status, Status::Success, "{kind}: {:?}", response.reason);
        assert_eq!(response.physical_resource_id, sluice_migrate::PHYSICAL_ID);
        assert_eq!(response.data.get("SchemaVersion"), Some(&SCHEMA_VERSION.to_string()));
        assert_eq!(response.data.get("AppLogin"), Some(&stack.app_login.username));
        assert_eq!(response.data.get("VectorLogin"), Some(&stack.vector_login.username));
    }
    let (_, deleted) =
        sluice_migrate::handle(&stack.sdk, custom_resource_event("Delete", &url), None, MIGRATION_LIMIT).await;
    assert_eq!(deleted.status, Status::Success);
    assert!(deleted.data.is_empty(), "a delete migrates nothing");

    sluice_migrate::respond(&url, &deleted, sluice_migrate::ANSWER_TIMEOUT).await.expect("answered");
    let request = received.await.expect("the answer arrived");
    assert!(request.starts_with("PUT /response?signed=1 "), "{request}");
    let body = &request[request.find("\r\n\r\n").expect("body") + 4..];
    let body: serde_json::Value = serde_json::from_str(body).expect("JSON answer");
    assert_eq!(body["Status"], "SUCCESS");
    assert_eq!(body["PhysicalResourceId"], sluice_migrate::PHYSICAL_ID);
    assert_eq!(body["LogicalResourceId"], "SchemaMigration");
}

#[tokio::test]
async fn an_upgrade_to_keyword_search_never_rewrites_a_collection_and_fills_it_online() {
    let stack = Stack::from_env().await;
    let target = fresh_database(&stack).await;
    let admin = Db::open(&target, &stack.admin_login, 2).expect("pool");
    // The schema of the release before keyword search: a collection with chunks.
    assert_eq!(admin.migrate_schema_to(16).await.expect("schema 16"), (1..=16).collect::<Vec<_>>());
    let client = admin_client(&stack, &target).await;
    client.execute("SELECT sluice_create_vector_table('old', 3)", &[]).await.expect("a schema-16 table");
    let kb = Uuid::new_v4();
    let insert = "INSERT INTO rag_old (id, kb_id, document_id, chunk_index, content, embedding) \
                  VALUES (gen_random_uuid(), $1, gen_random_uuid(), 0, $2, '[1,0,0]')";
    for text in ["pump seal kit", "pump pump valve"] {
        client.execute(insert, &[&kb, &text]).await.expect("chunk");
    }
    // Enough rows for the backfill to take several batches.
    client
        .execute(
            "INSERT INTO rag_old (id, kb_id, document_id, chunk_index, content, embedding) \
             SELECT gen_random_uuid(), $1, gen_random_uuid(), n, 'filler ' || n, '[0,1,0]' \
             FROM generate_series(1, 4500) AS n",
            &[&Uuid::new_v4()],
        )
        .await
        .expect("filler");
    let file_of = async || -> u32 {
        client.query_one("SELECT pg_relation_filenode('rag_old')::oid", &[]).await.expect("filenode").get(0)
    };
    let before = file_of().await;

    // The migrations change the catalog only: the table is the same file (never rewritten).
    admin.migrate_schema_to(SCHEMA_VERSION).await.expect("upgrade");
    assert_eq!(file_of().await, before, "the upgrade rewrote the table");
    let counted = |lexeme: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(
                    "SELECT coalesce(sum(chunks), 0)::int8, coalesce(sum(occurrences), 0)::int8 FROM \"rag_old$terms\" \
                     WHERE kb_id = $1 AND lexeme = $2",
                    &[&kb, &lexeme],
                )
                .await
                .expect("statistics");
            (row.get::<_, i64>(0), row.get::<_, i64>(1))
        }
    };
    // Until the online phase reaches them, old rows count nowhere; a new row at once, with
    // its context.
    assert_eq!(counted("").await, (0, 0));
    client
        .execute(
            "INSERT INTO rag_old (id, kb_id, document_id, chunk_index, content, context, embedding) \
             VALUES (gen_random_uuid(), $1, gen_random_uuid(), 0, 'gasket', 'Centrifugal manual', '[1,0,0]')",
            &[&kb],
        )
        .await
        .expect("a chunk with context");
    assert_eq!(counted("centrifug").await, (1, 1));
    assert_eq!(counted("").await, (1, 3));

    // Out of time at once: nothing done, the table still pending.
    let stopped = admin.finish_online_upgrades(Some(std::time::Instant::now())).await.expect("online");
    assert_eq!((stopped.rows_filled, stopped.pending.clone()), (0, vec!["rag_old".to_owned()]));
    // While another run holds the work, a second run leaves it to it.
    let holder = admin_client(&stack, &target).await;
    let online_lock = 0x0005_11CF_i64;
    holder.execute("SELECT pg_advisory_lock($1)", &[&online_lock]).await.expect("hold the online lock");
    let taken = admin.finish_online_upgrades(None).await.expect("online");
    assert_eq!((taken.rows_filled, taken.pending), (0, vec!["rag_old".to_owned()]));
    holder.execute("SELECT pg_advisory_unlock($1)", &[&online_lock]).await.expect("let it go");
    // With less time left than an index build is started with, none is started: the table
    // stays pending, with no index (nor an invalid one) left behind.
    let short = admin.finish_online_upgrades(Some(std::time::Instant::now() + std::time::Duration::from_secs(4))).await;
    let short = short.expect("online");
    assert_eq!(short.pending, vec!["rag_old".to_owned()]);
    let indexed: i64 = client
        .query_one("SELECT count(*) FROM pg_class WHERE relname = 'rag_old$text'", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(indexed, 0, "an index build was started without the time to finish it");

    let online = admin.finish_online_upgrades(None).await.expect("online");
    assert_eq!(short.rows_filled + online.rows_filled, 4502, "every old row, once");
    assert_eq!(online.tables_finished, ["rag_old"]);
    assert_eq!(file_of().await, before, "filled in place, never rewritten");
    assert_eq!(counted("").await, (3, 9), "the base's totals: three chunks, nine words");
    assert_eq!(counted("pump").await, (2, 3));
    let unfilled: i64 = client
        .query_one("SELECT count(*) FROM rag_old WHERE search_vector IS NULL OR search_length IS NULL", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(unfilled, 0);
    let valid: bool = client
        .query_one(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'rag_old$text'",
            &[],
        )
        .await
        .expect("the GIN index")
        .get(0);
    assert!(valid);
    assert_eq!(admin.finish_online_upgrades(None).await.expect("again"), sluice_store::OnlineUpgrades::default());
    // An update keeps the columns (the row trigger), and the statistics with them.
    client.execute("UPDATE rag_old SET content = 'valve' WHERE content = 'pump seal kit'", &[]).await.expect("update");
    assert_eq!(counted("pump").await, (1, 2));
    assert_eq!(counted("").await, (3, 7));
    let language: String = client
        .query_one(
            "SELECT col_description('rag_old'::regclass, attnum) FROM pg_attribute \
                    WHERE attrelid = 'rag_old'::regclass AND attname = 'search_vector'",
            &[],
        )
        .await
        .expect("comment")
        .get(0);
    assert_eq!(language, "english");
}

#[tokio::test]
async fn the_migrate_step_waits_for_a_database_still_coming_up_and_gives_up_after_its_patience() {
    let stack = Stack::from_env().await;
    // A port nothing listens on yet; in three seconds, a relay from it to the database.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let target = DbTarget { port, ..stack.db_target.clone() };
    let upstream = format!("{}:{}", stack.db_target.host, stack.db_target.port);
    let relay = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("the relay's port");
        loop {
            let (mut inbound, _) = listener.accept().await.expect("accept");
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let db = Db::open(&target, &stack.admin_login, 1).expect("pool");
    let started = std::time::Instant::now();
    db.wait_until_reachable(std::time::Duration::from_secs(60)).await.expect("reached once it came up");
    assert!(started.elapsed() >= std::time::Duration::from_secs(3), "{:?}", started.elapsed());
    relay.abort();
    // Nothing ever listening: it gives up once its patience is spent.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let db = Db::open(&DbTarget { port: gone, ..stack.db_target.clone() }, &stack.admin_login, 1).expect("pool");
    let started = std::time::Instant::now();
    assert!(db.wait_until_reachable(std::time::Duration::from_secs(6)).await.is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "{:?}", started.elapsed());
}

#[tokio::test]
async fn bases_that_existed_keep_the_chunk_size_they_had_when_the_models_default_rose() {
    let stack = Stack::from_env().await;
    let target = fresh_database(&stack).await;
    let admin = Db::open(&target, &stack.admin_login, 1).expect("pool");
    let logins = (&stack.app_login, &stack.vector_login, &stack.search_login);
    admin.migrate_deploy(logins.0, logins.1, logins.2).await.expect("migrated");
    let client = sluice_store::connect_once(&target, &stack.admin_login).await.expect("admin login");
    let bases = [
        ("all-minilm-l6-v2", None),
        ("all-minilm-l6-v2", Some(serde_json::json!({"chunk_size": 400}))),
        ("all-minilm-l6-v2", Some(serde_json::json!({"chunk_overlap": 0, "output_format": "text"}))),
        ("text-embedding-3-small", None),
    ];
    let mut ids = Vec::new();
    for (model, config) in &bases {
        let id = Uuid::new_v4();
        client
            .execute(
                "INSERT INTO knowledge_bases (id, name, scope, owner_id, collection_name, embedding_provider, \
                 embedding_model, embedding_dim, ingestion_config) VALUES ($1, 'b', 'personal', $1, 'c', 'p', $2, 384, $3)",
                &[&id, model, config],
            )
            .await
            .expect("a base as it was");
        ids.push(id);
    }
    // The migration's statement again, on bases as they were before it.
    client
        .batch_execute(include_str!("../../shared/store/migrations/0027_minilm_chunk_size.sql"))
        .await
        .expect("applied");
    let mut configs = Vec::new();
    for id in &ids {
        let row =
            client.query_one("SELECT ingestion_config FROM knowledge_bases WHERE id = $1", &[id]).await.expect("row");
        configs.push(row.get::<_, Option<serde_json::Value>>(0));
    }
    assert_eq!(
        configs,
        [
            Some(serde_json::json!({"chunk_size": 750, "chunk_overlap": 150})),
            Some(serde_json::json!({"chunk_size": 400})),
            Some(serde_json::json!({"chunk_size": 750, "chunk_overlap": 0, "output_format": "text"})),
            None,
        ]
    );
}

#[tokio::test]
async fn a_chunk_row_keeps_its_vector_and_words_on_its_page() {
    let stack = Stack::from_env().await;
    let target = fresh_database(&stack).await;
    let admin = Db::open(&target, &stack.admin_login, 1).expect("pool");
    let client = admin_client(&stack, &target).await;
    // A chunk as the keyless model's bases hold them: 1,000 characters, 384 dimensions.
    let content: String = (0..140).map(|n| format!("word{n} ")).collect();
    let insert = |table: &str| {
        format!(
            "INSERT INTO {table} (id, document_id, chunk_index, content, embedding) \
             VALUES (gen_random_uuid(), gen_random_uuid(), 0, $1, array_fill(0.25::real, ARRAY[384])::vector)"
        )
    };
    let toasted = async |table: &str| -> i64 {
        client
            .query_one("SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = $1::text::regclass", &[&table])
            .await
            .expect("sizes")
            .get(0)
    };
    // Before migration 28 such a row's vector and words went to the TOAST relation.
    admin.migrate_schema_to(27).await.expect("schema 27");
    client.execute("SELECT sluice_create_vector_table('before', 384, 'english')", &[]).await.expect("table");
    client.execute(&insert("rag_before"), &[&content]).await.expect("chunk");
    assert!(toasted("rag_before").await > 0, "the layout this migration changes");

    admin.migrate_schema_to(SCHEMA_VERSION).await.expect("upgrade");
    client.execute("SELECT sluice_create_vector_table('after', 384, 'english')", &[]).await.expect("table");
    client.execute(&insert("rag_after"), &[&content]).await.expect("chunk");
    assert_eq!(toasted("rag_after").await, 0, "a chunk row fits its page whole");
    // The table made before gets the same settings for the rows written to it from now on.
    for table in ["rag_before", "rag_after"] {
        let row = client
            .query_one(
                "SELECT c.reloptions, array_agg(a.attstorage::text ORDER BY a.attname) FROM pg_class c \
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname IN ('embedding', 'search_vector') \
                 WHERE c.oid = $1::text::regclass GROUP BY c.reloptions",
                &[&table],
            )
            .await
            .expect("settings");
        assert_eq!(row.get::<_, Vec<String>>(0), ["toast_tuple_target=8160"], "{table}");
        assert_eq!(row.get::<_, Vec<String>>(1), ["m", "m"], "{table}");
    }
    // A row too long for a page still goes in, its text moved out first; it reads back whole.
    let long: String = (0..5_000).map(|n| format!("word{n} ")).collect();
    client.execute(&insert("rag_after"), &[&long]).await.expect("a long chunk");
    let read: String = client
        .query_one("SELECT content FROM rag_after ORDER BY length(content) DESC LIMIT 1", &[])
        .await
        .expect("read")
        .get(0);
    assert_eq!(read, long);
    assert!(toasted("rag_after").await > 0, "the long text went to TOAST");
}

#[tokio::test]
async fn a_new_vector_table_s_graph_is_the_denser_one_and_an_old_one_keeps_its_own() {
    let stack = Stack::from_env().await;
    let target = fresh_database(&stack).await;
    let admin = Db::open(&target, &stack.admin_login, 1).expect("pool");
    let client = admin_client(&stack, &target).await;
    let graph = async |table: &str| -> Option<Vec<String>> {
        client
            .query_one(
                "SELECT reloptions FROM pg_class WHERE oid = $1::text::regclass",
                &[&format!("{table}$embedding")],
            )
            .await
            .expect("options")
            .get(0)
    };
    admin.migrate_schema_to(28).await.expect("schema 28");
    client.execute("SELECT sluice_create_vector_table('before', 384, 'english')", &[]).await.expect("table");
    assert_eq!(graph("rag_before").await, None, "pgvector's defaults before migration 29");

    admin.migrate_schema_to(SCHEMA_VERSION).await.expect("upgrade");
    assert_eq!(graph("rag_before").await, None, "an existing graph is not rebuilt by the upgrade");
    // The rebuild docs/deploying.md gives an older collection, each statement on its own.
    client
        .batch_execute("ALTER INDEX \"rag_before$embedding\" SET (m = 32, ef_construction = 64)")
        .await
        .expect("options");
    client.batch_execute("REINDEX INDEX CONCURRENTLY \"rag_before$embedding\"").await.expect("rebuilt");
    assert_eq!(graph("rag_before").await.expect("options"), ["m=32", "ef_construction=64"]);
    let valid: bool = client
        .query_one("SELECT indisvalid FROM pg_index WHERE indexrelid = '\"rag_before$embedding\"'::regclass", &[])
        .await
        .expect("index")
        .get(0);
    assert!(valid, "the rebuilt index serves searches");
    for (name, dim) in [("after", 384), ("wide", 3072)] {
        client
            .execute(&format!("SELECT sluice_create_vector_table('{name}', {dim}, 'english')"), &[])
            .await
            .expect("table");
        let table = format!("rag_{name}");
        assert_eq!(graph(&table).await.expect("options"), ["m=32", "ef_construction=64"], "{table}");
        // The rows still go in and are found through the index, with the table still settled as before.
        client
            .execute(
                &format!(
                    "INSERT INTO {table} (id, document_id, chunk_index, content, embedding) \
                     VALUES (gen_random_uuid(), gen_random_uuid(), 0, 'a chunk', array_fill(0.25::real, ARRAY[{dim}])::vector)"
                ),
                &[],
            )
            .await
            .expect("chunk");
        let found: i64 = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT id FROM {table} ORDER BY {} LIMIT 1) AS nearest",
                    if dim > 2000 {
                        format!("embedding::halfvec({dim}) <=> array_fill(0.5::real, ARRAY[{dim}])::halfvec({dim})")
                    } else {
                        "embedding <=> array_fill(0.5::real, ARRAY[384])::vector".to_owned()
                    }
                ),
                &[],
            )
            .await
            .expect("nearest")
            .get(0);
        assert_eq!(found, 1, "{table}");
    }
}
