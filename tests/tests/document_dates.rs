//! The date the search filters read is the document's own, on the running stack: files with
//! known creation dates in each format (PDF, DOCX, ODT, an Outlook message from the public
//! corpus, a photographed page with EXIF) keep it, say where it came from, and a `date_from`
//! /`date_to` filter on that day keeps exactly them; a file with no date of its own has the
//! upload's day.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::{Stack, User};
use sluice_fixtures::{corpus_file as corpus, docx_created, jpeg_taken, odt_created, pdf_with_info, scanned_page};
use time::OffsetDateTime;

#[tokio::test]
async fn each_document_keeps_its_own_date_and_the_date_filters_find_it_by_that_day() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let body = json!({"name": "Dated", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let today = OffsetDateTime::now_utc().date().to_string();
    let photo = scanned_page("The harbour crane was photographed at dusk.", 150, 0.0, 5);
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "minutes.pdf",
            pdf_with_info(&["Minutes of the orchard society"], "/CreationDate (D:20190304101112+01'00')"),
            "2019-03-04",
            "pdf_creation_date",
        ),
        (
            "letter.docx",
            docx_created(&["A letter about the bridge repairs"], "2018-11-12T08:00:00Z"),
            "2018-11-12",
            "dcterms_created",
        ),
        (
            "report.odt",
            odt_created(&["A report on the tide tables"], "2017-02-03T04:05:06"),
            "2017-02-03",
            "odf_creation_date",
        ),
        ("quick.msg", corpus("apache-poi/quick.msg"), "2007-06-14", "msg_date"),
        ("crane.jpg", jpeg_taken(&photo, "2016:07:08 18:30:00"), "2016-07-08", "exif_date_time_original"),
        ("undated.md", b"# Undated\n\nA note with no date of its own.\n".to_vec(), today.as_str(), "upload"),
    ];
    let mut ids = Vec::new();
    for (name, bytes, _, _) in &cases {
        let accepted = stack.upload_document(&owner, kb, name, bytes).await;
        ids.push(accepted["tracking_id"].as_str().expect("id").to_owned());
    }
    stack.indexed(&owner, kb).await;

    for ((name, _, day, source), id) in cases.iter().zip(&ids) {
        let (status, document) = stack.call_json(&owner, Method::GET, &format!("/rag/documents/{id}"), None).await;
        assert_eq!(status, 200, "{document}");
        assert_eq!(document["status"], "done", "{name}: {document}");
        assert_eq!(
            (document["document_date"].as_str(), document["date_source"].as_str()),
            (Some(*day), Some(*source)),
            "{name}"
        );

        // That day alone keeps this document's chunks, each saying where its date came from.
        let search = json!({"query": "what does this document say", "collections": [collection], "top_k": 20,
            "filters": {"date_from": day, "date_to": day}});
        let (status, found) = stack.call_json(&owner, Method::POST, "/rag/search", Some(search)).await;
        assert_eq!(status, 200, "{found}");
        let results = found["results"].as_array().expect("results");
        assert!(!results.is_empty(), "{name}: {found}");
        for result in results {
            assert_eq!(result["document_id"].as_str(), Some(id.as_str()), "{name}: {result}");
            assert_eq!(result["metadata"]["date_source"].as_str(), Some(*source), "{name}: {result}");
        }
    }

    // From 2018 on: the PDF, the DOCX and the undated note; nothing older.
    let search = json!({"query": "what does this document say", "collections": [collection], "top_k": 20,
        "filters": {"date_from": "2018-01-01"}});
    let (status, found) = stack.call_json(&owner, Method::POST, "/rag/search", Some(search)).await;
    assert_eq!(status, 200, "{found}");
    let mut kept: Vec<&str> =
        found["results"].as_array().expect("results").iter().map(|r| r["filename"].as_str().expect("name")).collect();
    kept.sort_unstable();
    kept.dedup();
    assert_eq!(kept, ["letter.docx", "minutes.pdf", "undated.md"], "{found}");
}
