//! Images described by a collection's vision model, on the running stack, against a
//! **stand-in** vision provider the test starts (`sluice_e2e::vision_stand_in`): it proves
//! what Sluice sends — the model, each image once as a data URL, no key to an endpoint that
//! was given none (and never the organization's provider keys), nothing for an icon — and
//! what it does with each answer, refusal and 429, never the quality of a description.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::vision_stand_in::{Answer, VisionStandIn};
use sluice_e2e::{Stack, User};
use sluice_fixtures::{Ink, docx_picture, docx_with_media, pdf_typeset, png};
use uuid::Uuid;

const KEY: &str = "sk-vision-test-key";
const MODEL: &str = "gpt-4o-mini";

/// An organization's editor, its OpenAI key in the vault and the stand-in registered as its
/// endpoint (plain `http`, so keyless): what a base's `image_description` names.
struct Org {
    user: User,
    secret_id: String,
    endpoint_id: String,
    stand_in: VisionStandIn,
}

async fn org(stack: &Stack, prefix: &str) -> Org {
    let user = User::with(Some(Uuid::new_v4()), &["secrets:edit", "collections:edit"], false);
    let key = json!({"name": "vision key", "kind": "api_key", "provider": "openai", "value": KEY, "visibility": "org"});
    let (status, secret) = stack.call_json(&user, Method::POST, "/secrets", Some(key)).await;
    assert_eq!(status, 201, "{secret}");
    let stand_in = VisionStandIn::start(prefix).await;
    let endpoint = json!({"name": format!("vision {}", Uuid::new_v4().simple()), "provider": "local",
        "base_url": stand_in.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(endpoint)).await;
    assert_eq!(status, 201, "{endpoint}");
    Org {
        user,
        secret_id: secret["id"].as_str().expect("id").to_owned(),
        endpoint_id: endpoint["id"].as_str().expect("id").to_owned(),
        stand_in,
    }
}

impl Org {
    fn describing(&self) -> Value {
        json!({"enabled": true, "endpoint_id": self.endpoint_id, "model": MODEL})
    }

    /// A new base describing its images (or not, with `description` null); its id.
    async fn base(&self, stack: &Stack, description: Value) -> String {
        let mut ingestion = json!({"chunk_size": 300, "chunk_overlap": 0});
        if !description.is_null() {
            ingestion["image_description"] = description;
        }
        let body = json!({"name": format!("reports {}", Uuid::new_v4().simple()), "scope": "org",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2", "ingestion_config": ingestion});
        let (status, base) = stack.call_json(&self.user, Method::POST, "/kb", Some(body)).await;
        assert_eq!(status, 201, "{base}");
        base["id"].as_str().expect("id").to_owned()
    }

    /// Uploads `bytes` to `kb`, waits for it to be indexed, and reads it back: the document
    /// and its text.
    async fn indexed(&self, stack: &Stack, kb: &str, name: &str, bytes: &[u8]) -> (Value, String) {
        let accepted = stack.upload_document(&self.user, kb, name, bytes).await;
        let id = accepted["tracking_id"].as_str().expect("id").to_owned();
        stack.indexed(&self.user, kb).await;
        let (status, document) = stack.call_json(&self.user, Method::GET, &format!("/rag/documents/{id}"), None).await;
        assert_eq!(status, 200, "{document}");
        let (status, text) = stack.call_json(&self.user, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
        assert_eq!(status, 200, "{text}");
        (document, text["text"].as_str().expect("text").to_owned())
    }
}

/// A report with a chart between two paragraphs and an icon beside the heading.
fn report(paragraph: &str) -> Vec<u8> {
    pdf_typeset(&[vec![
        Ink::Text { x: 72.0, y: 720.0, size: 16.0, bold: true, text: "Harbour report" },
        Ink::Picture { x: 300.0, y: 716.0, width: 12.0, height: 12.0, pixels: (16, 16), shade: 200 },
        Ink::Text { x: 72.0, y: 690.0, size: 10.0, bold: false, text: paragraph },
        Ink::Picture { x: 72.0, y: 500.0, width: 300.0, height: 150.0, pixels: (300, 150), shade: 60 },
        Ink::Text { x: 72.0, y: 470.0, size: 10.0, bold: false, text: "Dredging resumes after the storms." },
    ]])
}

#[tokio::test]
async fn a_chart_is_described_in_place_found_by_its_description_and_described_once_per_collection() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "A bar chart of lighthouse tonnage by quarter").await;
    let kb = org.base(&stack, org.describing()).await;

    let (document, text) = org.indexed(&stack, &kb, "report.pdf", &report("Tonnage is shown below.")).await;
    assert_eq!(document["status"], "done", "{document}");
    assert_eq!(document["images"]["described"], 1, "{document}");
    assert_eq!(document["images"]["skipped_reasons"], json!({"too_small": 1}), "the icon: {document}");

    // What was sent: one request, the model, the vault's key, the chart as a PNG data URL.
    let seen = org.stand_in.seen();
    assert_eq!(org.stand_in.violations(), Vec::<String>::new());
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].model, MODEL);
    assert_eq!(seen[0].authorization, None, "an endpoint given no key is sent none");
    assert_eq!((seen[0].media_type.as_str(), seen[0].width, seen[0].height), ("image/png", 300, 150));
    assert_eq!(seen[0].token_limit_field, "max_tokens", "an endpoint is not OpenAI's own API");

    // The description sits where the chart was, as a markdown image block.
    let description = org.stand_in.description_of(&seen[0]);
    let block = format!("![Image: {description}](#image-1)");
    let expected = format!("Tonnage is shown below.\n\n{block}\n\nDredging resumes after the storms.");
    assert!(text.contains(&expected), "{text}");

    // Searching for the description's words finds the chunk holding it, marked as such.
    let body = json!({"query": "lighthouse tonnage chart", "knowledge_base_ids": [kb], "mode": "keyword", "top_k": 5});
    let (status, found) = stack.call_json(&org.user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    let hit = &found["results"][0];
    assert!(hit["content"].as_str().expect("content").contains(&description), "{found}");
    assert_eq!(hit["metadata"]["image_described"], true, "{hit}");

    // The same chart in a second document costs no second request.
    let (second, second_text) = org.indexed(&stack, &kb, "again.pdf", &report("The same chart, again.")).await;
    assert_eq!(second["images"]["described"], 1, "{second}");
    assert!(second_text.contains(&block), "{second_text}");
    assert_eq!(org.stand_in.seen().len(), 1, "described once per collection");

    // Switched off for one upload, and on a base that does not describe: no request at all.
    let form = sluice_e2e::file_form("off.pdf", None, report("Not described this time."))
        .text("ingestion", json!({"image_description": {"enabled": false}}).to_string());
    let (status, answer) = stack.post_form(&org.user, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!(status, 202, "{answer}");
    stack.indexed(&org.user, &kb).await;
    let plain = org.base(&stack, Value::Null).await;
    let (document, text) = org.indexed(&stack, &plain, "plain.pdf", &report("No description here.")).await;
    assert_eq!((document["status"].as_str(), &document["images"]), (Some("done"), &Value::Null));
    assert!(!text.contains("![Image"), "{text}");
    assert_eq!(org.stand_in.seen().len(), 1, "nothing sent with description off");
}

#[tokio::test]
async fn refusals_and_rate_limits_leave_images_undescribed_and_the_document_done() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "A photograph of a whiteboard").await;
    let kb = org.base(&stack, org.describing()).await;
    let pictures: Vec<(String, Vec<u8>)> = (0..4).map(|n| (format!("rId{n}"), png(120, 120, 10 + n as u8))).collect();
    let body: String = pictures
        .iter()
        .map(|(id, _)| format!("<w:p><w:r><w:t>Before {id}.</w:t></w:r></w:p>{}", docx_picture(id)))
        .collect();
    let media: Vec<(&str, Vec<u8>)> = pictures.iter().map(|(id, bytes)| (id.as_str(), bytes.clone())).collect();
    let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + std::time::Duration::from_secs(2));
    org.stand_in.script(vec![
        // The first picture: asked to wait a second, then described.
        Answer::RateLimited("1".to_owned()),
        Answer::Describe("A site plan of the east quay.".to_owned()),
        // The second: asked to wait until a date, then described.
        Answer::RateLimited(soon),
        Answer::Describe("A table of berth depths.".to_owned()),
        // The third: the model declines; the fourth: a wait longer than the document has.
        Answer::Refuse,
        Answer::RateLimited("86400".to_owned()),
    ]);
    let (document, text) = org.indexed(&stack, &kb, "board.docx", &docx_with_media(&body, &media)).await;
    assert_eq!(document["status"], "done", "{document}");
    assert_eq!(document["images"]["described"], 2, "{document}");
    assert_eq!(document["images"]["skipped_reasons"], json!({"declined": 1, "rate_limited": 1}), "{document}");
    assert!(
        text.contains("Before rId0.\n\n![Image: A site plan of the east quay.](#image-1)\n\nBefore rId1."),
        "{text}"
    );
    assert!(text.contains("![Image: A table of berth depths.](#image-2)"), "{text}");
    assert_eq!(org.stand_in.seen().len(), 6);
    assert_eq!(org.stand_in.violations(), Vec::<String>::new());

    // A refused key refuses every image: one request, the rest not sent, the document done.
    let other = org.base(&stack, org.describing()).await;
    let fresh: Vec<(&str, Vec<u8>)> = vec![("rId0", png(130, 130, 1)), ("rId1", png(130, 130, 2))];
    let body = format!("<w:p><w:r><w:t>Plans.</w:t></w:r></w:p>{}{}", docx_picture("rId0"), docx_picture("rId1"));
    org.stand_in.script(vec![Answer::Status(401)]);
    let (document, _) = org.indexed(&stack, &other, "plans.docx", &docx_with_media(&body, &fresh)).await;
    assert_eq!(document["status"], "done", "{document}");
    assert_eq!(document["images"]["skipped_reasons"], json!({"credential_refused": 2}), "{document}");
    assert_eq!(org.stand_in.seen().len(), 7, "the second image was not sent");
}

