//! Credentials, keyless services and where a base embeds, on the running stack: keys sealed
//! by KMS and bound to their organization, lent only by those who can see them; local
//! services by scope; OpenRouter endpoints asked which models they serve.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use uuid::Uuid;

async fn store_key(stack: &Stack, user: &User, provider: &str, visibility: &str, value: &str) -> (u16, Value) {
    let body = json!({"name": format!("{provider} key"), "kind": "api_key", "provider": provider,
        "value": value, "visibility": visibility});
    stack.call_json(user, Method::POST, "/secrets", Some(body)).await
}

fn listed_ids(answer: &Value, key: &str) -> Vec<String> {
    answer[key].as_array().expect("list").iter().filter_map(|s| s["id"].as_str().map(str::to_owned)).collect()
}

fn field_of(answer: &Value) -> Vec<String> {
    answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
}

#[tokio::test]
async fn a_key_is_sealed_for_its_organization_and_never_answered() {
    let stack = Stack::from_env().await;
    let (org_a, org_b) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
    let owner = User::with(org_a, &["secrets:edit", "collections:edit"], false);
    let colleague = User::with(org_a, &["secrets:view", "collections:edit"], false);
    let blind = User::with(org_a, &["collections:edit"], false);
    let outsider = User::with(org_b, &["secrets:view", "secrets:edit", "collections:edit"], false);

    let (status, refused) = store_key(&stack, &colleague, "openai", "private", "sk-x").await;
    assert_eq!(status, 403, "{refused}");
    for (provider, visibility, field) in
        [("local", "private", "provider"), ("nobody", "private", "provider"), ("openai", "team", "visibility")]
    {
        let (status, refused) = store_key(&stack, &owner, provider, visibility, "sk-x").await;
        assert_eq!((status, field_of(&refused)), (400, vec![field.to_owned()]), "{refused}");
    }
    let value = format!("sk-live-{}", Uuid::new_v4().simple());
    let (status, private) = store_key(&stack, &owner, "openai", "private", &value).await;
    assert_eq!(status, 201, "{private}");
    assert!(!private.to_string().contains(&value), "the value came back: {private}");
    let (status, shared) = store_key(&stack, &owner, "openai", "org", &format!("{value}-shared")).await;
    assert_eq!(status, 201, "{shared}");
    let (private_id, shared_id) = (private["id"].as_str().expect("id"), shared["id"].as_str().expect("id"));

    // Who sees which: the owner both, a colleague with secrets:view the shared one, nobody else any.
    for (user, expected) in
        [(&owner, vec![private_id, shared_id]), (&colleague, vec![shared_id]), (&blind, vec![]), (&outsider, vec![])]
    {
        let (status, listed) = stack.call_json(user, Method::GET, "/secrets", None).await;
        assert_eq!(status, 200);
        assert!(!listed.to_string().contains("sk-live"), "a value was listed: {listed}");
        let ids = listed_ids(&listed, "secrets");
        assert_eq!(ids, expected.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{listed}");
    }

    // The row holds ciphertext that opens with its own organization's context only.
    let db = stack.db().await;
    let row = db
        .query_one(
            "SELECT sealed_key, nonce, ciphertext FROM secrets WHERE id = $1",
            &[&Uuid::parse_str(private_id).expect("uuid")],
        )
        .await
        .expect("row");
    let sealed = sluice_vault::Sealed { sealed_key: row.get(0), nonce: row.get(1), ciphertext: row.get(2) };
    assert!(!sealed.ciphertext.windows(8).any(|w| w == b"sk-live-"), "stored plain");
    let vault = sluice_vault::Vault::new(stack.kms.clone(), stack.kms_key_arn().await);
    let secret_id = Uuid::parse_str(private_id).expect("uuid");
    let own = sluice_vault::Binding { secret_id, org_id: org_a, kind: Some(sluice_vault::API_KEY) };
    assert_eq!(vault.open(own, &sealed).await.expect("opens for its organization and kind"), value);
    for wrong in [
        sluice_vault::Binding { org_id: org_b, ..own },
        // Sealed bound to its kind: it opens as nothing else, nor as an unbound value.
        sluice_vault::Binding { kind: Some(sluice_vault::AWS_CREDENTIALS), ..own },
        sluice_vault::Binding { kind: None, ..own },
    ] {
        assert!(matches!(vault.open(wrong, &sealed).await, Err(sluice_vault::VaultError::Unopenable)), "{wrong:?}");
    }

    // Binding a key is lending it: only one the caller can see, for the provider it is for.
    let base = |secret: &str| {
        json!({"name": "Vendor docs", "scope": "org", "embedding_provider": "openai",
            "embedding_model": "text-embedding-3-small", "embedding_secret_id": secret})
    };
    let (status, created) = stack.call_json(&owner, Method::POST, "/kb", Some(base(private_id))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["embedding_secret_id"], private_id);
    let (status, created) = stack.call_json(&colleague, Method::POST, "/kb", Some(base(shared_id))).await;
    assert_eq!(status, 201, "{created}");
    let (_, unknown) = stack.call(&colleague, Method::POST, "/kb", Some(base(&Uuid::new_v4().to_string()))).await;
    for (user, secret) in [(&colleague, private_id), (&blind, shared_id), (&outsider, shared_id)] {
        let (status, text) = stack.call(user, Method::POST, "/kb", Some(base(secret))).await;
        assert_eq!((status, text.as_str()), (400, unknown.as_str()), "a key the caller cannot see reads as absent");
    }
    let (_, openrouter_key) = store_key(&stack, &owner, "openrouter", "org", "sk-or-1").await;
    let (status, refused) =
        stack.call_json(&owner, Method::POST, "/kb", Some(base(openrouter_key["id"].as_str().expect("id")))).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_secret_id".to_owned()]), "{refused}");
    let mut keyless = base(private_id);
    keyless["embedding_provider"] = "openai".into();
    keyless.as_object_mut().expect("object").remove("embedding_secret_id");
    let (status, refused) = stack.call_json(&owner, Method::POST, "/kb", Some(keyless)).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_secret_id".to_owned()]), "a keyed base needs a key");
}

#[tokio::test]
async fn a_base_moves_between_providers_but_never_changes_its_model_or_width() {
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let owner = User::with(org, &["secrets:edit", "collections:edit"], false);
    let (_, openai_key) = store_key(&stack, &owner, "openai", "org", "sk-1").await;
    let (_, openrouter_key) = store_key(&stack, &owner, "openrouter", "org", "sk-or-1").await;
    let body = json!({"name": "Manuals", "scope": "org", "embedding_provider": "openai",
        "embedding_model": "text-embedding-3-small", "embedding_secret_id": openai_key["id"]});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let path = format!("/kb/{}", base["id"].as_str().expect("id"));
    for (patch, field) in [
        (json!({"embedding_model": "text-embedding-3-large"}), "embedding_model"),
        (json!({"embedding_dim": 3072}), "embedding_dim"),
        (json!({"embedding_provider": "local"}), "embedding_provider"),
        (json!({"embedding_provider": "openrouter"}), "embedding_secret_id"),
        (json!({"embedding_provider": "openrouter", "embedding_secret_id": openai_key["id"]}), "embedding_secret_id"),
        (json!({"embedding_base_url": "https://openrouter.ai/api/v1"}), "embedding_base_url"),
        (json!({"scope": "app"}), "scope"),
    ] {
        let (status, refused) = stack.call_json(&owner, Method::PATCH, &path, Some(patch.clone())).await;
        assert_eq!(status, 400, "{patch}: {refused}");
        assert!(field_of(&refused).contains(&field.to_owned()), "{patch}: {refused}");
    }
    let (status, refused) =
        stack.call_json(&owner, Method::PATCH, &path, Some(json!({"ingestion_config": {"chunk_overlap": 4096}}))).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    assert_eq!(
        field_of(&refused),
        ["ingestion_config", "ingestion_config.chunk_overlap", "ingestion_config.chunk_size"],
        "the pair rule names both settings: {refused}"
    );
    let moved = json!({"embedding_provider": "openrouter", "embedding_secret_id": openrouter_key["id"],
        "ingestion_config": {"chunk_size": 1200}});
    let (status, answer) = stack.call_json(&owner, Method::PATCH, &path, Some(moved)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["embedding_provider"], "openrouter");
    assert_eq!(answer["embedding_model"], "openai/text-embedding-3-small", "the same space, OpenRouter's name");
    assert_eq!(answer["embedding_dim"], 1536);
    assert_eq!(
        answer["ingestion_config"],
        json!({"chunk_size": 1200, "chunk_overlap": 200, "chunking_strategy": "recursive",
            "chunk_context": "title_and_headings", "output_format": "markdown", "auto_ocr": true,
            "ocr_languages": ["eng"], "ocr_dpi": 150, "max_pages": 1000, "parser": "sluice"})
    );
}

/// An OpenRouter-compatible model listing on loopback, serving `models`, answering every
/// request alike; its base URL.
async fn listing_endpoint(models: &[&str]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let body = json!({"data": models.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()}).to_string();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 4096];
                let _ = socket.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://127.0.0.1:{}/api/v1", addr.port())
}

