//! Chunk-write throughput, side by side in one run on one database: the ingest writer
//! (`Db::stage_chunks` in batches of 64, binary `COPY`, then `Db::publish_chunks`) against a single-row `INSERT` loop, the seed's
//! 200-rows-per-statement batch, and raw `COPY BINARY` of the same rows through `psql`
//! (the physical limit). Each method writes the same rows into its own freshly created
//! vector table (same DDL: HNSW and lookup indexes), so index upkeep is alike.
//!
//! Then one 200-page PDF end to end, split into its stages: parse (in process, PDFium),
//! chunk (defaults), embed (the local service, 64 chunks a request) and write.
//!
//! `bench-chunk-writes [--rows N] [--psql PATH]`; reads the stack's environment, `PDFIUM_LIB_PATH`
//! and `SLUICE_LOCAL_EMBEDDINGS_URL`.

use sluice_e2e::vectors::{Rng, literal};
use sluice_store::{ChunkRow, Db, Document, Staging};
use std::time::{Duration, Instant};
use uuid::Uuid;

const DIMENSIONS: usize = 384;
const COLUMNS: &str = "id, kb_id, org_id, document_id, chunk_index, content, metadata, source, document_type, \
                       organizational_unit, document_date, source_path, filename, content_hash, embedding";

/// A deterministic unit vector per row, so runs compare.
fn vector(seed: u64) -> Vec<f32> {
    Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).unit_vector(DIMENSIONS)
}

fn rows(n: usize) -> Vec<ChunkRow> {
    (0..n)
        .map(|i| ChunkRow {
            chunk_index: i as i32,
            content: format!("chunk {i}: ").repeat(40),
            context: Some("Bench document".to_owned()),
            content_hash: format!("{i:064x}"),
            metadata: serde_json::json!({"start": i * 500, "end": i * 500 + 500}),
            embedding: vector(i as u64 + 1),
        })
        .collect()
}

struct Fixture {
    name: String,
    document: Document,
}

/// A base, a processing document and an empty vector table named `bench_<label>_<rand>`.
async fn fixture(db: &Db, client: &tokio_postgres::Client, label: &str) -> Fixture {
    let name = format!("bench_{label}_{}", &Uuid::new_v4().simple().to_string()[..8]);
    let kb = sluice_e2e::bench::bench_base(client, &name).await;
    let doc = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO rag_documents (id, collection_name, kb_id, filename, filesize, filetype, status) \
             VALUES ($1, $2, $3, 'bench.txt', 1, 'txt', 'processing')",
            &[&doc, &name, &kb],
        )
        .await
        .expect("document");
    db.ensure_vector_table(&name, DIMENSIONS as i32).await.expect("table");
    let document = db.document(doc).await.expect("read").expect("document");
    Fixture { name, document }
}