#[tokio::test]
async fn an_image_uploaded_alone_is_read_by_its_description() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "A whiteboard listing the spring maintenance rota").await;
    let kb = org.base(&stack, org.describing()).await;
    let (document, text) = org.indexed(&stack, &kb, "whiteboard.png", &png(400, 300, 77)).await;
    assert_eq!(document["status"], "done", "{document}");
    let seen = org.stand_in.seen();
    assert_eq!(seen.len(), 1);
    assert!(text.contains(&org.stand_in.description_of(&seen[0])), "{text}");
}

#[tokio::test]
async fn a_setting_lends_only_what_the_caller_may_and_names_a_vision_model() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "unused").await;
    let outsider = self::org(&stack, "unused").await;
    let fields = |answer: &Value| -> Vec<String> {
        answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default()
    };
    let cases = [
        (json!({"enabled": true, "provider": "openai", "model": "gpt-3.5-turbo", "secret_id": org.secret_id}), "model"),
        (json!({"enabled": true, "provider": "openai", "model": MODEL}), "secret_id"),
        (
            json!({"enabled": true, "endpoint_id": org.endpoint_id, "model": MODEL, "secret_id": outsider.secret_id}),
            "secret_id",
        ),
        // The organization's own OpenAI key, to the member's endpoint: a key goes only to the
        // provider it was stored for.
        (
            json!({"enabled": true, "endpoint_id": org.endpoint_id, "model": MODEL, "secret_id": org.secret_id}),
            "secret_id",
        ),
        (json!({"enabled": true, "endpoint_id": outsider.endpoint_id, "model": MODEL}), "endpoint_id"),
        (json!({"enabled": true, "endpoint_id": org.endpoint_id, "model": MODEL, "max_images": 0}), "max_images"),
    ];
    for (setting, field) in cases {
        let body = json!({"name": format!("x {}", Uuid::new_v4().simple()), "scope": "org",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
            "ingestion_config": {"image_description": setting}});
        let (status, refused) = stack.call_json(&org.user, Method::POST, "/kb", Some(body)).await;
        let expected = format!("ingestion_config.image_description.{field}");
        assert_eq!((status, fields(&refused)), (422, vec![expected]), "a collection's own: {setting}: {refused}");
    }
    // A key of the organization that the caller cannot see is refused as a missing one, and
    // an upload's override is judged the same way.
    let kb = org.base(&stack, Value::Null).await;
    let form = sluice_e2e::file_form("a.pdf", None, report("x")).text(
        "ingestion",
        json!({"image_description": {"enabled": true, "endpoint_id": org.endpoint_id,
            "model": MODEL, "secret_id": outsider.secret_id}})
        .to_string(),
    );
    let (status, refused) = stack.post_form(&org.user, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!((status, fields(&refused)), (400, vec!["ingestion_config.image_description.secret_id".to_owned()]));
    let kb_id: Uuid = kb.parse().expect("uuid");
    let rows: i64 = stack
        .db()
        .await
        .query_one("SELECT count(*) FROM rag_documents WHERE kb_id = $1", &[&kb_id])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0, "nothing left behind");
}

