//! Chat uploads end to end on the running local stack: HTTP with real tokens in, the real
//! emulator's S3 and a real PostgreSQL behind.

use serde_json::{Value, json};
use sluice_e2e::{Stack, User, tiny_png};
use std::collections::BTreeSet;
use uuid::Uuid;

async fn upload(stack: &Stack, user: &User, name: &str, mime: Option<&str>, bytes: Vec<u8>) -> (u16, Value) {
    stack.upload(user, name, mime, bytes).await
}

async fn get(stack: &Stack, user: &User, path: &str) -> reqwest::Response {
    stack.http.get(stack.url(path)).header("authorization", user.bearer()).send().await.expect("request")
}

/// What the stack holds for a user: their object keys and their rows.
async fn holdings(stack: &Stack, user: &User) -> (BTreeSet<String>, i64) {
    let keys = stack.keys_under(&format!("media/{}/", user.id)).await;
    let db = stack.db().await;
    let rows: i64 =
        db.query_one("SELECT count(*) FROM chat_files WHERE user_id = $1", &[&user.id]).await.expect("count").get(0);
    (keys, rows)
}

async fn storage_path(stack: &Stack, id: &str) -> String {
    let db = stack.db().await;
    let id = Uuid::parse_str(id).expect("uuid");
    db.query_one("SELECT storage_path FROM chat_files WHERE id = $1", &[&id]).await.expect("row").get(0)
}

#[tokio::test]
async fn every_text_type_answers_its_preview_and_is_stored_under_kms() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let key_arn = stack.kms_key_arn().await;
    let cp1250 = cp1250_bytes("<?xml version=\"1.0\" encoding=\"windows-1250\"?>\n<miasto>Łódź</miasto>\n");
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain("zażółć\ngęślą\njaźń\nczwarta".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    let cases: Vec<(&str, Option<&str>, Vec<u8>, &str)> = vec![
        (
            "notes.txt",
            Some("text/plain"),
            b"first line\nsecond line\nthird line\nfourth line\n".to_vec(),
            "first line\nsecond line\nthird line",
        ),
        ("bom.txt", Some("text/plain"), b"\xef\xbb\xbfwith a BOM\n".to_vec(), "with a BOM"),
        ("polish.txt", Some("text/plain"), utf16, "zażółć\ngęślą\njaźń"),
        (
            "legacy.txt",
            None,
            b"caf\xe9 cr\xe8me br\xfbl\xe9e, na\xefve fa\xe7ade\n".to_vec(),
            "café crème brûlée, naïve façade",
        ),
        ("README.md", Some("text/markdown"), b"# Title\n\nBody text.\n".to_vec(), "# Title\n\nBody text."),
        (
            "report.csv",
            Some("text/csv"),
            b"month,total\njan,10\nfeb,20\nmar,30\n".to_vec(),
            "month,total\njan,10\nfeb,20",
        ),
        ("data.json", Some("application/json"), br#"{"a": 1}"#.to_vec(), r#"{"a": 1}"#),
        (
            "city.xml",
            Some("text/xml"),
            cp1250,
            "<?xml version=\"1.0\" encoding=\"windows-1250\"?>\n<miasto>Łódź</miasto>",
        ),
        (
            "page.html",
            Some("text/html"),
            b"<html><body>Hello</body></html>".to_vec(),
            "<html><body>Hello</body></html>",
        ),
        ("nul.txt", Some("text/plain"), b"before\0after\n".to_vec(), "beforeafter"),
    ];
    for (name, mime, bytes, expected_preview) in cases {
        let size = bytes.len() as i64;
        let (status, body) = upload(&stack, &user, name, mime, bytes).await;
        assert_eq!(status, 201, "{name}: {body}");
        assert_eq!(body["preview"], expected_preview, "{name}");
        assert_eq!(body["file_type"], "text", "{name}");
        assert_eq!(body["status"], "ready");
        assert_eq!(body["size"], size);
        assert_eq!(body["ref"]["type"], "attachment_ref");
        // The contract's attachment id: the file's id as 32 hex digits and its extension.
        let hex = body["id"].as_str().expect("id").replace('-', "");
        let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).expect("named with an extension");
        assert_eq!(body["ref"]["attachment_id"], format!("{hex}.{extension}"), "{name}");
        assert_eq!(body["ref"]["uri"], format!("sluice://attachment/{hex}.{extension}"));
        assert_eq!(body["ref"]["read_policy"], "owner_checked_upload");
        assert_eq!(body["ref"]["checksum_sha256"], body["checksum_sha256"]);

        let key = storage_path(&stack, body["id"].as_str().expect("id")).await;
        assert!(key.starts_with(&format!("media/{}/", user.id)), "{key}");
        let head = stack.s3.head_object().bucket(&stack.bucket).key(&key).send().await.expect("object exists");
        assert_eq!(head.server_side_encryption().map(|s| s.as_str()), Some("aws:kms"), "{name}");
        assert_eq!(head.ssekms_key_id(), Some(key_arn.as_str()), "{name}");
    }
    let text = get(&stack, &user, "/files").await;
    assert_eq!(text.status().as_u16(), 404, "a bare /files is no route");
}

