//! The knowledge function on the running stack: the embedding catalog over HTTP.

use serde_json::Value;
use sluice_e2e::{Stack, User};

async fn get(stack: &Stack, user: &User, path: &str) -> (u16, Value) {
    let response =
        stack.http.get(stack.url(path)).header("authorization", user.bearer()).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test]
async fn the_embedding_catalog_lists_models_with_their_width_and_provider() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, all) = get(&stack, &user, "/rag/embedding-models").await;
    assert_eq!(status, 200, "{all}");
    let models = all["models"].as_array().expect("models");
    assert!(
        models.iter().any(|m| m["provider"] == "openai" && m["model"] == "text-embedding-3-small" && m["dim"] == 1536)
    );
    let (status, local) = get(&stack, &user, "/rag/embedding-models?provider=local").await;
    assert_eq!(status, 200);
    assert_eq!(
        local["models"],
        serde_json::json!([{"provider": "local", "model": "all-minilm-l6-v2", "dim": 384, "keyless": true,
            "max_input_tokens": 256, "max_chunk_size": 1016, "default_chunk_size": 1000}])
    );
    let (status, unknown) = get(&stack, &user, "/rag/embedding-models?provider=nobody").await;
    assert_eq!(status, 400, "{unknown}");
    assert!(unknown["error"]["details"]["fields"]["provider"].is_string(), "{unknown}");
}

#[tokio::test]
async fn the_catalog_needs_a_token() {
    let stack = Stack::from_env().await;
    let response = stack.http.get(stack.url("/rag/embedding-models")).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 401);
}

async fn send(stack: &Stack, user: &User, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, String) {
    stack.call(user, method, path, body).await
}