#[tokio::test]
async fn an_organizations_key_goes_only_to_the_provider_it_was_stored_for_and_only_over_https() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "A chart nobody should see").await;
    let kb = org.base(&stack, Value::Null).await;
    let kb_id: Uuid = kb.parse().expect("uuid");
    let field_of = |answer: &Value| {
        answer["error"]["details"]["fields"].as_object().map(|f| f.keys().cloned().collect::<Vec<_>>())
    };

    // The exploit: the organization's OpenAI key pointed at the member's own endpoint.
    let exploit = json!({"enabled": true, "endpoint_id": org.endpoint_id, "model": MODEL, "secret_id": org.secret_id});
    let body = json!({"ingestion_config": {"image_description": exploit}});
    let (status, refused) = stack.call_json(&org.user, Method::PATCH, &format!("/kb/{kb}"), Some(body)).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(field_of(&refused), Some(vec!["ingestion_config.image_description.secret_id".to_owned()]));
    assert!(refused.to_string().contains("a key goes only to its own provider"), "{refused}");

    // A setting that holds it anyway (stored before the rule was kept) sends nothing.
    let db = stack.db().await;
    let update = "UPDATE knowledge_bases SET ingestion_config = jsonb_set(coalesce(ingestion_config, '{}'), \
                  '{image_description}', $2) WHERE id = $1";
    db.execute(update, &[&kb_id, &exploit]).await.expect("the old setting");
    let (document, text) = org.indexed(&stack, &kb, "report.pdf", &report("The chart is below.")).await;
    assert_eq!(document["status"], "done", "{document}");
    assert!(document["images"]["skipped_reasons"]["no_usable_key"].as_u64() >= Some(1), "{document}");
    assert!(!text.contains("![Image"), "{text}");
    assert!(org.stand_in.seen().is_empty(), "the stand-in endpoint was sent {:?}", org.stand_in.seen());

    // A key stored for an endpoint is accepted only for an https one.
    let stored = |provider: String| {
        json!({"name": "endpoint key", "kind": "api_key", "provider": provider,
        "value": "sk-endpoint-own", "visibility": "org"})
    };
    let (status, refused) = stack
        .call_json(&org.user, Method::POST, "/secrets", Some(stored(format!("endpoint:{}", org.endpoint_id))))
        .await;
    assert_eq!((status, field_of(&refused)), (400, Some(vec!["provider".to_owned()])), "{refused}");
    let https = json!({"name": format!("tls {}", Uuid::new_v4().simple()), "provider": "local",
        "base_url": "https://127.0.0.1:9/v1", "scope": "org"});
    let (status, endpoint) = stack.call_json(&org.user, Method::POST, "/embedding-endpoints", Some(https)).await;
    assert_eq!(status, 201, "{endpoint}");
    let endpoint_id = endpoint["id"].as_str().expect("id").to_owned();
    let (status, key) =
        stack.call_json(&org.user, Method::POST, "/secrets", Some(stored(format!("endpoint:{endpoint_id}")))).await;
    assert_eq!(status, 201, "{key}");
    assert_eq!(key["provider"], format!("endpoint:{endpoint_id}"));
    let own = json!({"enabled": true, "endpoint_id": endpoint_id, "model": MODEL, "secret_id": key["id"]});
    let body = json!({"ingestion_config": {"image_description": own}});
    let (status, base) = stack.call_json(&org.user, Method::PATCH, &format!("/kb/{kb}"), Some(body)).await;
    assert_eq!(status, 200, "{base}");

    // Its key is never sent in the clear: the endpoint moved to plain http describes nothing.
    let endpoint_uuid: Uuid = endpoint_id.parse().expect("uuid");
    let moved = org.stand_in.base_url.clone();
    db.execute("UPDATE embedding_endpoints SET base_url = $2 WHERE id = $1", &[&endpoint_uuid, &moved])
        .await
        .expect("moved");
    let (document, _) = org.indexed(&stack, &kb, "again.pdf", &report("The chart, again.")).await;
    assert_eq!(document["status"], "done", "{document}");
    assert!(document["images"]["skipped_reasons"]["key_needs_https"].as_u64() >= Some(1), "{document}");
    assert!(org.stand_in.seen().is_empty(), "the key travelled in the clear: {:?}", org.stand_in.seen());
}

