//! What the web app's page does, done by a real browser (headless Chromium) from an origin
//! of its own against the running stack, whose bucket carries the template's CORS rules and
//! whose door answers preflights with the template's API rules: it asks for an upload
//! intent, PUTs a file too large for the inline route straight to the presigned URL with
//! exactly the headers the intent names (a preflighted cross-origin request), waits for the
//! verdict, and fetches the file back through the API's 302 to a presigned GET. A header or
//! method the rules do not allow makes the browser refuse, and the page reports the error.

use sluice_e2e::{Stack, User};
use std::time::Duration;

const PAGE: &str = r#"<!doctype html>
<html><body><script id="config" type="application/json">CONFIG</script><script>
(async () => {
  const config = JSON.parse(document.getElementById('config').textContent);
  const seen = {};
  const auth = {authorization: 'Bearer ' + config.token};
  try {
    const line = 'north,1200\nsouth,900\n';
    const text = 'region,amount\n' + line.repeat(Math.ceil(config.size / line.length));
    const bytes = new TextEncoder().encode(text);
    seen.size = bytes.length;
    let answer = await fetch(config.api + '/files/uploads', {method: 'POST',
      headers: {...auth, 'content-type': 'application/json'},
      body: JSON.stringify({filename: 'ledger.csv', size: bytes.length, mime_type: 'text/csv'})});
    seen.intent = answer.status;
    const intent = await answer.json();
    // Exactly the headers the intent names; the browser sets the length itself.
    const headers = {};
    for (const [name, value] of Object.entries(intent.upload.headers)) {
      if (name.toLowerCase() !== 'content-length') headers[name] = value;
    }
    seen.sent_headers = Object.keys(headers).sort();
    answer = await fetch(intent.upload.url, {method: 'PUT', headers, body: bytes});
    seen.put = answer.status;
    seen.etag = answer.headers.get('etag');
    for (let i = 0; i < 240; i++) {
      answer = await fetch(config.api + '/files/' + intent.id, {headers: auth});
      const file = await answer.json();
      seen.status = file.status;
      if (file.status !== 'pending') break;
      await new Promise(done => setTimeout(done, 250));
    }
    answer = await fetch(config.api + '/files/' + intent.id + '/content', {headers: auth});
    seen.download = answer.status;
    seen.redirected = answer.redirected;
    seen.download_host = new URL(answer.url).host;
    // Exposed only when a bucket rule matched the origin the browser sent after the
    // redirect (`null`), as S3 requires; the emulator answers an unmatched origin without it.
    seen.disposition = answer.headers.get('content-disposition');
    const back = new Uint8Array(await answer.arrayBuffer());
    seen.same_bytes = back.length === bytes.length && back.every((b, i) => b === bytes[i]);
  } catch (error) {
    seen.error = String(error);
  }
  await fetch('/report', {method: 'POST', body: JSON.stringify(seen)});
})();
</script></body></html>"#;

#[tokio::test]
async fn a_browser_puts_a_large_file_to_its_presigned_url_and_downloads_it_through_the_redirect() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let config = serde_json::json!({
        "api": stack.url(""),
        "token": user.token,
        // Over the inline ceiling: the presigned route is the only one for such a file.
        "size": 5 * 1024 * 1024,
    });
    let page = PAGE.replace("CONFIG", &config.to_string());
    let seen = sluice_e2e::browser::run_page(page, Duration::from_secs(120)).await;
    assert!(seen.get("error").is_none(), "the browser refused a step: {seen}");
    assert_eq!(seen["intent"], 201, "{seen}");
    assert!(seen["size"].as_u64().is_some_and(|s| s > 4 * 1024 * 1024), "{seen}");
    let sent: Vec<&str> = seen["sent_headers"].as_array().expect("headers").iter().filter_map(|h| h.as_str()).collect();
    assert!(sent.contains(&"if-none-match") && sent.contains(&"x-amz-server-side-encryption"), "{seen}");
    assert_eq!(seen["put"], 200, "{seen}");
    assert!(seen["etag"].is_string(), "ETag is exposed to the page: {seen}");
    assert_eq!(seen["status"], "ready", "{seen}");
    assert_eq!((seen["download"].clone(), seen["redirected"].clone()), (200.into(), true.into()), "{seen}");
    assert_ne!(seen["download_host"].as_str(), stack.url("").split('/').nth(2), "served by the bucket: {seen}");
    assert!(seen["disposition"].as_str().is_some_and(|d| d.contains("ledger.csv")), "{seen}");
    assert_eq!(seen["same_bytes"], true, "{seen}");
}