#[tokio::test]
async fn an_openrouter_endpoint_is_asked_which_models_it_serves() {
    let stack = Stack::from_env().await;
    let owner = User::with(Some(Uuid::new_v4()), &["secrets:edit", "collections:edit"], false);
    let (_, key) = store_key(&stack, &owner, "openrouter", "org", "sk-or-1").await;
    let regional = listing_endpoint(&["openai/text-embedding-3-large", "some/other-model"]).await;
    let body = |model: &str, base_url: &str| {
        json!({"name": "Regional", "scope": "org", "embedding_provider": "openrouter", "embedding_model": model,
            "embedding_secret_id": key["id"], "embedding_base_url": base_url})
    };
    let (status, refused) =
        stack.call_json(&owner, Method::POST, "/kb", Some(body("openai/text-embedding-3-small", &regional))).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_model".to_owned()]), "{refused}");
    let (status, large) =
        stack.call_json(&owner, Method::POST, "/kb", Some(body("openai/text-embedding-3-large", &regional))).await;
    assert_eq!(status, 201, "{large}");
    let (status, refused) = stack
        .call_json(&owner, Method::POST, "/kb", Some(body("openai/text-embedding-3-large", "https://evil.example/v1")))
        .await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_base_url".to_owned()]), "{refused}");

    // An endpoint that cannot be asked is not a refusal.
    let silent = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://127.0.0.1:{}/api/v1", listener.local_addr().expect("addr").port())
    };
    let (status, small) =
        stack.call_json(&owner, Method::POST, "/kb", Some(body("openai/text-embedding-3-small", &silent))).await;
    assert_eq!(status, 201, "{small}");
    // Moving that base to the regional endpoint, which does not serve its model, is refused there.
    let path = format!("/kb/{}", small["id"].as_str().expect("id"));
    let (status, refused) =
        stack.call_json(&owner, Method::PATCH, &path, Some(json!({"embedding_base_url": regional}))).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_base_url".to_owned()]), "{refused}");

    let (status, listed) = stack
        .call_json(&owner, Method::GET, &format!("/rag/embedding-models/openrouter?base_url={regional}"), None)
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["confirmed"], true);
    let models: Vec<&str> =
        listed["models"].as_array().expect("models").iter().filter_map(|m| m["model"].as_str()).collect();
    assert_eq!(models, ["openai/text-embedding-3-large"], "the catalog's models the endpoint lists");
}

