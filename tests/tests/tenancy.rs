//! The boundaries a hostile tenant tests next, on the running stack: a base embeds only
//! through its own organization's services and keys whoever edits it, a collection lends
//! its key only to those who may lend it, and only a base's managers grant or revoke.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use uuid::Uuid;

fn fields_of(answer: &Value) -> Vec<String> {
    answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
}

async fn store_key(stack: &Stack, user: &User, visibility: &str) -> String {
    let body = json!({"name": "openai key", "kind": "api_key", "provider": "openai",
        "value": format!("sk-{}", Uuid::new_v4().simple()), "visibility": visibility});
    let (status, key) = stack.call_json(user, Method::POST, "/secrets", Some(body)).await;
    assert_eq!(status, 201, "{key}");
    key["id"].as_str().expect("id").to_owned()
}

async fn register_service(stack: &Stack, user: &User) -> String {
    let body = json!({"name": format!("gpu {}", Uuid::new_v4().simple()), "provider": "local",
        "base_url": "http://127.0.0.1:9/v1", "scope": "org"});
    let (status, service) = stack.call_json(user, Method::POST, "/embedding-endpoints", Some(body)).await;
    assert_eq!(status, 201, "{service}");
    service["id"].as_str().expect("id").to_owned()
}

async fn grant(stack: &Stack, by: &User, kb: &str, to: &User, level: &str) -> (u16, String) {
    stack.call(by, Method::POST, &format!("/kb/{kb}/grants"), Some(json!({"user_id": to.id, "level": level}))).await
}

