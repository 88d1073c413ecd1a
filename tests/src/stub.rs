//! A scripted HTTP peer on loopback for the embedding provider's side of fault tests: it
//! answers each request with the next scripted answer (the last one repeats) and counts
//! what it was asked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Scripted {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// How long the answer is held back (a slow provider).
    pub delay: std::time::Duration,
}

impl Scripted {
    pub fn status(status: u16, body: &str) -> Self {
        Self { status, headers: Vec::new(), body: body.to_owned(), delay: std::time::Duration::ZERO }
    }

    /// The same answer, held back `delay`.
    pub fn after(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A well-formed `/embeddings` answer: `count` vectors of `dimensions`, each a unit
    /// vector along one axis (so they are told apart).
    pub fn vectors(count: usize, dimensions: usize) -> Self {
        let data: Vec<serde_json::Value> = (0..count)
            .map(|i| {
                let mut v = vec![0.0f32; dimensions];
                v[i % dimensions] = 1.0;
                serde_json::json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        Self::status(200, &serde_json::json!({"object": "list", "data": data}).to_string())
    }
}

/// The stub's handle: its base URL and what it saw.
#[derive(Debug, Clone)]
pub struct StubProvider {
    pub base_url: String,
    requests: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<String>>>,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl StubProvider {
    /// A listener on a free loopback port, and the handle that names it.
    async fn bound() -> (tokio::net::TcpListener, Self) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stub = Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            requests: Arc::default(),
            bodies: Arc::default(),
            authorizations: Arc::default(),
        };
        (listener, stub)
    }

    /// Starts a stub answering `script` in order, the last answer forever. A `vectors`
    /// answer of `count` 0 is sized to the request: one vector per input.
    pub async fn start(script: Vec<Scripted>, dimensions: usize) -> Self {
        let (listener, stub) = Self::bound().await;
        let seen = stub.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (body, authorization) = read_request(&mut socket).await;
                let n = seen.requests.fetch_add(1, Ordering::SeqCst);
                seen.bodies.lock().expect("bodies").push(body.clone());
                seen.authorizations.lock().expect("auth").push(authorization);
                let mut answer = script[n.min(script.len() - 1)].clone();
                if answer.status == 200 && answer.body.is_empty() {
                    let inputs = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v["input"].as_array().map(Vec::len))
                        .unwrap_or(1);
                    answer = Scripted {
                        headers: answer.headers,
                        delay: answer.delay,
                        ..Scripted::vectors(inputs, dimensions)
                    };
                }
                tokio::time::sleep(answer.delay).await;
                write_answer(&mut socket, &answer).await;
            }
        });
        stub
    }

    /// A counting stand-in in front of a real embedding service at `upstream` (a base URL
    /// ending in `/v1`): each request is passed on and its answer returned, so what is
    /// embedded is real and how much is counted.
    pub async fn forwarding(upstream: &str) -> Self {
        let (listener, stub) = Self::bound().await;
        let (seen, upstream, http) = (stub.clone(), format!("{upstream}/embeddings"), reqwest::Client::new());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (seen, upstream, http) = (seen.clone(), upstream.clone(), http.clone());
                tokio::spawn(async move {
                    let (body, _) = read_request(&mut socket).await;
                    seen.requests.fetch_add(1, Ordering::SeqCst);
                    seen.bodies.lock().expect("bodies").push(body.clone());
                    let passed =
                        http.post(&upstream).header("content-type", "application/json").body(body).send().await;
                    let answer = match passed {
                        Ok(response) => {
                            Scripted::status(response.status().as_u16(), &response.text().await.unwrap_or_default())
                        }
                        Err(_) => Scripted::status(502, "{}"),
                    };
                    write_answer(&mut socket, &answer).await;
                });
            }
        });
        stub
    }

    /// A 200 sized to each request (one vector per input).
    pub fn sized() -> Scripted {
        Scripted::status(200, "")
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// How many texts it was asked to embed, over every request.
    pub fn inputs(&self) -> usize {
        let bodies = self.bodies.lock().expect("bodies");
        bodies
            .iter()
            .filter_map(|body| serde_json::from_str::<serde_json::Value>(body).ok())
            .map(|request| request["input"].as_array().map_or(1, Vec::len))
            .sum()
    }

    /// Every text it was asked to embed, in order.
    pub fn input_texts(&self) -> Vec<String> {
        let bodies = self.bodies.lock().expect("bodies");
        bodies
            .iter()
            .filter_map(|body| serde_json::from_str::<serde_json::Value>(body).ok())
            .flat_map(|request| match &request["input"] {
                serde_json::Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
                serde_json::Value::String(one) => vec![one.clone()],
                _ => Vec::new(),
            })
            .collect()
    }

    pub fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().expect("auth").clone()
    }
}

/// Writes `answer` and closes the connection.
async fn write_answer(socket: &mut tokio::net::TcpStream, answer: &Scripted) {
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(answer.body.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// Reads one request; its body and its `authorization` header.
async fn read_request(socket: &mut tokio::net::TcpStream) -> (String, String) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else { return (String::new(), String::new()) };
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let header = |name: &str| {
                head.lines().find_map(|l| {
                    l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned())
                })
            };
            let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            while buffer.len() < end + 4 + length {
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            }
            let body = String::from_utf8_lossy(&buffer[end + 4..]).to_string();
            return (body, header("authorization").unwrap_or_default());
        }
    }
    (String::new(), String::new())
}