/// windows-1250 bytes for Polish text, built by hand so the test needs no encoder.
fn cp1250_bytes(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| match c {
            'Ł' => 0xA3,
            'ó' => 0xF3,
            'd' => b'd',
            'ź' => 0x9F,
            c if c.is_ascii() => c as u8,
            other => panic!("no cp1250 byte for {other}"),
        })
        .collect()
}

#[tokio::test]
async fn the_stored_mime_is_canonical_and_images_without_text_have_no_preview() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, body) = upload(&stack, &user, "photo.png", Some("application/octet-stream"), tiny_png(640, 480)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["mime_type"], "image/png");
    assert_eq!(body["file_type"], "image");
    assert_eq!(body["preview"], Value::Null);
    assert_eq!(body["parse_note"], Value::Null, "a picture without text is not a failure: {body}");
    assert_eq!((body["ref"]["width"].as_u64(), body["ref"]["height"].as_u64()), (Some(640), Some(480)));
    let tiff = sluice_fixtures::tiff(&[(8, 8)]);
    let (status, body) = upload(&stack, &user, "scan.tiff", Some("application/octet-stream"), tiff).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["mime_type"], "image/tiff");
    let id = body["id"].as_str().expect("id");
    let text = get(&stack, &user, &format!("/files/{id}/text")).await;
    assert_eq!(text.status().as_u16(), 404, "an image has no text");
}

#[tokio::test]
async fn reading_back_text_content_and_details() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let bytes = b"alpha\nbeta\ngamma\ndelta\n".to_vec();
    let (status, body) = upload(&stack, &user, "greek.txt", Some("text/plain"), bytes.clone()).await;
    assert_eq!(status, 201);
    let id = body["id"].as_str().expect("id");

    let details = get(&stack, &user, &format!("/files/{id}")).await;
    assert_eq!(details.status().as_u16(), 200);
    let details: Value = details.json().await.expect("json");
    for field in ["id", "filename", "mime_type", "size", "file_type", "status", "preview", "created_at", "ref"] {
        assert_eq!(details[field], body[field], "{field}");
    }
    assert_eq!(details["message_id"], Value::Null);
    assert_eq!(details["rejection"], Value::Null);

    let text = get(&stack, &user, &format!("/files/{id}/text")).await;
    assert_eq!(text.status().as_u16(), 200);
    assert!(text.headers()["content-type"].to_str().expect("header").starts_with("text/plain"));
    assert_eq!(text.text().await.expect("text"), "alpha\nbeta\ngamma\ndelta\n");

    let content = get(&stack, &user, &format!("/files/{id}/content")).await;
    assert_eq!(content.status().as_u16(), 302);
    let location = content.headers()["location"].to_str().expect("location").to_owned();
    assert!(location.contains("X-Amz-Signature") && location.contains("X-Amz-Expires"), "{location}");
    let downloaded = reqwest::get(&location).await.expect("presigned get");
    assert_eq!(downloaded.status().as_u16(), 200);
    assert_eq!(downloaded.bytes().await.expect("bytes").to_vec(), bytes);
}

