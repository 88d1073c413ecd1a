//! A real browser for the tests: headless Chromium (Debian's `chromium`) loads a page from
//! an origin of its own — a loopback server the test starts at `SLUICE_TEST_PAGE_ADDR`, the
//! one origin the test stack allows, so every call the page makes to the API or the bucket
//! is cross-origin, as the web app's are — and the page posts what it saw back to that
//! server as JSON. One page at a time holds that address. The browser is killed when the report arrives, or when
//! the wait runs out.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Serves `html` at `/` of a fresh loopback origin, opens it in headless Chromium, and
/// returns the JSON the page posts to `/report`; fails after `limit`.
pub async fn run_page(html: String, limit: Duration) -> serde_json::Value {
    // The origin the test stack allows (SLUICE_TEST_PAGE_ADDR); a free port elsewhere.
    let address = std::env::var("SLUICE_TEST_PAGE_ADDR").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    // A port a moment ago in use (a previous page's connections closing) is retried briefly.
    let mut tries = 0;
    let listener = loop {
        match tokio::net::TcpListener::bind(&address).await {
            Ok(listener) => break listener,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("page listener on {address}: {error}"),
        }
    };
    let origin = format!("http://{}", listener.local_addr().expect("address"));
    let (reports, mut received) = mpsc::channel::<serde_json::Value>(1);
    let page = Arc::new(html);
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (page, reports) = (page.clone(), reports.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (page, reports) = (page.clone(), reports.clone());
                    async move { Ok::<_, Infallible>(answer(request, &page, &reports).await) }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    let profile = std::env::temp_dir().join(format!("sluice-chromium-{}", uuid::Uuid::new_v4().simple()));
    let mut browser = tokio::process::Command::new(chromium())
        .args([
            "--headless=new",
            // Root (as the test runs here) has no user namespace sandbox to drop into.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("{origin}/"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("headless chromium (Debian's `chromium`, installed by infra/local/stack.sh provision)");
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(mut pipe) = browser.stderr.take() {
        let stderr = stderr.clone();
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut text).await;
            stderr.lock().expect("lock").push_str(&text);
        });
    }
    let report = tokio::time::timeout(limit, received.recv()).await;
    let _ = browser.kill().await;
    server.abort();
    let _ = std::fs::remove_dir_all(&profile);
    match report {
        Ok(Some(report)) => report,
        _ => panic!("the page reported nothing within {limit:?}; chromium said: {}", stderr.lock().expect("lock")),
    }
}

/// Debian's binary, or `SLUICE_CHROMIUM` where another is wanted.
fn chromium() -> String {
    std::env::var("SLUICE_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned())
}

async fn answer(
    request: Request<hyper::body::Incoming>,
    page: &str,
    reports: &mpsc::Sender<serde_json::Value>,
) -> Response<Full<Bytes>> {
    match (request.method().as_str(), request.uri().path()) {
        ("GET", "/") => {
            let mut response = Response::new(Full::new(Bytes::from(page.to_owned())));
            response.headers_mut().insert("content-type", "text/html; charset=utf-8".parse().expect("value"));
            response
        }
        ("POST", "/report") => {
            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let report = serde_json::from_slice(&body)
                .unwrap_or_else(|_| serde_json::json!({"unreadable_report": String::from_utf8_lossy(&body)}));
            let _ = reports.send(report).await;
            Response::new(Full::new(Bytes::new()))
        }
        _ => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = hyper::StatusCode::NOT_FOUND;
            response
        }
    }
}
