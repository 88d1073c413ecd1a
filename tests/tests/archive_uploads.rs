//! Archives through the upload API on the running stack: every hostile archive (one per
//! rule, zip and tar.gz) is `400` with its reason and leaves nothing; a benign one is
//! stored, its text is its member list and its reference names its workspace folder.

use sluice_e2e::{Stack, User};
use sluice_fixtures::{RawZipEntry, hostile_archives, raw_zip, tar_gz};

#[tokio::test]
async fn every_hostile_archive_is_400_with_its_reason_and_leaves_nothing() {
    let stack = Stack::from_env().await;
    let user = User::new();
    for (name, bytes, reason) in hostile_archives() {
        let (status, body) = stack.upload(&user, name, Some("application/octet-stream"), bytes).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["error"]["details"]["reason"], reason, "{name}: {body}");
        assert!(body["error"]["details"]["fields"]["file"].is_string(), "{name}: the field is named");
    }
    assert_eq!(stack.stored_for(&user).await, (0, 0), "a refused archive left an object or a row");
}

#[tokio::test]
async fn a_file_that_is_not_the_archive_its_name_says_is_415() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, body) = stack.upload(&user, "repo.zip", None, b"%PDF-1.4\n%%EOF\n".to_vec()).await;
    assert_eq!(status, 415, "{body}");
    assert_eq!(body["error"]["details"]["reason"], "content_mismatch");
    assert_eq!(stack.stored_for(&user).await, (0, 0));
}

#[tokio::test]
async fn a_benign_archive_lists_its_members_and_names_its_workspace_folder() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let zip = raw_zip(&[
        RawZipEntry::folder("repo"),
        RawZipEntry::file("repo/README.md", b"# Repo\n"),
        RawZipEntry::file("repo/src/app.py", b"print('hello')\n").deflated(),
    ]);
    let tar = tar_gz(&[(b"repo/README.md", b'0', b"# Repo\n"), (b"repo/src/app.py", b'0', b"print('hello')\n")]);
    for (name, bytes, stem) in [("repo.zip", zip, "repo"), ("site backup.tar.gz", tar, "site_backup")] {
        let (status, body) = stack.upload(&user, name, None, bytes).await;
        assert_eq!(status, 201, "{name}: {body}");
        assert_eq!(body["file_type"], "archive");
        let id = body["id"].as_str().expect("id");
        let folder = format!("uploads/{}-{stem}/", &id.replace('-', "")[..8]);
        assert_eq!(body["ref"]["workspace_folder"], folder.as_str(), "{name}");
        assert!(body["preview"].as_str().expect("preview").contains("repo/README.md"), "{name}: {body}");
        let text = stack
            .http
            .get(stack.url(&format!("/files/{id}/text")))
            .header("authorization", user.bearer())
            .send()
            .await
            .expect("text")
            .text()
            .await
            .expect("body");
        assert!(text.contains("repo/src/app.py\n"), "{name}: {text}");
    }
    assert_eq!(stack.stored_for(&user).await, (2, 2));
}
