//! A fault proxy in front of the emulator's S3 for the soak: it passes every request through
//! unchanged, and while switched on answers each one `503 SlowDown` in S3's own error shape,
//! as S3 does when a prefix is asked too fast. The runner's functions reach S3 through it
//! (`AWS_ENDPOINT_URL_S3`); the soak's own checks go to the emulator directly.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The answer S3 gives a request it sheds (`SlowDown`, status 503).
const SLOW_DOWN: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>\
    <Message>Please reduce your request rate.</Message><RequestId>soak-fault-proxy</RequestId></Error>";

/// Headers that describe one hop, not the request: the proxy's own client sets them again.
const HOP_HEADERS: [&str; 4] = ["host", "connection", "transfer-encoding", "content-length"];

#[derive(Debug)]
pub struct S3FaultProxy {
    /// Where to send S3 requests instead of the emulator.
    pub url: String,
    slow_down: Arc<AtomicBool>,
    shed: Arc<AtomicU64>,
}

impl S3FaultProxy {
    /// Starts the proxy on a free loopback port, forwarding to `upstream` (the emulator).
    pub async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the S3 fault proxy");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (slow_down, shed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let client = reqwest::Client::new();
        let upstream = upstream.trim_end_matches('/').to_owned();
        let (on, count) = (slow_down.clone(), shed.clone());
        crate::vision_stand_in::serve(listener, move |request| {
            let (client, upstream, on, count) = (client.clone(), upstream.clone(), on.clone(), count.clone());
            async move {
                if on.load(Ordering::SeqCst) {
                    count.fetch_add(1, Ordering::SeqCst);
                    let mut answer = Response::new(Full::new(Bytes::from_static(SLOW_DOWN.as_bytes())));
                    *answer.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                    answer.headers_mut().insert("content-type", "application/xml".parse().expect("header"));
                    return answer;
                }
                forward(&client, &upstream, request).await
            }
        });
        Self { url, slow_down, shed }
    }

    /// Switches the `503 SlowDown` answers on or off.
    pub fn slow_down(&self, on: bool) {
        self.slow_down.store(on, Ordering::SeqCst);
    }

    /// How many requests were answered `503 SlowDown` so far.
    pub fn shed(&self) -> u64 {
        self.shed.load(Ordering::SeqCst)
    }
}

/// Passes one request to the emulator and its answer back, headers and body as they were.
async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let bad_gateway = || {
        let mut answer = Response::new(Full::new(Bytes::new()));
        *answer.status_mut() = StatusCode::BAD_GATEWAY;
        answer
    };
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else { return bad_gateway() };
    let target = format!("{upstream}{}", parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    let mut headers = parts.headers.clone();
    for name in HOP_HEADERS {
        headers.remove(name);
    }
    let sent = client.request(parts.method.clone(), target).headers(headers).body(body).send().await;
    let Ok(upstream_answer) = sent else { return bad_gateway() };
    let status = upstream_answer.status();
    let mut headers = upstream_answer.headers().clone();
    let Ok(body) = upstream_answer.bytes().await else { return bad_gateway() };
    // A HEAD answer keeps the object's length; every other answer's length is its body's.
    headers.remove("transfer-encoding");
    headers.remove("connection");
    if parts.method != hyper::Method::HEAD {
        headers.remove("content-length");
    }
    let mut answer = Response::new(Full::new(body));
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    answer
}
