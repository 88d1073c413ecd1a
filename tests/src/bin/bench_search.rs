//! Search latency and recall on 100,000 chunks of 384 dimensions in one collection:
//! unfiltered, with a filter matching 10% and one matching 1%, through the store's search
//! (`Db::search_chunks`, the path `POST /rag/search` takes after embedding the query).
//! Baseline: the same queries as exact scans (index off), which also give recall@10.
//! Then each mode's latency on the same chunks, whose texts are 60 words drawn per topic (a
//! Zipf law over a 20,000-word vocabulary: English stop words first, then words every topic
//! shares, then each topic's own): `vector` (top 10), `keyword` (BM25, top 10), each leg
//! alone at hybrid's depth, and `hybrid` (both legs at their default depth, or `--depth N`,
//! side by side, fused), as `POST /rag/search` runs them after the query's embedding.
//!
//! `bench-search [--rows N] [--queries Q] [--depth N] [--keep]`; reads the stack's environment.

use sluice_e2e::bench::{bench_collection, exact_ids};
use sluice_e2e::vectors::{CLUSTERS, Rng, near, near_topic, normalised, percentile, topic_words as words};
use sluice_store::{ScopeBase, SearchFilters};
use std::time::Instant;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use uuid::Uuid;

const DIMENSIONS: usize = 384;
#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n: usize = flag("--rows").and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let queries: usize = flag("--queries").and_then(|v| v.parse().ok()).unwrap_or(200);
    let stack = sluice_e2e::Stack::from_env().await;
    let db = stack.store(2).await;
    let mut client = stack.db().await;

    let name = format!("bench_search_{}", &Uuid::new_v4().simple().to_string()[..8]);
    let (kb, table) = bench_collection(&db, &client, &name).await;

    let mut rng = Rng(0xBE7C_4A11);
    let centroids: Vec<Vec<f32>> =
        (0..CLUSTERS).map(|_| normalised((0..DIMENSIONS).map(|_| rng.normal()).collect())).collect();
    let started = Instant::now();
    let vector_type = client.prepare("SELECT $1::vector").await.expect("type").params()[0].clone();
    let tx = client.transaction().await.expect("tx");
    let sink = tx
        .copy_in(&format!(
            "COPY {table} (id, kb_id, document_id, chunk_index, content, organizational_unit, document_type, embedding) \
             FROM STDIN BINARY"
        ))
        .await
        .expect("copy");
    let types = [Type::UUID, Type::UUID, Type::UUID, Type::INT4, Type::TEXT, Type::TEXT, Type::TEXT, vector_type];
    let writer = BinaryCopyInWriter::new(sink, &types);
    futures_util::pin_mut!(writer);
    for i in 0..n {
        let (topic, point) = near_topic(&mut rng, &centroids);
        let embedding = pgvector::Vector::from(point);
        let text = words(&mut rng, topic, 60);
        let unit = format!("u{}", i % 10);
        let kind = format!("t{}", i % 100);
        writer
            .as_mut()
            .write(&[&Uuid::new_v4(), &kb, &Uuid::new_v4(), &(i as i32), &text, &unit, &kind, &embedding])
            .await
            .expect("row");
    }
    writer.finish().await.expect("finish");
    tx.commit().await.expect("commit");
    let load = started.elapsed().as_secs_f64();
    let started = Instant::now();
    client
        .batch_execute(&format!(
            "SET maintenance_work_mem = '1GB'; SET max_parallel_maintenance_workers = 1; \
             CREATE INDEX \"{table}$embedding\" ON {table} USING hnsw (embedding vector_cosine_ops); ANALYZE {table}"
        ))
        .await
        .expect("index");
    let build = started.elapsed().as_secs_f64();
    // The steady state a collection is searched in: the GIN index's pending list merged
    // (as autovacuum would), so no run measures a scan of it.
    client.batch_execute(&format!("VACUUM {table}")).await.expect("vacuum");
    eprintln!("loaded {n} rows in {load:.1} s, built the HNSW index in {build:.1} s");

    let scope = [ScopeBase { kb_id: kb, org_id: None }];
    let cases = [
        ("unfiltered", SearchFilters::default()),
        (
            "10% filter (organizational_unit)",
            SearchFilters { organizational_unit: Some(vec!["u3".into()]), ..Default::default() },
        ),
        ("1% filter (document_type)", SearchFilters { document_type: Some(vec!["t42".into()]), ..Default::default() }),
    ];
    let probes: Vec<Vec<f32>> = (0..queries).map(|_| near(&mut rng, &centroids)).collect();
    println!("| search | queries | p50 ms | p99 ms | exact scan p50 ms (baseline) | p50 ratio to exact | recall@10 |");
    println!("|---|---|---|---|---|---|---|");
    for (label, filters) in &cases {
        // Warm the caches once.
        for probe in probes.iter().take(10) {
            db.search_chunks(&name, &scope, filters, probe, 10).await.expect("search");
        }
        let mut took = Vec::new();
        let mut exact_took = Vec::new();
        let mut recall = 0.0;
        for probe in &probes {
            let started = Instant::now();
            let hits = db.search_chunks(&name, &scope, filters, probe, 10).await.expect("search");
            took.push(started.elapsed().as_secs_f64() * 1000.0);
            let started = Instant::now();
            let exact = exact_ids(&mut client, &table, kb, filters, probe).await;
            exact_took.push(started.elapsed().as_secs_f64() * 1000.0);
            let found = hits.iter().filter(|h| exact.contains(&h.chunk_id)).count();
            recall += found as f64 / exact.len().max(1) as f64;
        }
        took.sort_by(f64::total_cmp);
        exact_took.sort_by(f64::total_cmp);
        let (p50, exact_p50) = (percentile(&took, 0.5), percentile(&exact_took, 0.5));
        println!(
            "| {label} | {queries} | {p50:.2} | {:.2} | {exact_p50:.2} | {:.2} | {:.3} |",
            percentile(&took, 0.99),
            p50 / exact_p50,
            recall / queries as f64
        );
    }
    // Each mode, on the same probes: a query is a point and five words of one topic.
    let asked: Vec<(Vec<f32>, String)> = (0..queries)
        .map(|_| {
            let (topic, point) = near_topic(&mut rng, &centroids);
            (point, words(&mut rng, topic, 5))
        })
        .collect();
    // `--depth N`: both legs' depth in hybrid (the deployment's default otherwise).
    let mut settings = sluice_domain::config::SearchSettings::default();
    if let Some(depth) = flag("--depth").and_then(|v| v.parse().ok()) {
        (settings.vector_depth, settings.keyword_depth) = (depth, depth);
    }
    println!();
    println!("| search | mode | queries | p50 ms | p95 ms | p50 ratio to `vector` |");
    println!("|---|---|---|---|---|---|");
    for (label, filters) in &cases[..2] {
        let mut vector_p50 = 0.0;
        let depth = settings.vector_depth;
        let deep_vector = format!("vector, top {depth}");
        let deep_keyword = format!("keyword, top {depth}");
        for mode in ["vector", "keyword", deep_vector.as_str(), deep_keyword.as_str(), "hybrid"] {
            let run = async |(probe, text): &(Vec<f32>, String)| match mode {
                "vector" => db.search_chunks(&name, &scope, filters, probe, 10).await.expect("vector").len(),
                "keyword" => {
                    db.search_keyword(&name, &scope, filters, text, 10, settings.keyword).await.expect("keyword").len()
                }
                m if m == deep_vector => db.search_chunks(&name, &scope, filters, probe, depth).await.expect("v").len(),
                m if m == deep_keyword => db
                    .search_keyword(&name, &scope, filters, text, depth, settings.keyword)
                    .await
                    .expect("keyword")
                    .len(),
                _ => {
                    let (vector, keyword) = tokio::join!(
                        db.search_chunks(&name, &scope, filters, probe, settings.vector_depth),
                        db.search_keyword(&name, &scope, filters, text, settings.keyword_depth, settings.keyword)
                    );
                    let fused = sluice_search::fusion::fuse(
                        vector.expect("vector"),
                        keyword.expect("keyword"),
                        settings.fusion,
                    );
                    fused.len().min(10)
                }
            };
            for query in asked.iter().take(10) {
                run(query).await;
            }
            let mut took = Vec::new();
            for query in &asked {
                let started = Instant::now();
                run(query).await;
                took.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            took.sort_by(f64::total_cmp);
            let p50 = percentile(&took, 0.5);
            if mode == "vector" {
                vector_p50 = p50;
            }
            println!(
                "| {label} | {mode} | {queries} | {p50:.2} | {:.2} | {:.2} |",
                percentile(&took, 0.95),
                p50 / vector_p50
            );
        }
    }
    if args.iter().any(|a| a == "--keep") {
        eprintln!("kept {table} (base {kb})");
    } else {
        let _ =
            client.batch_execute(&format!("DROP TABLE {table}; DELETE FROM knowledge_bases WHERE id = '{kb}'")).await;
    }
}
