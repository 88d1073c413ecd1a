//! Chunks the model reads whole, on the running stack with the real local model: a `local`
//! base's default chunking embeds every character of a 20-page PDF (`truncated_chunks` 0)
//! and a question about the end of a chunk finds it; a base configured before the rule, at
//! chunk_size 2,500, has its chunks split until the model reads each whole; a configuration
//! the model would cut is refused wherever it is set.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User, file_form};
use sluice_fixtures::pdf;

/// One fact per page, with a question about it in other words.
const FACTS: &[(&str, &str)] = &[
    (
        "The lighthouse keeper on Skerry Island feeds three grey cats every morning.",
        "who looks after the cats by the lighthouse",
    ),
    (
        "Our bakery closes early on Sundays because the oven is cleaned then.",
        "why does the bakery shut early at the weekend",
    ),
    (
        "The river ferry stops running when the water level rises above four metres.",
        "when is the boat across the river cancelled",
    ),
    (
        "Volunteers plant oak saplings along the northern ridge every April.",
        "when are young trees planted on the hills",
    ),
    ("The museum lends its telescope to schools during the winter term.", "can pupils borrow astronomy equipment"),
    ("Parking permits for the harbour car park are renewed each January.", "when must I renew my harbour parking pass"),
    ("The choir rehearses in the old chapel on Thursday evenings.", "where do the singers practise each week"),
    ("Beekeepers harvest heather honey from the moor in late August.", "when is honey collected from the hives"),
    ("The library fines for late books were abolished in March.", "do I still pay a penalty for overdue books"),
    ("Cyclists must dismount on the narrow stone bridge by the mill.", "can I ride my bike over the old bridge"),
    ("The swimming pool is heated by panels on the sports hall roof.", "how is the water in the pool warmed"),
    ("Fishermen report that mackerel arrive in the bay in early June.", "when do the fish come into the bay"),
    ("The town clock was repaired by a watchmaker from Geneva in 1998.", "who fixed the clock tower"),
    (
        "Snow ploughs clear the mountain pass before six in the morning.",
        "how early is the road over the mountain cleared",
    ),
    ("The allotment society shares its tools from a shed by the gate.", "where can gardeners borrow spades"),
    ("The annual kite festival is held on the beach in September.", "when do people fly kites by the sea"),
    ("Recycling of glass bottles happens at the depot behind the station.", "where do I take empty jars and bottles"),
    ("The orchestra tours the coastal villages every other summer.", "how often do the musicians visit seaside towns"),
    ("The cheese shop ages its cheddar in a cave beneath the castle.", "where does the shop mature its cheese"),
    (
        "Night buses run hourly from the square after midnight on Fridays.",
        "is there public transport late on Friday night",
    ),
];

/// Plain filler lines, alike on every page, so each page's meaning is its fact.
const FILLER: &[&str] = &[
    "The committee met on the usual day and went through the routine items on its list.",
    "Minutes of the previous meeting were read aloud and approved without any changes.",
    "Members noted that the budget remained in line with the plan agreed last year.",
    "A short discussion followed on how the notice board should be kept up to date.",
    "It was agreed that the next meeting would take place at the same time and place.",
    "Apologies were received from two members who could not attend this session.",
];

/// A 20-page PDF: filler with the page's fact among it (at a different line on each page).
fn twenty_pages() -> Vec<u8> {
    let pages: Vec<String> = FACTS
        .iter()
        .enumerate()
        .map(|(n, (fact, _))| {
            let mut lines: Vec<&str> = FILLER.to_vec();
            lines.insert(n % (FILLER.len() + 1), fact);
            lines.join("\n")
        })
        .collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    pdf(&pages)
}

