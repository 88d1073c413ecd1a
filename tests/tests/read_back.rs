//! Reading knowledge-base documents back on the running stack: the row (by id and by
//! tracking id), the parsed text in pages that join back into the whole, and the original
//! through a presigned link, for the owner and a viewer; a stranger, an absent id and a
//! deleted document are all the same "not found".

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use uuid::Uuid;

async fn local_base(stack: &Stack, owner: &User) -> String {
    let body = json!({"name": "Read back", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base["id"].as_str().expect("id").to_owned()
}

/// The three read-back answers of a document that is not there for `user`, byte for byte.
async fn refusals(stack: &Stack, user: &User, id: &str) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    for path in [
        format!("/rag/documents/{id}"),
        format!("/rag/documents/by-tracking/{id}"),
        format!("/rag/documents/{id}/text"),
        format!("/rag/documents/{id}/file"),
    ] {
        answers.push(stack.call(user, Method::GET, &path, None).await);
    }
    answers
}

#[tokio::test]
async fn owner_and_viewer_read_a_document_back_and_everyone_else_is_told_it_is_not_there() {
    let stack = Stack::from_env().await;
    let (owner, viewer, stranger) = (User::new(), User::new(), User::new());
    let kb = local_base(&stack, &owner).await;
    let (status, granted) = stack
        .call_json(
            &owner,
            Method::POST,
            &format!("/kb/{kb}/grants"),
            Some(json!({"user_id": viewer.id, "level": "view"})),
        )
        .await;
    assert!(status == 200 || status == 201, "{status} {granted}");

    // Several paragraphs with characters of every width, so pages cut inside them.
    let body: String = (0..40)
        .map(|n| format!("Paragraph {n}: the glacier café — naïve résumé ✓ 雪 {}\n\n", "word ".repeat(n % 7 + 3)))
        .collect();
    let name = "notes draft été.md";
    let accepted = stack.upload_document(&owner, &kb, name, body.as_bytes()).await;
    let id = accepted["tracking_id"].as_str().expect("tracking id").to_owned();
    stack.indexed(&owner, &kb).await;

    for reader in [&owner, &viewer] {
        let (status, document) = stack.call_json(reader, Method::GET, &format!("/rag/documents/{id}"), None).await;
        assert_eq!(status, 200, "{document}");
        assert_eq!((document["id"].as_str(), document["tracking_id"].as_str()), (Some(id.as_str()), Some(id.as_str())));
        assert_eq!((document["status"].as_str(), document["kb_id"].as_str()), (Some("done"), Some(kb.as_str())));
        assert!(document["chunk_count"].as_i64().is_some_and(|n| n > 0), "{document}");
        assert_eq!((document["has_file"].as_bool(), document["has_text"].as_bool()), (Some(true), Some(true)));
        assert_eq!(document["filename"], name);
        let (status, tracked) =
            stack.call_json(reader, Method::GET, &format!("/rag/documents/by-tracking/{id}"), None).await;
        assert_eq!((status, &tracked), (200, &document));

        // Small pages, then one page: both give back exactly the text that was indexed.
        for limit in [997, 1_000_000] {
            let mut joined = String::new();
            let mut offset = Some(0u64);
            while let Some(at) = offset {
                let path = format!("/rag/documents/{id}/text?offset={at}&limit={limit}");
                let (status, page) = stack.call_json(reader, Method::GET, &path, None).await;
                assert_eq!(status, 200, "{page}");
                assert_eq!(page["offset"].as_u64(), Some(at));
                assert_eq!(page["total_chars"].as_u64(), Some(body.chars().count() as u64));
                joined.push_str(page["text"].as_str().expect("text"));
                offset = page["next_offset"].as_u64();
            }
            assert_eq!(joined, body, "limit {limit}");
        }

        let response = stack
            .http
            .get(stack.url(&format!("/rag/documents/{id}/file")))
            .header("authorization", reader.bearer())
            .send()
            .await
            .expect("file");
        assert_eq!(response.status().as_u16(), 302);
        let location = response.headers()["location"].to_str().expect("location").to_owned();
        let download = reqwest::get(&location).await.expect("presigned get");
        assert_eq!(download.status().as_u16(), 200);
        let disposition = download.headers()["content-disposition"].to_str().expect("disposition").to_owned();
        assert!(disposition.starts_with("attachment; filename=\"notes_draft__t_.md\""), "{disposition}");
        assert!(disposition.contains("filename*=UTF-8''notes%20draft%20%C3%A9t%C3%A9.md"), "{disposition}");
        assert_eq!(download.bytes().await.expect("bytes").as_ref(), body.as_bytes());
    }

    // Bad pages are refused by name.
    for (query, field) in [("offset=-1", "offset"), ("limit=0", "limit"), ("limit=1000001", "limit")] {
        let path = format!("/rag/documents/{id}/text?{query}");
        let (status, refusal) = stack.call_json(&owner, Method::GET, &path, None).await;
        assert_eq!(status, 400, "{refusal}");
        assert!(refusal["error"]["details"]["fields"][field].is_string(), "{refusal}");
    }

    // A stranger reads exactly what anyone reads for an id that was never there.
    let absent = Uuid::new_v4().to_string();
    let nothing = refusals(&stack, &stranger, &absent).await;
    assert!(nothing.iter().all(|(status, _)| *status == 404), "{nothing:?}");
    assert_eq!(refusals(&stack, &stranger, &id).await, nothing);
    // A viewer may read but not delete; the owner deletes, and then it is gone for all.
    let (status, _) = stack.call(&viewer, Method::DELETE, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(status, 404);
    let (status, _) = stack.call(&owner, Method::DELETE, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(status, 204);
    assert_eq!(refusals(&stack, &owner, &id).await, nothing);
    assert_eq!(refusals(&stack, &viewer, &id).await, nothing);
}

#[tokio::test]
async fn a_document_not_parsed_yet_has_no_text_and_a_presigned_one_not_landed_has_no_file() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let kb = local_base(&stack, &owner).await;
    let body = json!({"filename": "later.md", "size": 12, "mime_type": "text/markdown"});
    let (status, intent): (u16, Value) =
        stack.call_json(&owner, Method::POST, &format!("/kb/{kb}/documents/uploads"), Some(body)).await;
    assert_eq!(status, 201, "{intent}");
    let id = intent["tracking_id"].as_str().expect("id");
    let (status, document) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(status, 200, "{document}");
    assert_eq!((document["status"].as_str(), document["has_text"].as_bool()), (Some("processing"), Some(false)));
    let (status, text) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
    assert_eq!((status, text["error"]["message"].as_str()), (404, Some("Document text not found")), "{text}");
    let (status, file) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}/file"), None).await;
    assert_eq!((status, file["error"]["message"].as_str()), (404, Some("Document file not found")), "{file}");
}

#[tokio::test]
async fn landed_bytes_not_yet_judged_are_never_handed_out() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let kb = local_base(&stack, &owner).await;
    let kb_id = Uuid::parse_str(&kb).expect("uuid");
    let db = stack.db().await;
    let collection: String =
        db.query_one("SELECT collection_name FROM knowledge_bases WHERE id = $1", &[&kb_id]).await.expect("kb").get(0);
    // The window between a presigned PUT and its verdict, held open: the row of a presigned
    // upload whose bytes are in the bucket (under a key no notification reaches, so no parse
    // delivery closes the window) and not yet checked.
    let id = Uuid::new_v4();
    let key = format!("documents/{kb}/{}/landed.md", id.simple());
    db.execute(
        "INSERT INTO rag_documents (id, collection_name, kb_id, owner_id, filename, filesize, filetype, status, \
         storage_path, upload_expires_at, bytes_judged) \
         VALUES ($1, $2, $3, $4, 'landed.md', 6, 'md', 'processing', $5, now() + interval '1 hour', false)",
        &[&id, &collection, &kb_id, &owner.id, &key],
    )
    .await
    .expect("row");
    stack.put_plain(&key, b"# Hi\n").await;
    let path = format!("/rag/documents/{id}/file");
    let (status, file) = stack.call_json(&owner, Method::GET, &path, None).await;
    assert_eq!((status, file["error"]["message"].as_str()), (404, Some("Document file not found")), "{file}");
    // Once the bytes pass the check, the same route links to them.
    stack.store(1).await.mark_bytes_judged(id).await.expect("judged");
    let (status, _) = stack.call(&owner, Method::GET, &path, None).await;
    assert_eq!(status, 302);
}