#[tokio::test]
async fn an_editor_from_another_organization_cannot_point_a_base_at_their_own_service_or_key() {
    let stack = Stack::from_env().await;
    let (org_x, org_y) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
    let owner = User::with(org_x, &["collections:edit", "secrets:edit"], false);
    let intruder = User::with(org_y, &["collections:edit", "secrets:edit"], false);
    let intruders_service = register_service(&stack, &intruder).await;
    let intruders_key = store_key(&stack, &intruder, "org").await;

    let local = json!({"name": "X local", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, local_base) = stack.call_json(&owner, Method::POST, "/kb", Some(local)).await;
    assert_eq!(status, 201, "{local_base}");
    let owners_key = store_key(&stack, &owner, "org").await;
    let keyed = json!({"name": "X keyed", "scope": "org", "embedding_provider": "openai",
        "embedding_model": "text-embedding-3-small", "embedding_secret_id": owners_key});
    let (status, keyed_base) = stack.call_json(&owner, Method::POST, "/kb", Some(keyed)).await;
    assert_eq!(status, 201, "{keyed_base}");
    let (local_id, keyed_id) = (local_base["id"].as_str().expect("id"), keyed_base["id"].as_str().expect("id"));
    for kb in [local_id, keyed_id] {
        assert_eq!(grant(&stack, &owner, kb, &intruder, "edit").await.0, 201);
    }

    // The grant lets them edit, not bring their organization's service or key along.
    let path = format!("/kb/{local_id}");
    let (status, refused) = stack
        .call_json(&intruder, Method::PATCH, &path, Some(json!({"embedding_endpoint_id": intruders_service})))
        .await;
    assert_eq!((status, fields_of(&refused)), (400, vec!["embedding_endpoint_id".to_owned()]), "{refused}");
    let path = format!("/kb/{keyed_id}");
    let (status, refused) =
        stack.call_json(&intruder, Method::PATCH, &path, Some(json!({"embedding_secret_id": intruders_key}))).await;
    assert_eq!((status, fields_of(&refused)), (400, vec!["embedding_secret_id".to_owned()]), "{refused}");
    let (_, unchanged) = stack.call_json(&owner, Method::GET, &format!("/kb/{keyed_id}"), None).await;
    assert_eq!(unchanged["embedding_secret_id"], owners_key.as_str());
    // A rename is still theirs to make.
    let (status, renamed) = stack.call_json(&intruder, Method::PATCH, &path, Some(json!({"name": "Renamed"}))).await;
    assert_eq!(status, 200, "{renamed}");

    // A row that names another organization's service anyway embeds nowhere.
    let client = stack.db().await;
    let local_uuid = Uuid::parse_str(local_id).expect("uuid");
    client
        .execute(
            "UPDATE knowledge_bases SET embedding_endpoint_id = $2 WHERE id = $1",
            &[&local_uuid, &Uuid::parse_str(&intruders_service).expect("uuid")],
        )
        .await
        .expect("planted");
    let db = stack.store(2).await;
    let vault = sluice_vault::Vault::new(stack.kms.clone(), stack.kms_key_arn().await);
    let base = db.knowledge_base(local_uuid, owner.id).await.expect("read").expect("base").base;
    let target = sluice_embed::credentials::target_for(&db, &vault, &base).await.expect("resolved");
    let refusal = target.expect_err("another organization's service must not be reached");
    assert!(refusal.contains("names no registered local service"), "{refusal}");
}

#[tokio::test]
async fn a_collection_lends_its_key_only_to_those_who_may_lend_it_and_refusals_read_alike() {
    let stack = Stack::from_env().await;
    let (org_a, org_b) = (Some(Uuid::new_v4()), Some(Uuid::new_v4()));
    let alice = User::with(org_a, &["collections:edit", "secrets:edit"], false);
    let private_key = store_key(&stack, &alice, "private").await;
    let name = format!("vendor_{}", &Uuid::new_v4().simple().to_string()[..10]);
    let body = json!({"name": "Vendor", "scope": "org", "collection_name": name,
        "embedding_provider": "openai", "embedding_model": "text-embedding-3-small",
        "embedding_secret_id": private_key});
    let (status, created) = stack.call_json(&alice, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{created}");

    let claim = |extra: Value| {
        let mut body = json!({"name": "Mine", "scope": "personal", "collection_name": name});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    // A colleague who writes the collection but cannot see Alice's private key, one who
    // sees only shared keys, and an outsider trying every provider: one answer for all.
    let bob = User::with(org_a, &["collections:edit"], false);
    let carol = User::with(org_a, &["collections:edit", "secrets:view"], false);
    let outsider = User::with(org_b, &["collections:edit", "secrets:edit"], false);
    let mut answers = Vec::new();
    for (user, extra) in [
        (&bob, json!({})),
        (&carol, json!({})),
        (&carol, json!({"embedding_provider": "openai"})),
        (&outsider, json!({})),
        (&outsider, json!({"embedding_provider": "openai"})),
        (&outsider, json!({"embedding_provider": "local"})),
        (&outsider, json!({"embedding_provider": "openrouter", "embedding_model": "openai/text-embedding-3-large"})),
    ] {
        let (status, text) = stack.call(user, Method::POST, "/kb", Some(claim(extra.clone()))).await;
        assert_eq!(status, 409, "{extra}: {text}");
        assert!(!text.contains("text-embedding") && !text.contains("openai"), "the refusal told: {text}");
        answers.push(text);
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "refusals differ: {answers:?}");
    let bases_on_name: i64 = stack
        .db()
        .await
        .query_one("SELECT count(*) FROM knowledge_bases WHERE collection_name = $1", &[&name])
        .await
        .expect("count")
        .get(0);
    assert_eq!(bases_on_name, 1, "a refused claim left a base");

    // Naming a key of their own, a colleague who writes the collection adds a base on it.
    let dave = User::with(org_a, &["collections:edit", "secrets:edit"], false);
    let daves_key = store_key(&stack, &dave, "private").await;
    let (status, added) =
        stack.call_json(&dave, Method::POST, "/kb", Some(claim(json!({"embedding_secret_id": daves_key})))).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["embedding_secret_id"], daves_key.as_str());
    // Alice adopts her own key.
    let (status, adopted) = stack.call_json(&alice, Method::POST, "/kb", Some(claim(json!({})))).await;
    assert_eq!(status, 201, "{adopted}");
    assert_eq!(adopted["embedding_secret_id"], private_key.as_str());
}

#[tokio::test]
async fn only_a_bases_managers_grant_and_revoke() {
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let owner = User::with(org, &["collections:edit"], false);
    let viewer = User::with(org, &["collections:view"], false);
    let member = User::with(org, &[], false);
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body =
        json!({"name": "Team", "scope": "org", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id");

    assert_eq!(grant(&stack, &owner, kb, &viewer, "edit").await.0, 201);
    assert_eq!(grant(&stack, &owner, kb, &member, "view").await.0, 201);
    // An edit grantee edits, but cannot spread access nor take it away.
    let (status, refused) = grant(&stack, &viewer, kb, &stranger, "edit").await;
    assert_eq!(status, 403, "{refused}");
    let (status, refused) = stack.call(&viewer, Method::DELETE, &format!("/kb/{kb}/grants/{}", member.id), None).await;
    assert_eq!(status, 403, "{refused}");
    // One who cannot read the base is told it does not exist, as for a base that does not.
    let (_, absent) =
        stack.call(&owner, Method::DELETE, &format!("/kb/{}/grants/{}", Uuid::new_v4(), member.id), None).await;
    let (status, refused) =
        stack.call(&stranger, Method::DELETE, &format!("/kb/{kb}/grants/{}", member.id), None).await;
    assert_eq!((status, refused), (404, absent));

    // Revoked: the member no longer reads the base; the viewer is back to viewing it.
    let (status, _) = stack.call(&owner, Method::DELETE, &format!("/kb/{kb}/grants/{}", member.id), None).await;
    assert_eq!(status, 204);
    let (status, _) = stack.call(&member, Method::GET, &format!("/kb/{kb}"), None).await;
    assert_eq!(status, 404);
    let (status, _) = stack.call(&owner, Method::DELETE, &format!("/kb/{kb}/grants/{}", viewer.id), None).await;
    assert_eq!(status, 204);
    let (_, seen) = stack.call_json(&viewer, Method::GET, &format!("/kb/{kb}"), None).await;
    assert_eq!(seen["access"], "view");
    // Revoking what is not held names the grant.
    let (status, missing) =
        stack.call_json(&owner, Method::DELETE, &format!("/kb/{kb}/grants/{}", member.id), None).await;
    assert_eq!(status, 404, "{missing}");
    assert!(missing["error"]["message"].as_str().unwrap_or_default().contains("Grant"), "{missing}");
}

#[tokio::test]
async fn a_service_address_that_leads_inward_or_takes_over_the_path_is_refused() {
    let stack = Stack::from_env().await;
    let editor = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let admin = User::with(None, &[], true);
    let service = |url: &str, scope: &str| json!({"name": format!("svc {}", Uuid::new_v4().simple()), "provider": "local", "base_url": url, "scope": scope});
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:169.254.169.254]/v1",
        "http://10.0.0.5:8080/v1",
        "http://192.168.1.10/v1",
        "http://[fd00::1]/v1",
        "http://0.0.0.0:8080/v1",
        "http://user:pw@127.0.0.1:8080/v1",
        "http://127.0.0.1:8080/v1?",
        "http://127.0.0.1:8080/v1#x",
        "http://no-such-host.invalid/v1",
    ] {
        for (user, scope) in [(&editor, "org"), (&admin, "app")] {
            let (status, refused) =
                stack.call_json(user, Method::POST, "/embedding-endpoints", Some(service(url, scope))).await;
            assert_eq!((status, fields_of(&refused)), (400, vec!["base_url".to_owned()]), "{url}: {refused}");
        }
    }
    let (_, listed) = stack.call_json(&editor, Method::GET, "/embedding-endpoints", None).await;
    let mine: Vec<&Value> =
        listed["embedding_endpoints"].as_array().expect("list").iter().filter(|e| e["scope"] == "org").collect();
    assert!(mine.is_empty(), "a refused service was stored: {listed}");
}