fn report(label: &str, rows: usize, seconds: f64, limit: f64) {
    let rate = rows as f64 / seconds;
    println!("| {label} | {rows} | {seconds:.2} | {rate:.0} | {:.2} |", rate / limit);
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n: usize = flag("--rows").and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let psql = flag("--psql").unwrap_or_else(|| "psql".to_owned());
    let stack = sluice_e2e::Stack::from_env().await;
    let db = stack.store(4).await;
    let client = stack.db().await;
    // psql (built without TLS here) reaches PostgreSQL through its local socket.
    let url = format!(
        "host={} port={} dbname=sluice user=sluice",
        std::env::var("SLUICE_PG_SOCKET_DIR").expect("SLUICE_PG_SOCKET_DIR"),
        std::env::var("SLUICE_PG_SOCKET_PORT").expect("SLUICE_PG_SOCKET_PORT")
    );
    let data = rows(n);

    // The ingest writer.
    let ours = fixture(&db, &client, "copy").await;
    let started = Instant::now();
    write(&db, &ours.document, &data).await;
    let writer = started.elapsed().as_secs_f64();

    // Raw COPY BINARY through psql, of exactly those rows, into a fresh table.
    let dump = std::env::temp_dir().join(format!("bench-chunks-{}.bin", std::process::id()));
    let out = std::process::Command::new(&psql)
        .args([
            &url,
            "-q",
            "-c",
            &format!("\\copy rag_{} ({COLUMNS}) TO '{}' WITH (FORMAT binary)", ours.name, dump.display()),
        ])
        .status()
        .expect("psql");
    assert!(out.success(), "psql could not dump the rows");
    let raw = fixture(&db, &client, "raw").await;
    let started = Instant::now();
    let copied = std::process::Command::new(&psql)
        .args([
            &url,
            "-q",
            "-c",
            &format!("\\copy rag_{} ({COLUMNS}) FROM '{}' WITH (FORMAT binary)", raw.name, dump.display()),
        ])
        .status()
        .expect("psql");
    let limit_seconds = started.elapsed().as_secs_f64();
    assert!(copied.success(), "psql could not load the rows");
    let _ = std::fs::remove_file(&dump);

    // One INSERT per row, in one transaction (the seed's old loop).
    let single = fixture(&db, &client, "single").await;
    let started = Instant::now();
    client.batch_execute("BEGIN").await.expect("begin");
    let statement = client
        .prepare(&format!(
            "INSERT INTO rag_{} (id, kb_id, document_id, chunk_index, content, metadata, content_hash, embedding) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::vector)",
            single.name
        ))
        .await
        .expect("prepare");
    for row in &data {
        client
            .execute(
                &statement,
                &[
                    &Uuid::new_v4(),
                    &single.document.kb_id,
                    &single.document.id,
                    &row.chunk_index,
                    &row.content,
                    &row.metadata,
                    &row.content_hash,
                    &literal(&row.embedding),
                ],
            )
            .await
            .expect("insert");
    }
    client.batch_execute("COMMIT").await.expect("commit");
    let single_seconds = started.elapsed().as_secs_f64();

    // 200 rows per statement (the seed's batch).
    let batched = fixture(&db, &client, "batch").await;
    let started = Instant::now();
    client.batch_execute("BEGIN").await.expect("begin");
    for batch in data.chunks(200) {
        let mut sql = format!(
            "INSERT INTO rag_{} (id, kb_id, document_id, chunk_index, content, metadata, content_hash, embedding) VALUES ",
            batched.name
        );
        let mut params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> = Vec::new();
        for (i, row) in batch.iter().enumerate() {
            let b = i * 8;
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&format!(
                "(${}, ${}, ${}, ${}, ${}, ${}, ${}, ${}::text::vector)",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5,
                b + 6,
                b + 7,
                b + 8
            ));
            params.push(Box::new(Uuid::new_v4()));
            params.push(Box::new(batched.document.kb_id));
            params.push(Box::new(batched.document.id));
            params.push(Box::new(row.chunk_index));
            params.push(Box::new(row.content.clone()));
            params.push(Box::new(row.metadata.clone()));
            params.push(Box::new(row.content_hash.clone()));
            params.push(Box::new(literal(&row.embedding)));
        }
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            params.iter().map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
        client.execute(&sql, &refs).await.expect("batch insert");
    }
    client.batch_execute("COMMIT").await.expect("commit");
    let batch_seconds = started.elapsed().as_secs_f64();

    let limit = n as f64 / limit_seconds;
    println!("| method | rows | seconds | rows/s | ratio to raw COPY |");
    println!("|---|---|---|---|---|");
    report("raw `COPY BINARY` through psql (the limit)", n, limit_seconds, limit);
    report("ingest writer (staged in batches of 64, then published with the completion)", n, writer, limit);
    report("200 rows per INSERT statement", n, batch_seconds, limit);
    report("one INSERT per row", n, single_seconds, limit);
    for name in [&ours.name, &raw.name, &single.name, &batched.name] {
        let _ = client.batch_execute(&format!("DROP TABLE rag_{name}")).await;
    }
    pdf_end_to_end(&db, &client).await;
}

