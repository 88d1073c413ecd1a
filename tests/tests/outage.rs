//! Every route with its database gone: a second front door, built as `sluice-local` builds
//! its own but over a database address where nothing answers (what a function sees when
//! its database is stopped), is driven over HTTP with real tokens. Each route that reads or
//! writes the database answers `503` in Sluice's own words — no SQL, no table, no driver
//! or network detail — and no upload leaves an object behind.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::contract::template_routes;
use sluice_e2e::{Stack, User};
use uuid::Uuid;

/// Routes that never touch the database: answered as usual.
const WITHOUT_DATABASE: &[&str] = &[
    "GET /api/v1/rag/embedding-models",
    "GET /api/v1/rag/embedding-models/openrouter",
    "GET /api/v1/rag/supported-formats",
];

/// What an answer must never carry: the words of the database, its driver or its network.
const TELLTALES: &[&str] = &[
    "select ",
    "insert ",
    "update ",
    "delete from",
    "relation",
    "postgres",
    "pgbouncer",
    "tokio",
    "deadpool",
    "connection refused",
    "error connecting",
    "db error",
    "timed out",
    "knowledge_bases",
    "rag_documents",
    "chat_files",
    "kb_grants",
    "sqlstate",
];

async fn door_without_database(stack: &Stack) -> String {
    let config = stack.config().await;
    let nothing_listens = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("address").port()
    };
    let gone = sluice_store::DbTarget { port: nothing_listens, ..stack.db_target.clone() };
    let db = sluice_store::Db::open(&gone, &stack.vector_login, 2).expect("a pool opens lazily");
    stack.door(db.clone(), sluice_search::State::new(config, db, &stack.sdk)).await
}

/// A request each route would accept with its database up.
fn request(stack: &Stack, door: &str, route: &str, user: &User, ids: &Ids) -> reqwest::RequestBuilder {
    let (method, template) = route.split_once(' ').expect("METHOD /path");
    let path = template
        .replace("{kb_id}", &ids.kb.to_string())
        .replace("{id}", &ids.file.to_string())
        .replace("{tracking_id}", &ids.file.to_string())
        .replace("{n}", "1")
        .replace("{user_id}", &ids.other.to_string())
        .replace("{source_id}", &ids.source.to_string())
        .replace("{message_id}", &ids.message.to_string())
        .replace("{name}", "outage_collection")
        .replace("{secret_id}", &ids.secret.to_string());
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let query = if route == "GET /api/v1/rag/embedding-models/openrouter" {
        "?base_url=https%3A%2F%2Fopenrouter.ai%2Fapi%2Fv1"
    } else {
        ""
    };
    let mut builder = stack.http.request(method, format!("{door}{path}{query}")).header("authorization", user.bearer());
    let text = || sluice_e2e::file_form("notes.txt", Some("text/plain"), b"the quarterly figures".to_vec());
    let body: Option<Value> = match route {
        "POST /api/v1/files/upload"
        | "POST /api/v1/kb/{kb_id}/documents"
        | "POST /api/v1/rag/collections/{name}/ingest" => {
            return builder.multipart(text());
        }
        "POST /api/v1/files/uploads" | "POST /api/v1/kb/{kb_id}/documents/uploads" => {
            Some(json!({"filename": "notes.txt", "size": 21, "mime_type": "text/plain"}))
        }
        "POST /api/v1/embedding-endpoints" => {
            Some(json!({"name": "gpu", "provider": "local", "base_url": "http://127.0.0.1:9/v1", "scope": "org"}))
        }
        "POST /api/v1/kb" => Some(json!({"name": "Outage", "scope": "personal", "embedding_provider": "local",
            "embedding_model": "all-minilm-l6-v2"})),
        "PATCH /api/v1/kb/{kb_id}" => Some(json!({"name": "Renamed"})),
        "POST /api/v1/kb/{kb_id}/grants" => Some(json!({"user_id": ids.other, "level": "view"})),
        "POST /api/v1/kb/{kb_id}/sync-sources" | "PATCH /api/v1/kb/{kb_id}/sync-sources/{source_id}" => {
            Some(json!({"name": "bucket", "bucket": "somewhere", "prefix": "docs/"}))
        }
        "POST /api/v1/messages/{message_id}/attachments" => Some(json!({"file_ids": [ids.file]})),
        "POST /api/v1/rag/search" => Some(json!({"query": "figures", "collections": ["outage_collection"]})),
        "POST /api/v1/secrets" => Some(json!({"name": "k", "kind": "api_key", "provider": "openai",
            "value": "sk-outage", "visibility": "private"})),
        _ => None,
    };
    if let Some(body) = body {
        builder = builder.json(&body);
    }
    builder
}

struct Ids {
    kb: Uuid,
    file: Uuid,
    other: Uuid,
    source: Uuid,
    message: Uuid,
    secret: Uuid,
}

#[tokio::test]
async fn with_the_database_gone_every_route_answers_503_in_its_own_words_and_leaves_nothing() {
    let stack = Stack::from_env().await;
    let door = door_without_database(&stack).await;
    let user = User::with(
        Some(Uuid::new_v4()),
        &["collections:edit", "secrets:edit", "secrets:view", "collections:view"],
        false,
    );
    let ids = Ids {
        kb: Uuid::new_v4(),
        file: Uuid::new_v4(),
        other: Uuid::new_v4(),
        source: Uuid::new_v4(),
        message: Uuid::new_v4(),
        secret: Uuid::new_v4(),
    };
    let routes = template_routes();
    assert!(routes.len() >= 40, "the template's routes: {routes:?}");
    let mut failures = Vec::new();
    for route in &routes {
        let answer = request(&stack, &door, route, &user, &ids).send().await.expect("the door answers");
        let status = answer.status().as_u16();
        let text = answer.text().await.expect("body");
        let lower = text.to_lowercase();
        if let Some(telltale) = TELLTALES.iter().find(|t| lower.contains(*t)) {
            failures.push(format!("{route}: {status} told {telltale:?}: {text}"));
        }
        if WITHOUT_DATABASE.contains(&route.as_str()) {
            if status != 200 {
                failures.push(format!("{route}: needs no database, answered {status}: {text}"));
            }
            continue;
        }
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status != 503 || body["error"]["code"] != "unavailable" {
            failures.push(format!("{route}: {status} {text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // Nothing of the chat upload stays in the bucket.
    let left = stack
        .s3
        .list_objects_v2()
        .bucket(&stack.bucket)
        .prefix(format!("media/{}/", user.id))
        .send()
        .await
        .expect("listing");
    assert_eq!(left.key_count().unwrap_or_default(), 0, "an unrecorded object stayed: {left:?}");
}