#[tokio::test]
async fn local_services_are_registered_by_scope_and_named_only_where_visible() {
    let stack = Stack::from_env().await;
    let (org_a, org_b) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
    let editor = User::with(org_a, &["collections:edit"], false);
    let viewer = User::with(org_a, &["collections:view"], false);
    let outsider = User::with(org_b, &["collections:edit"], false);
    let admin = User::with(None, &[], true);
    let service = |scope: &str, provider: &str, url: &str| json!({"name": format!("gpu box {}", Uuid::new_v4().simple()), "provider": provider, "base_url": url, "scope": scope});
    // The stack allow-lists loopback for its own services; nothing else inward.
    let address = "http://127.0.0.1:8080/v1";
    for (user, body, field) in [
        (&viewer, service("org", "local", address), "scope"),
        (&editor, service("app", "local", address), "scope"),
        (&editor, service("org", "openai", address), "provider"),
        (&editor, service("org", "local", "ftp://127.0.0.1/v1"), "base_url"),
        (&admin, service("galaxy", "local", address), "scope"),
    ] {
        let (status, refused) = stack.call_json(user, Method::POST, "/embedding-endpoints", Some(body.clone())).await;
        assert_eq!((status, field_of(&refused)), (400, vec![field.to_owned()]), "{body}: {refused}");
    }
    let (status, own) =
        stack.call_json(&editor, Method::POST, "/embedding-endpoints", Some(service("org", "local", address))).await;
    assert_eq!(status, 201, "{own}");
    let own_id = own["id"].as_str().expect("id").to_owned();
    let (_, seen) = stack.call_json(&viewer, Method::GET, "/embedding-endpoints", None).await;
    // A member who does not manage collections sees the service, not its internal address.
    let listed = seen["embedding_endpoints"].as_array().expect("list");
    assert!(listed.iter().all(|e| e.get("base_url").is_none()), "a viewer saw an address: {seen}");
    let seen = listed_ids(&seen, "embedding_endpoints");
    assert!(seen.contains(&own_id), "the organization sees its own service");
    let (_, managed) = stack.call_json(&editor, Method::GET, "/embedding-endpoints", None).await;
    let mine = managed["embedding_endpoints"].as_array().expect("list").iter().find(|e| e["id"] == own_id.as_str());
    assert_eq!(mine.expect("listed")["base_url"], address, "{managed}");
    let (_, unseen) = stack.call_json(&outsider, Method::GET, "/embedding-endpoints", None).await;
    let unseen_list = unseen["embedding_endpoints"].as_array().expect("list");
    assert!(!listed_ids(&unseen, "embedding_endpoints").contains(&own_id));
    assert!(
        unseen_list.iter().any(|e| e["scope"] == "app" && e["provider"] == "local"),
        "the stack's own service: {unseen}"
    );

    let body = |scope: &str, endpoint: Option<&str>| {
        let mut body = json!({"name": "On prem", "scope": scope, "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
        if let Some(endpoint) = endpoint {
            body["embedding_endpoint_id"] = endpoint.into();
        }
        body
    };
    let (status, created) = stack.call_json(&editor, Method::POST, "/kb", Some(body("org", Some(&own_id)))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["embedding_endpoint_id"], own_id.as_str());
    let (status, defaulted) = stack.call_json(&editor, Method::POST, "/kb", Some(body("org", None))).await;
    assert_eq!(status, 201, "{defaulted}");
    assert_ne!(defaulted["embedding_endpoint_id"], own_id.as_str(), "no service named: the deployment's");
    let (status, refused) = stack.call_json(&outsider, Method::POST, "/kb", Some(body("org", Some(&own_id)))).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_endpoint_id".to_owned()]), "{refused}");
    let (status, refused) = stack.call_json(&admin, Method::POST, "/kb", Some(body("app", Some(&own_id)))).await;
    assert_eq!((status, field_of(&refused)), (400, vec!["embedding_endpoint_id".to_owned()]), "an app base: {refused}");
}

#[tokio::test]
async fn a_deleted_or_unopenable_key_resolves_to_no_key_and_the_refusal_names_the_collection() {
    use sluice_embed::credentials::{KeyResolution, NoKey, resolve_key};
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let owner = User::with(org, &["secrets:edit", "collections:edit"], false);
    let value = format!("sk-{}", Uuid::new_v4().simple());
    let (_, key) = store_key(&stack, &owner, "openai", "org", &value).await;
    let key_id = key["id"].as_str().expect("id").to_owned();
    let body = json!({"name": "Billing", "scope": "org", "embedding_provider": "openai",
        "embedding_model": "text-embedding-3-small", "embedding_secret_id": key_id});
    let (status, created) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let base_id = Uuid::parse_str(created["id"].as_str().expect("id")).expect("uuid");

    let db = stack.store(2).await;
    let vault = sluice_vault::Vault::new(stack.kms.clone(), stack.kms_key_arn().await);
    let base = || async { db.knowledge_base(base_id, owner.id).await.expect("read").expect("base").base };
    match resolve_key(&db, &vault, &base().await).await.expect("resolved") {
        KeyResolution::Key(key) => assert_eq!(key.expose(), value),
        other => panic!("the chosen key did not open: {other:?}"),
    }

    // Tampered: it no longer opens, and that is "no key", not an error.
    let client = stack.db().await;
    let secret = Uuid::parse_str(&key_id).expect("uuid");
    client
        .execute(
            "UPDATE secrets SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE id = $1",
            &[&secret],
        )
        .await
        .expect("tamper");
    assert_eq!(
        resolve_key(&db, &vault, &base().await).await.expect("resolved"),
        KeyResolution::NoKey(NoKey::Unopenable)
    );

    // Deleted through the API: the base keeps naming it, and resolves to no key.
    let someone = User::with(org, &["secrets:view"], false);
    let (status, _) = stack.call(&someone, Method::DELETE, &format!("/secrets/{key_id}"), None).await;
    assert_eq!(status, 403, "a shared key is deleted with secrets:edit");
    let (status, absent) = stack
        .call(
            &User::with(Some(Uuid::new_v4()), &["secrets:edit"], false),
            Method::DELETE,
            &format!("/secrets/{key_id}"),
            None,
        )
        .await;
    let (_, ghost) = stack.call(&owner, Method::DELETE, &format!("/secrets/{}", Uuid::new_v4()), None).await;
    assert_eq!((status, absent), (404, ghost), "another organization's key reads as absent");
    assert_eq!(stack.call(&owner, Method::DELETE, &format!("/secrets/{key_id}"), None).await.0, 204);
    let base = base().await;
    assert_eq!(base.embedding_secret_id, Some(secret));
    assert_eq!(resolve_key(&db, &vault, &base).await.expect("resolved"), KeyResolution::NoKey(NoKey::Deleted));
    let refusal = NoKey::Deleted.refusal(&base);
    assert!(
        refusal.contains(&base.collection_name) && refusal.contains("openai") && refusal.contains("deleted"),
        "{refusal}"
    );
    assert!(!refusal.contains("OPENAI_API_KEY") && !refusal.contains(&value), "{refusal}");
}

#[tokio::test]
async fn the_migrate_step_binds_a_secret_sealed_before_kinds_to_its_kind() {
    let stack = Stack::from_env().await;
    let vault = sluice_vault::Vault::new(stack.kms.clone(), stack.kms_key_arn().await);
    // A key pair as an older release sealed it: no kind in its encryption context.
    let (id, org) = (Uuid::new_v4(), Some(Uuid::new_v4()));
    let legacy = sluice_vault::Binding { secret_id: id, org_id: org, kind: None };
    let value = r#"{"access_key_id":"AKIAOLD","secret_access_key":"old-secret"}"#;
    let sealed = vault.seal(legacy, value).await.expect("sealed");
    let meta = sluice_store::SecretMeta {
        id,
        name: "legacy".into(),
        kind: "aws_credentials".into(),
        provider: "aws".into(),
        visibility: "org".into(),
        owner_id: Uuid::new_v4(),
        org_id: org,
        kind_bound: false,
        created_at: time::OffsetDateTime::now_utc(),
    };
    let stored =
        sluice_store::SealedValue { sealed_key: sealed.sealed_key, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
    stack.store(1).await.insert_secret(&meta, &stored).await.expect("a legacy row");

    let admin = stack.admin_store().await;
    let bound = sluice_migrate::bind_secret_kinds(&admin, &vault).await.expect("bound");
    assert!(bound >= 1, "{bound}");
    let (meta, sealed) = admin.sealed_secret(id).await.expect("read").expect("the row");
    assert!(meta.kind_bound);
    let sealed =
        sluice_vault::Sealed { sealed_key: sealed.sealed_key, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
    let now = sluice_vault::Binding::stored(id, org, "aws_credentials", true);
    assert_eq!(now.kind, Some(sluice_vault::AWS_CREDENTIALS));
    assert_eq!(vault.open(now, &sealed).await.expect("opens bound to its kind"), value);
    assert!(matches!(vault.open(legacy, &sealed).await, Err(sluice_vault::VaultError::Unopenable)));
    // Run again, there is nothing of it left to bind.
    sluice_migrate::bind_secret_kinds(&admin, &vault).await.expect("again");
    assert!(admin.unbound_secrets(1000).await.expect("listed").iter().all(|(m, _)| m.id != id));
}