/// Creates a base on the keyless local model; the status and the answer.
async fn create(stack: &Stack, user: &User, scope: &str, collection: Option<&str>) -> (u16, Value) {
    let mut body = serde_json::json!({"name": "Team Handbook", "scope": scope,
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    if let Some(collection) = collection {
        body["collection_name"] = collection.into();
    }
    let (status, text) = send(stack, user, reqwest::Method::POST, "/kb", Some(body)).await;
    (status, serde_json::from_str(&text).expect("JSON"))
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

#[tokio::test]
async fn every_scope_permission_and_grant_reads_as_the_rule_says_and_refusals_are_not_found() {
    let stack = Stack::from_env().await;
    let (org_a, org_b) = (Some(uuid::Uuid::new_v4()), Some(uuid::Uuid::new_v4()));
    let owner = User::with(org_a, &["collections:edit"], false);
    let viewer = User::with(org_a, &["collections:view"], false);
    let member = User::with(org_a, &[], false);
    let stranger = User::with(org_b, &["collections:edit"], false);
    let admin = User::with(None, &[], true);

    let (status, personal) = create(&stack, &owner, "personal", None).await;
    assert_eq!(status, 201, "{personal}");
    let (status, org) = create(&stack, &owner, "org", None).await;
    assert_eq!(status, 201, "{org}");
    let (status, app) = create(&stack, &admin, "app", None).await;
    assert_eq!(status, 201, "{app}");
    let id = |base: &Value| base["id"].as_str().expect("id").to_owned();

    // The answer for a base that does not exist, which every refusal must equal.
    let (absent_status, absent) =
        send(&stack, &viewer, reqwest::Method::GET, &format!("/kb/{}", uuid::Uuid::new_v4()), None).await;
    assert_eq!(absent_status, 404);
    let name = |base: &Value| base["collection_name"].as_str().expect("name").to_owned();
    // (base, caller, expected access or None for refused)
    let table: Vec<(&Value, &User, Option<&str>)> = vec![
        (&personal, &owner, Some("edit")),
        (&personal, &viewer, None),
        (&personal, &admin, None),
        (&org, &owner, Some("edit")),
        (&org, &viewer, Some("view")),
        (&org, &member, None),
        (&org, &stranger, None),
        (&app, &member, Some("view")),
        (&app, &stranger, Some("view")),
        (&app, &admin, Some("edit")),
    ];
    // Every route, against every case: a read needs view, a write edit; each refusal reads
    // byte for byte as the same route's answer for a base or name that does not exist.
    use reqwest::Method;
    let grant_to = serde_json::json!({"user_id": uuid::Uuid::new_v4(), "level": "view"});
    type Route = (Method, fn(&str, &str) -> String, Option<Value>, bool);
    let routes: Vec<Route> = vec![
        (Method::GET, |id, _| format!("/kb/{id}"), None, false),
        (Method::GET, |id, _| format!("/kb/{id}/ingestion"), None, false),
        (Method::GET, |id, _| format!("/kb/{id}/documents"), None, false),
        (Method::GET, |_, name| format!("/rag/collections/{name}/info"), None, false),
        (Method::PATCH, |id, _| format!("/kb/{id}"), Some(serde_json::json!({"name": "Renamed"})), true),
        (Method::POST, |id, _| format!("/kb/{id}/grants"), Some(grant_to), true),
    ];
    let ghost_id = uuid::Uuid::new_v4().to_string();
    for (method, path, body, writes) in &routes {
        let (status, ghost) =
            send(&stack, &owner, method.clone(), &path(&ghost_id, "no_such_collection"), body.clone()).await;
        assert_eq!(status, 404, "{method} {}", path("ID", "NAME"));
        for (i, (base, user, expected)) in table.iter().enumerate() {
            let allowed = match expected {
                Some(access) => !*writes || *access == "edit",
                None => false,
            };
            let (status, text) = send(&stack, user, method.clone(), &path(&id(base), &name(base)), body.clone()).await;
            if allowed {
                assert!(status == 200 || status == 201, "case {i}, {method} {}: {status} {text}", path("ID", "NAME"));
            } else {
                assert_eq!((status, text.as_str()), (404, ghost.as_str()), "case {i}, {method} {}", path("ID", "NAME"));
            }
        }
    }
    for (i, (base, user, expected)) in table.iter().enumerate() {
        let (_, answer) = stack.call_json(user, reqwest::Method::GET, &format!("/kb/{}", id(base)), None).await;
        if let Some(access) = expected {
            assert_eq!(answer["access"], *access, "case {i}");
        }
        let (_, listed) = stack.call_json(user, reqwest::Method::GET, "/rag/collections", None).await;
        let names: Vec<&str> =
            listed["collections"].as_array().expect("collections").iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(names.contains(&name(base).as_str()), expected.is_some(), "case {i}: {listed}");
    }
    // Deleting is a write too: refused alike for every non-writer, then queued for the owner.
    for user in [&viewer, &member, &stranger, &admin] {
        for path in [format!("/kb/{}", id(&org)), format!("/rag/collections/{}", name(&org))] {
            let (status, text) = send(&stack, user, reqwest::Method::DELETE, &path, None).await;
            let ghost = if path.starts_with("/kb") {
                format!("/kb/{ghost_id}")
            } else {
                "/rag/collections/no_such_collection".to_owned()
            };
            let (_, expected) = send(&stack, &owner, reqwest::Method::DELETE, &ghost, None).await;
            assert_eq!((status, text), (404, expected), "{path}");
        }
    }
    // A grant widens: the viewer may now manage the org base; the member may read it.
    for (user, level) in [(&viewer, "edit"), (&member, "view")] {
        let grant = serde_json::json!({"user_id": user.id, "level": level});
        let (status, text) =
            send(&stack, &owner, reqwest::Method::POST, &format!("/kb/{}/grants", id(&org)), Some(grant)).await;
        assert_eq!(status, 201, "{text}");
        let (status, text) = send(&stack, user, reqwest::Method::GET, &format!("/kb/{}", id(&org)), None).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).expect("JSON")["access"], level);
    }
    // Only a writer grants; anyone else is told the base does not exist.
    let grant = serde_json::json!({"user_id": stranger.id, "level": "edit"});
    let (status, text) =
        send(&stack, &member, reqwest::Method::POST, &format!("/kb/{}/grants", id(&org)), Some(grant)).await;
    assert_eq!((status, text.as_str()), (404, absent.as_str()));
    // The listing holds what each caller reaches, and nothing else.
    let (_, listed) = send(&stack, &stranger, reqwest::Method::GET, "/kb", None).await;
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    let ids: Vec<&str> =
        listed["knowledge_bases"].as_array().expect("list").iter().filter_map(|b| b["id"].as_str()).collect();
    assert!(
        ids.contains(&id(&app).as_str()) && !ids.contains(&id(&org).as_str()) && !ids.contains(&id(&personal).as_str())
    );
}

#[tokio::test]
async fn a_base_is_refused_clearly_naming_its_field() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(uuid::Uuid::new_v4()), &["collections:view"], false);
    let admin = User::with(None, &[], true);
    let base = serde_json::json!({"name": "x", "scope": "personal", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        body
    };
    let cases = [
        (&user, with("collection_name", "Handbook".into()), "collection_name"),
        (&user, with("collection_name", "foo-bar".into()), "collection_name"),
        (&user, with("collection_name", "all".into()), "collection_name"),
        (&user, with("collection_name", "documents".into()), "collection_name"),
        (&user, with("collection_name", "x".repeat(46).into()), "collection_name"),
        (&user, with("scope", "galaxy".into()), "scope"),
        (&user, with("scope", "org".into()), "scope"),
        (&user, with("scope", "app".into()), "scope"),
        (&user, with("embedding_provider", "nobody".into()), "embedding_provider"),
        (&user, with("embedding_model", "text-embedding-3-small".into()), "embedding_model"),
        (&user, with("embedding_secret_id", uuid::Uuid::new_v4().to_string().into()), "embedding_secret_id"),
        // Read into the body's type: a misspelt setting, a wrong type, blank text.
        (&user, with("chunk_size", 500.into()), "chunk_size"),
        (&user, with("is_default", "yes".into()), "is_default"),
        (&user, with("embedding_endpoint_id", 7.into()), "embedding_endpoint_id"),
        (&user, with("name", " ".into()), "name"),
        (&user, with("name", Value::Null), "name"),
        (
            &admin,
            {
                let mut b = with("scope", "app".into());
                b["embedding_provider"] = "openai".into();
                b["embedding_model"] = "text-embedding-3-small".into();
                b
            },
            "embedding_provider",
        ),
    ];
    for (caller, body, field) in cases {
        let (status, text) = send(&stack, caller, reqwest::Method::POST, "/kb", Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("JSON");
        assert!(answer["error"]["details"]["fields"][field].is_string(), "{body}: {text}");
    }
}

#[tokio::test]
async fn twenty_concurrent_claims_of_one_name_yield_one_base() {
    let stack = Stack::from_env().await;
    let name = unique("race");
    let users: Vec<User> = (0..20).map(|_| User::new()).collect();
    let claims = users.iter().map(|user| create(&stack, user, "personal", Some(&name)));
    let statuses: Vec<u16> =
        futures_util::future::join_all(claims).await.into_iter().map(|(status, _)| status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 19, "{statuses:?}");
}

#[tokio::test]
async fn a_caller_who_writes_a_collection_may_add_a_base_on_it() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let name = unique("shared");
    assert_eq!(create(&stack, &owner, "personal", Some(&name)).await.0, 201);
    let (status, second) = create(&stack, &owner, "personal", Some(&name)).await;
    assert_eq!(status, 201, "{second}");
    assert_eq!(second["embedding_dim"], 384);
    let (status, answer) = create(&stack, &User::new(), "personal", Some(&name)).await;
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"]["details"]["fields"]["collection_name"].is_string());
}