/// As ingest writes: batch by batch into staging, then published with the completed row.
async fn write(db: &Db, document: &Document, rows: &[ChunkRow]) {
    // Claimed as an ingest attempt claims it; the lease outlasts any write here.
    let claim = db.claim_ingest(document.id, Duration::from_secs(3600)).await.expect("claim").expect("unclaimed");
    for batch in rows.chunks(INGEST_BATCH) {
        let staged = db.stage_chunks(document, claim, batch).await.expect("stage");
        assert_eq!(staged, Staging::Staged, "the document is processing and claimed");
    }
    db.publish_chunks(document, claim, 0).await.expect("publish");
}

/// The ingest function's batch (`sluice_ingest::EMBED_BATCH`).
const INGEST_BATCH: usize = 64;

/// A 200-page PDF through every stage, timed one by one.
async fn pdf_end_to_end(db: &Db, client: &tokio_postgres::Client) {
    let sentences = [
        "The committee reviewed the quarterly budget and approved the revised plan",
        "Maintenance crews inspected the bridge supports after the spring floods",
        "Customer feedback pointed to slow delivery times in the northern region",
        "The research team measured soil moisture at twelve sites across the valley",
    ];
    let pages: Vec<String> = (0..200)
        .map(|p| {
            (0..30).map(|l| format!("{} (page {p} line {l})", sentences[(p + l) % 4])).collect::<Vec<_>>().join("\n")
        })
        .collect();
    let page_refs: Vec<&str> = pages.iter().map(String::as_str).collect();
    let pdf = sluice_fixtures::pdf(&page_refs);
    let kind = sluice_formats::kind_for_filename("report.pdf").expect("pdf");

    let started = Instant::now();
    let extraction =
        sluice_formats::extract(kind, &pdf, &sluice_formats::ExtractOptions::new(5_000_000)).expect("read");
    let text = extraction.text.expect("text");
    let parse = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let chunks = sluice_chunk::chunk(&text, &sluice_domain::ingestion::IngestionConfig::default());
    let chunk = started.elapsed().as_secs_f64();

    let target = sluice_embed::client::Target {
        base_url: std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").expect("SLUICE_LOCAL_EMBEDDINGS_URL"),
        model: "all-minilm-l6-v2".to_owned(),
        dimensions: DIMENSIONS,
        api_key: None,
        api: Default::default(),
    };
    let http = sluice_embed::http_client();
    let started = Instant::now();
    let mut rows = Vec::new();
    for batch in chunks.chunks(64) {
        let texts: Vec<String> = batch.iter().map(|c| c.text.clone()).collect();
        let vectors = sluice_embed::client::embed(&http, &target, &texts, Default::default()).await.expect("embed");
        for (piece, embedding) in batch.iter().zip(vectors) {
            rows.push(ChunkRow {
                chunk_index: rows.len() as i32,
                content: piece.text.clone(),
                context: None,
                content_hash: String::new(),
                metadata: serde_json::json!({}),
                embedding,
            });
        }
    }
    let embed = started.elapsed().as_secs_f64();

    let fixture = fixture(db, client, "pdf").await;
    let started = Instant::now();
    write(db, &fixture.document, &rows).await;
    let write = started.elapsed().as_secs_f64();
    let _ = client.batch_execute(&format!("DROP TABLE rag_{}", fixture.name)).await;

    let total = parse + chunk + embed + write;
    println!();
    println!(
        "200-page PDF ({} KB, {} characters, {} chunks at the defaults):",
        pdf.len() / 1024,
        text.chars().count(),
        rows.len()
    );
    println!();
    println!("| stage | seconds | share |");
    println!("|---|---|---|");
    for (stage, seconds) in
        [("parse (PDFium)", parse), ("chunk", chunk), ("embed (local all-MiniLM-L6-v2)", embed), ("write", write)]
    {
        println!("| {stage} | {seconds:.3} | {:.0}% |", 100.0 * seconds / total);
    }
    println!("| total | {total:.3} | 100% |");
}