#[tokio::test]
async fn a_description_is_reused_only_where_the_same_address_and_model_describe() {
    let stack = Stack::from_env().await;
    let org = org(&stack, "The first endpoint's words").await;
    let kb = org.base(&stack, org.describing()).await;
    let (first, text) = org.indexed(&stack, &kb, "report.pdf", &report("The chart is below.")).await;
    assert_eq!(first["images"]["described"], 1, "{first}");
    let planted = org.stand_in.description_of(&org.stand_in.seen()[0]);
    assert!(text.contains(&planted), "{text}");

    // The base moved to another endpoint, same model: the same chart is asked of it again.
    let other = VisionStandIn::start("The second endpoint's words").await;
    let endpoint = json!({"name": format!("vision {}", Uuid::new_v4().simple()), "provider": "local",
        "base_url": other.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&org.user, Method::POST, "/embedding-endpoints", Some(endpoint)).await;
    assert_eq!(status, 201, "{endpoint}");
    let moved = json!({"enabled": true, "endpoint_id": endpoint["id"], "model": MODEL});
    let body = json!({"ingestion_config": {"image_description": moved}});
    let (status, base) = stack.call_json(&org.user, Method::PATCH, &format!("/kb/{kb}"), Some(body)).await;
    assert_eq!(status, 200, "{base}");
    let (second, text) = org.indexed(&stack, &kb, "again.pdf", &report("The chart is below.")).await;
    assert_eq!(second["images"]["described"], 1, "{second}");
    assert_eq!(other.seen().len(), 1, "the second endpoint was asked");
    assert!(!text.contains(&planted), "the first endpoint's description was reused: {text}");
    assert!(text.contains(&other.description_of(&other.seen()[0])), "{text}");
}