#[tokio::test]
async fn another_users_file_is_answered_exactly_like_an_absent_one() {
    let stack = Stack::from_env().await;
    let (owner, stranger) = (User::new(), User::new());
    let (status, body) = upload(&stack, &owner, "mine.txt", Some("text/plain"), b"private\n".to_vec()).await;
    assert_eq!(status, 201);
    let id = body["id"].as_str().expect("id").to_owned();
    let absent = Uuid::new_v4();
    for suffix in ["", "/content", "/text"] {
        let theirs = get(&stack, &stranger, &format!("/files/{id}{suffix}")).await;
        let missing = get(&stack, &stranger, &format!("/files/{absent}{suffix}")).await;
        assert_eq!(theirs.status().as_u16(), 404, "{suffix}");
        assert_eq!(missing.status().as_u16(), 404, "{suffix}");
        assert_eq!(theirs.bytes().await.expect("body"), missing.bytes().await.expect("body"), "{suffix}");
    }
    let delete =
        stack.http.delete(stack.url(&format!("/files/{id}"))).header("authorization", stranger.bearer()).send();
    let delete = delete.await.expect("delete");
    assert_eq!(delete.status().as_u16(), 404);
    assert_eq!(get(&stack, &owner, &format!("/files/{id}")).await.status().as_u16(), 200, "still there");
}

/// A refused upload: name, declared type, bytes, expected status and error code.
type RefusalCase = (&'static str, Option<&'static str>, Vec<u8>, u16, &'static str);

#[tokio::test]
async fn refusals_leave_nothing_behind() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (_, accepted) = upload(&stack, &user, "keep.txt", Some("text/plain"), b"kept\n".to_vec()).await;
    assert_eq!(accepted["status"], "ready");
    let before = holdings(&stack, &user).await;
    assert_eq!(before.1, 1);

    let limit = 10 * 1024 * 1024;
    let cases: Vec<RefusalCase> = vec![
        ("big.txt", Some("text/plain"), vec![b'a'; limit + 1], 413, "file_too_large"),
        ("setup.exe", Some("application/x-msdownload"), b"MZ\x90\0\x03\0\0\0".to_vec(), 415, "unsupported_media_type"),
        ("photo.txt", Some("text/plain"), tiny_png(1, 1), 415, "unsupported_media_type"),
        ("notes.txt", Some("image/png"), b"hello".to_vec(), 415, "unsupported_media_type"),
        ("fake.pdf", Some("application/pdf"), b"not a pdf at all".to_vec(), 415, "unsupported_media_type"),
        ("empty.txt", Some("text/plain"), Vec::new(), 400, "invalid_request"),
    ];
    for (name, mime, bytes, expected_status, code) in cases {
        let (status, body) = upload(&stack, &user, name, mime, bytes).await;
        assert_eq!(status, expected_status, "{name}: {body}");
        assert_eq!(body["error"]["code"], code, "{name}");
        assert!(body["error"]["details"]["fields"]["file"].is_string(), "{name}: {body}");
        assert_eq!(holdings(&stack, &user).await, before, "{name} left something behind");
    }
    // A body past the request cap is refused at the door, before any function runs.
    let huge = vec![b'a'; 52 * 1024 * 1024];
    let (status, _) = upload(&stack, &user, "huge.txt", Some("text/plain"), huge).await;
    assert_eq!(status, 413);
    assert_eq!(holdings(&stack, &user).await, before);
}