async fn local_base(stack: &Stack, owner: &User, ingestion: Option<Value>) -> (u16, Value) {
    let mut body = json!({"name": "Minutes", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    if let Some(ingestion) = ingestion {
        body["ingestion_config"] = ingestion;
    }
    stack.call_json(owner, Method::POST, "/kb", Some(body)).await
}

async fn indexed_document(stack: &Stack, owner: &User, kb: &str) -> Value {
    let accepted = stack.upload_document(owner, kb, "minutes.pdf", &twenty_pages()).await;
    stack.indexed(owner, kb).await;
    let id = accepted["tracking_id"].as_str().expect("id");
    let (status, document) = stack.call_json(owner, Method::GET, &format!("/rag/documents/{id}"), None).await;
    assert_eq!((status, document["status"].as_str()), (200, Some("done")), "{document}");
    document
}

#[tokio::test]
async fn a_local_base_reads_every_character_and_finds_what_ends_a_chunk() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let (status, base) = local_base(&stack, &owner, None).await;
    assert_eq!(status, 201, "{base}");
    assert_eq!(base["ingestion_config"]["chunk_size"], 1000, "the model's default: {base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let document = indexed_document(&stack, &owner, kb).await;
    assert_eq!(document["truncated_chunks"], 0, "{document}");
    let chunks = document["chunk_count"].as_i64().expect("count");
    // About a chunk a page (a page's lines are one markdown paragraph, pages apart).
    assert!(chunks >= 15, "{document}");

    // A fact that sits in the last third of its chunk, and the question about it.
    let table = format!("rag_{}", collection);
    let rows = stack
        .db()
        .await
        .query(
            &format!("SELECT chunk_index, content FROM \"{table}\" WHERE document_id = $1::text::uuid"),
            &[&document["id"].as_str().expect("id")],
        )
        .await
        .expect("chunks");
    let in_last_third = rows.iter().find_map(|row| {
        let (index, content): (i32, String) = (row.get(0), row.get(1));
        FACTS.iter().find_map(|(fact, question)| {
            let at = content.find(fact)?;
            (at * 3 >= content.len() * 2).then_some((index, *question))
        })
    });
    let (index, question) = in_last_third.expect("some fact ends its chunk");
    let body = json!({"query": question, "collections": [collection], "top_k": 3});
    let (status, found) = stack.call_json(&owner, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    let results = found["results"].as_array().expect("results");
    assert!(results.iter().any(|r| r["chunk_index"] == index), "{question:?} → chunk {index}: {found}");
}

#[tokio::test]
async fn chunks_a_model_would_cut_are_refused_when_set_and_split_when_they_were_set_before() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let (status, refused) = local_base(&stack, &owner, Some(json!({"chunk_size": 2500}))).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    let why = refused["error"]["details"]["fields"]["ingestion_config.chunk_size"].as_str().expect("field named");
    assert!(why.contains("1016") && why.contains("all-minilm-l6-v2"), "{why}");

    let (status, base) = local_base(&stack, &owner, None).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id");
    let patch = json!({"ingestion_config": {"chunk_size": 1017}});
    let (status, refused) = stack.call_json(&owner, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["details"]["fields"]["ingestion_config.chunk_size"].is_string(), "{refused}");
    let form = file_form("notes.md", None, b"A note.".to_vec()).text("ingestion", r#"{"chunk_size": 1100}"#);
    let (status, refused) = stack.post_form(&owner, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["ingestion_config.chunk_size"].is_string(), "{refused}");

    // A base configured before the rule keeps working: its 2,500-character chunks are split
    // until the model reads each whole, context and all.
    stack
        .db()
        .await
        .execute(
            "UPDATE knowledge_bases SET ingestion_config = '{\"chunk_size\": 2500, \"chunk_overlap\": 200}' \
             WHERE id = $1::text::uuid",
            &[&kb],
        )
        .await
        .expect("an old configuration");
    let document = indexed_document(&stack, &owner, kb).await;
    assert_eq!(document["truncated_chunks"], 0, "{document}");
    let chunks = document["chunk_count"].as_i64().expect("count");
    // 20 pages of about 550 characters: 2,500-character chunks would be six.
    assert!(chunks >= 10, "{document}");
}