#[tokio::test]
async fn a_document_whose_file_the_reader_refused_is_not_handed_out() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let kb = local_base(&stack, &owner).await;
    // An Office file with an entity declaration: its name, type and magic pass where it lands;
    // the reader refuses it.
    let bomb = sluice_fixtures::zip(&[
        ("[Content_Types].xml", "<Types/>"),
        (
            "word/document.xml",
            "<!DOCTYPE d [<!ENTITY a \"aaaa\">]><w:document><w:body><w:p><w:r><w:t>&a;</w:t></w:r></w:p></w:body></w:document>",
        ),
    ]);
    let mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    let body = json!({"filename": "bomb.docx", "size": bomb.len(), "mime_type": mime});
    let (status, intent) =
        stack.call_json(&owner, Method::POST, &format!("/kb/{kb}/documents/uploads"), Some(body)).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(stack.put_presigned(&intent, bomb).await, 200);
    let id = intent["tracking_id"].as_str().expect("id").to_owned();
    sluice_e2e::eventually("the refused document fails", std::time::Duration::from_secs(60), async || {
        let (_, document) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}"), None).await;
        document["status"] == "error"
    })
    .await;
    let (_, document) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}"), None).await;
    assert!(document["error_message"].as_str().expect("message").starts_with("parse: "), "{document}");
    let (status, file) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}/file"), None).await;
    assert_eq!((status, file["error"]["message"].as_str()), (404, Some("Document file not found")), "{file}");
}