#[tokio::test]
async fn a_file_of_exactly_the_limit_is_accepted() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let mut bytes = b"x,y\n".repeat(10 * 1024 * 1024 / 4);
    bytes.truncate(10 * 1024 * 1024);
    let (status, body) = upload(&stack, &user, "limit.csv", Some("text/csv"), bytes).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn hostile_filenames_are_stored_safely_and_never_collide() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, first) =
        upload(&stack, &user, "../../etc/passwd.txt", Some("text/plain"), b"root:x:0:0\n".to_vec()).await;
    assert_eq!(status, 201, "{first}");
    let (_, second) = upload(&stack, &user, "../../etc/passwd.txt", Some("text/plain"), b"other\n".to_vec()).await;
    let first_key = storage_path(&stack, first["id"].as_str().expect("id")).await;
    let second_key = storage_path(&stack, second["id"].as_str().expect("id")).await;
    assert_ne!(first_key, second_key);
    for key in [&first_key, &second_key] {
        let prefix = format!("media/{}/", user.id);
        let name = key.strip_prefix(&prefix).expect("under the user's prefix");
        assert!(name.ends_with("_etc_passwd.txt") && !name.contains('/') && !name.contains(".."), "{key}");
    }
    assert_eq!(first["filename"], "../../etc/passwd.txt", "the original name is kept for display");
    assert_eq!(stack.keys_under(&format!("media/{}/", user.id)).await.len(), 2);
}

#[tokio::test]
async fn delete_removes_row_and_object() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (_, body) = upload(&stack, &user, "gone.txt", Some("text/plain"), b"bye\n".to_vec()).await;
    let id = body["id"].as_str().expect("id");
    let key = storage_path(&stack, id).await;
    let delete = stack.http.delete(stack.url(&format!("/files/{id}"))).header("authorization", user.bearer()).send();
    assert_eq!(delete.await.expect("delete").status().as_u16(), 204);
    assert_eq!(get(&stack, &user, &format!("/files/{id}")).await.status().as_u16(), 404);
    assert!(stack.s3.head_object().bucket(&stack.bucket).key(&key).send().await.is_err(), "object removed");
    let again = stack.http.delete(stack.url(&format!("/files/{id}"))).header("authorization", user.bearer()).send();
    assert_eq!(again.await.expect("delete").status().as_u16(), 404);
}

#[tokio::test]
async fn linking_takes_only_the_callers_own_unlinked_files_all_or_nothing() {
    let stack = Stack::from_env().await;
    let (user, other) = (User::new(), User::new());
    let (_, a) = upload(&stack, &user, "a.txt", Some("text/plain"), b"a\n".to_vec()).await;
    let (_, b) = upload(&stack, &user, "b.txt", Some("text/plain"), b"b\n".to_vec()).await;
    let (_, theirs) = upload(&stack, &other, "c.txt", Some("text/plain"), b"c\n".to_vec()).await;
    let (a, b, theirs) =
        (a["id"].as_str().expect("id"), b["id"].as_str().expect("id"), theirs["id"].as_str().expect("id"));
    let link = |message: Uuid, ids: Vec<&str>| {
        stack
            .http
            .post(stack.url(&format!("/messages/{message}/attachments")))
            .header("authorization", user.bearer())
            .json(&json!({"file_ids": ids}))
            .send()
    };
    let message = Uuid::new_v4();
    let refused = link(message, vec![a, theirs]).await.expect("link");
    assert_eq!(refused.status().as_u16(), 404);
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["error"]["details"]["file_ids"], json!([theirs]));
    let a_now: Value = get(&stack, &user, &format!("/files/{a}")).await.json().await.expect("json");
    assert_eq!(a_now["message_id"], Value::Null, "a refused request changes nothing");

    let linked = link(message, vec![a, b]).await.expect("link");
    assert_eq!(linked.status().as_u16(), 200);
    let linked: Value = linked.json().await.expect("json");
    assert_eq!(linked, json!({"message_id": message, "file_ids": [a, b]}));
    let a_now: Value = get(&stack, &user, &format!("/files/{a}")).await.json().await.expect("json");
    assert_eq!(a_now["message_id"], json!(message));

    let relink = link(Uuid::new_v4(), vec![a]).await.expect("link");
    assert_eq!(relink.status().as_u16(), 404, "a linked file cannot be pulled onto another message");
    let bad = link(message, vec!["not-a-uuid"]).await.expect("link");
    assert_eq!(bad.status().as_u16(), 400);
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401() {
    let stack = Stack::from_env().await;
    let none = stack.http.get(stack.url(&format!("/files/{}", Uuid::new_v4()))).send().await.expect("request");
    assert_eq!(none.status().as_u16(), 401);
    let forged = stack
        .http
        .get(stack.url(&format!("/files/{}", Uuid::new_v4())))
        .header("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl")
        .send()
        .await
        .expect("request");
    assert_eq!(forged.status().as_u16(), 401);
}

#[tokio::test]
async fn an_image_carries_what_the_web_app_says_of_it_in_its_reference() {
    let stack = Stack::from_env().await;
    let user = User::with(None, &[], false);
    let photo = sluice_fixtures::png(64, 48, 5);
    let form = |name: &str, bytes: Vec<u8>, fields: &[(&str, &str)]| {
        let mut form = sluice_e2e::file_form(name, None, bytes);
        for (field, value) in fields {
            form = form.text(field.to_string(), value.to_string());
        }
        form
    };
    let hints = [("vision", "true"), ("vision_model", "gpt-4o"), ("gallery_id", "gal_2026:harbour")];
    let (status, file) = stack.post_form(&user, "/files/upload", form("quay.png", photo.clone(), &hints)).await;
    assert_eq!(status, 201, "{file}");
    let reference = &file["ref"];
    assert_eq!(
        [
            &reference["width"],
            &reference["height"],
            &reference["vision"],
            &reference["vision_model"],
            &reference["gallery_id"]
        ],
        [&json!(64), &json!(48), &json!(true), &json!("gpt-4o"), &json!("gal_2026:harbour")],
        "{file}"
    );
    let id = file["id"].as_str().expect("id");
    let read: Value = get(&stack, &user, &format!("/files/{id}")).await.json().await.expect("json");
    assert_eq!(read["ref"], *reference, "read back as it was answered");

    // Refused, naming the field, and nothing kept: a bad value, and hints on a file that is
    // no image.
    let before = holdings(&stack, &user).await;
    for (name, bytes, fields, field) in [
        ("quay.png", photo.clone(), vec![("vision", "maybe")], "vision"),
        ("quay.png", photo.clone(), vec![("gallery_id", "../../etc")], "gallery_id"),
        ("notes.txt", b"plain notes".to_vec(), vec![("vision_model", "gpt-4o")], "vision_model"),
    ] {
        let (status, refused) = stack.post_form(&user, "/files/upload", form(name, bytes, &fields)).await;
        assert_eq!(status, 400, "{refused}");
        assert!(refused["error"]["details"]["fields"].get(field).is_some(), "{field}: {refused}");
    }
    assert_eq!(holdings(&stack, &user).await, before);

    // A presigned upload declares them with the rest.
    let intent = json!({"filename": "quay.png", "size": photo.len(), "mime_type": "image/png",
        "vision": false, "gallery_id": "gal_9"});
    let (status, created) = stack.call_json(&user, reqwest::Method::POST, "/files/uploads", Some(intent)).await;
    assert_eq!(status, 201, "{created}");
    let pending: Value = get(&stack, &user, &format!("/files/{}", created["id"].as_str().expect("id")))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        (&pending["ref"]["vision"], &pending["ref"]["gallery_id"]),
        (&json!(false), &json!("gal_9")),
        "{pending}"
    );
    let refused = json!({"filename": "a.txt", "size": 3, "mime_type": "text/plain", "vision": true});
    let (status, answer) = stack.call_json(&user, reqwest::Method::POST, "/files/uploads", Some(refused)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["details"]["fields"].get("vision").is_some(), "{answer}");
    // A declaration is read into its type: a field it does not have is refused by name.
    let before = holdings(&stack, &user).await;
    let misspelt = json!({"filename": "a.txt", "size": 3, "mime_type": "text/plain", "galery_id": "g"});
    let (status, answer) = stack.call_json(&user, reqwest::Method::POST, "/files/uploads", Some(misspelt)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["details"]["fields"].get("galery_id").is_some(), "{answer}");
    assert_eq!(holdings(&stack, &user).await, before, "nothing is left behind");
}
