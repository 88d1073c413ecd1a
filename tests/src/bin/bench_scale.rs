//! Scale: one collection built at each size (`--sizes`, default 100,000 and 1,000,000 chunks
//! of 384 dimensions with text: the search benchmark's corpus, topic clusters and Zipf words),
//! loaded through the writer ingestion uses (documents of 1,000 chunks, staged 64 at a time
//! and published, the HNSW index built after the load with 4 GB of `maintenance_work_mem`
//! so a million vectors' graph fits), then in the same run: the load's rows a second; the HNSW build's time and
//! the indexes' sizes; the keyword statistics' size and their upkeep (a 1,000-chunk document
//! written and another deleted, index and statistics live, timed); search p50/p95 for
//! `vector`, `keyword` and `hybrid` top 10 — unfiltered, a 10% filter and a 1% filter — with
//! `vector`'s recall@10 against an exact scan; and a study of the vector leg's two choices
//! (the index's search list `ef_search` from 100 to 1,000, and an exact scan), each filter's
//! p50/p95 and recall@10, through the graph vector tables get and again through the older,
//! sparser one (`GRAPHS`, its build time and size). Every figure at a size is printed beside the
//! first size's as a ratio: how search grows with the collection.
//!
//! `bench-scale [--sizes 100000,1000000] [--queries 100]`; reads the stack's environment.

use sluice_e2e::bench::{bench_collection, exact_ids, nearest_ids};
use sluice_e2e::vectors::{CLUSTERS, Rng, near_topic, normalised, percentile, topic_words};
use sluice_store::{ChunkRow, Db, ScopeBase, SearchFilters, Staging};
use std::time::{Duration, Instant};
use uuid::Uuid;

const DIMENSIONS: usize = 384;
const DOCUMENT_CHUNKS: usize = 1_000;
/// The ingest function's batch (`sluice_ingest::EMBED_BATCH`).
const INGEST_BATCH: usize = 64;

struct Corpus {
    rng: Rng,
    centroids: Vec<Vec<f32>>,
}

impl Corpus {
    fn new() -> Self {
        let mut rng = Rng(0x5CA1_E000);
        let centroids = (0..CLUSTERS).map(|_| normalised((0..DIMENSIONS).map(|_| rng.normal()).collect())).collect();
        Self { rng, centroids }
    }

    fn chunks(&mut self, count: usize) -> Vec<ChunkRow> {
        (0..count)
            .map(|i| {
                let (topic, embedding) = near_topic(&mut self.rng, &self.centroids);
                ChunkRow {
                    chunk_index: i as i32,
                    content: topic_words(&mut self.rng, topic, 60),
                    context: None,
                    content_hash: format!("{:016x}{:016x}", self.rng.next_u64(), self.rng.next_u64()),
                    metadata: serde_json::json!({}),
                    embedding,
                }
            })
            .collect()
    }

    /// A query: a point near a topic and five of its words.
    fn query(&mut self) -> (Vec<f32>, String) {
        let (topic, point) = near_topic(&mut self.rng, &self.centroids);
        (point, topic_words(&mut self.rng, topic, 5))
    }
}

/// Writes document `n` of `kb` (its unit `u{n % 10}`, its type `t{n % 100}`: the filters'
/// 10% and 1%) as ingest does; its id.
async fn write_document(
    db: &Db,
    client: &tokio_postgres::Client,
    name: &str,
    kb: Uuid,
    n: usize,
    rows: &[ChunkRow],
) -> Uuid {
    let id = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO rag_documents (id, collection_name, kb_id, filename, filesize, filetype, status, \
             organizational_unit) VALUES ($1, $2, $3, $4, 1, $5, 'processing', $6)",
            &[&id, &name, &kb, &format!("doc-{n}.txt"), &format!("t{}", n % 100), &format!("u{}", n % 10)],
        )
        .await
        .expect("document");
    let document = db.document(id).await.expect("read").expect("document");
    // Claimed as an ingest attempt claims it; the lease outlasts any write here.
    let claim = db.claim_ingest(document.id, Duration::from_secs(3600)).await.expect("claim").expect("unclaimed");
    for batch in rows.chunks(INGEST_BATCH) {
        let staged = db.stage_chunks(&document, claim, batch).await.expect("stage");
        assert_eq!(staged, Staging::Staged, "the document is processing and claimed");
    }
    db.publish_chunks(&document, claim, 0).await.expect("publish");
    id
}

/// One size's figures.
struct Measured {
    rows: usize,
    load_seconds: f64,
    build_seconds: f64,
    /// Bytes: the table (heap and TOAST), the HNSW index, the GIN index, the statistics.
    sizes: [i64; 4],
    write_1000_ms: f64,
    delete_1000_ms: f64,
    /// `(filter, mode, p50 ms, p95 ms, recall@10 for vector)`.
    searches: Vec<(&'static str, &'static str, f64, f64, Option<f64>)>,
    /// The vector leg's two choices measured.
    study: Vec<StudyRow>,
    /// The older graph's build seconds and bytes (`GRAPHS[1]`).
    older: (f64, i64),
}

/// One way of ranking the vector leg measured on its own.
#[derive(Debug)]
struct StudyRow {
    filter: &'static str,
    graph: &'static str,
    /// The index's search list, or `None` for the exact scan.
    ef_search: Option<i64>,
    p50_ms: f64,
    p95_ms: f64,
    recall: f64,
}

/// The search lists the study tries through the index; `None` is the exact scan.
const STUDIED_EF: [Option<i64>; 6] = [None, Some(100), Some(200), Some(400), Some(800), Some(1000)];

/// The graphs measured, each its label and index options: the one a vector table gets
/// (migration 29: twice pgvector's default links a node), which every search is measured on,
/// then pgvector's default (`m` 16, `ef_construction` 64), which tables made before it keep.
const GRAPHS: [(&str, &str); 2] = [("m 32", "WITH (m = 32, ef_construction = 64)"), ("m 16", "")];

/// `db` writes as ingest does (the vector login); `searcher` searches as the search function
/// does (the search login, with its sessions' planner settings).
async fn measure(db: &Db, searcher: &Db, client: &mut tokio_postgres::Client, rows: usize, queries: usize) -> Measured {
    let name = format!("bench_scale_{}", &Uuid::new_v4().simple().to_string()[..8]);
    let (kb, table) = bench_collection(db, client, &name).await;
    let mut corpus = Corpus::new();
    let started = Instant::now();
    for n in 0..rows.div_ceil(DOCUMENT_CHUNKS) {
        let chunks = corpus.chunks(DOCUMENT_CHUNKS.min(rows - n * DOCUMENT_CHUNKS));
        write_document(db, client, &name, kb, n, &chunks).await;
    }
    let load_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    build_graph(client, &table, GRAPHS[0].1).await;
    // The steady state a collection is searched in: the GIN index's pending list merged and
    // the planner's statistics fresh, as autovacuum would leave them.
    client.batch_execute(&format!("VACUUM ANALYZE {table}")).await.expect("vacuum");
    let build_seconds = started.elapsed().as_secs_f64();
    let size = async |sql: String| -> i64 { client.query_one(&sql, &[]).await.expect("size").get(0) };
    let sizes = [
        size(format!("SELECT pg_table_size('{table}')")).await,
        size(format!("SELECT pg_relation_size('\"{table}$embedding\"')")).await,
        size(format!("SELECT pg_relation_size('\"{table}$text\"')")).await,
        size(format!("SELECT pg_total_relation_size('\"{table}$terms\"')")).await,
    ];

    // Upkeep with everything live: a new document's 1,000 chunks, then one deleted.
    let fresh = corpus.chunks(DOCUMENT_CHUNKS);
    let started = Instant::now();
    let written = write_document(db, client, &name, kb, rows / DOCUMENT_CHUNKS, &fresh).await;
    let write_1000_ms = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    db.delete_document(written).await.expect("delete").expect("the document");
    let delete_1000_ms = started.elapsed().as_secs_f64() * 1000.0;

    let scope = [ScopeBase { kb_id: kb, org_id: None }];
    let cases: [(&'static str, SearchFilters); 3] = [
        ("unfiltered", SearchFilters::default()),
        ("10% filter", SearchFilters { organizational_unit: Some(vec!["u3".into()]), ..Default::default() }),
        ("1% filter", SearchFilters { document_type: Some(vec!["t42".into()]), ..Default::default() }),
    ];
    let asked: Vec<(Vec<f32>, String)> = (0..queries).map(|_| corpus.query()).collect();
    let settings = sluice_domain::config::SearchSettings::default();
    let mut searches = Vec::new();
    for (label, filters) in &cases {
        for mode in ["vector", "keyword", "hybrid"] {
            let run = async |(probe, text): &(Vec<f32>, String)| match mode {
                "vector" => searcher.search_chunks(&name, &scope, filters, probe, 10).await.expect("vector"),
                "keyword" => {
                    searcher.search_keyword(&name, &scope, filters, text, 10, settings.keyword).await.expect("keyword")
                }
                _ => {
                    let (vector, keyword) = tokio::join!(
                        searcher.search_chunks(&name, &scope, filters, probe, settings.vector_depth),
                        searcher.search_keyword(&name, &scope, filters, text, settings.keyword_depth, settings.keyword)
                    );
                    let fused = sluice_search::fusion::fuse(vector.expect("v"), keyword.expect("k"), settings.fusion);
                    fused.into_iter().take(10).map(|f| f.hit).collect()
                }
            };
            for query in asked.iter().take(10) {
                run(query).await;
            }
            let (mut took, mut recall) = (Vec::new(), 0.0);
            for query in &asked {
                let started = Instant::now();
                let hits = run(query).await;
                took.push(started.elapsed().as_secs_f64() * 1000.0);
                if mode == "vector" {
                    let exact = exact_ids(client, &table, kb, filters, &query.0).await;
                    // Nothing to find, and nothing found, is every answer.
                    recall += if exact.is_empty() {
                        if hits.is_empty() { 1.0 } else { 0.0 }
                    } else {
                        hits.iter().filter(|h| exact.contains(&h.chunk_id)).count() as f64 / exact.len() as f64
                    };
                }
            }
            took.sort_by(f64::total_cmp);
            let recall = (mode == "vector").then(|| recall / queries as f64);
            searches.push((*label, mode, percentile(&took, 0.5), percentile(&took, 0.95), recall));
        }
    }
    // The vector leg's choices, each on its own: how wide the index's search list must be for
    // recall, and what an exact scan of each filter's matches costs.
    let mut truths = Vec::new();
    for (_, filters) in &cases {
        let mut exact = Vec::new();
        for query in &asked {
            exact.push(exact_ids(client, &table, kb, filters, &query.0).await);
        }
        truths.push(exact);
    }
    let (mut study, mut older) = (Vec::new(), (0.0, 0));
    for ((graph, _), scans) in GRAPHS.iter().zip([&STUDIED_EF[..], &STUDIED_EF[1..]]) {
        for ((label, filters), truth) in cases.iter().zip(&truths) {
            for &ef in scans {
                let (mut took, recall) = study_scan(client, &table, kb, filters, &asked, truth, ef).await;
                took.sort_by(f64::total_cmp);
                let (p50_ms, p95_ms) = (percentile(&took, 0.5), percentile(&took, 0.95));
                study.push(StudyRow { filter: label, graph, ef_search: ef, p50_ms, p95_ms, recall });
            }
        }
        if *graph == GRAPHS[0].0 {
            // The same rows again through the older graph (the exact scans need no second look).
            client.batch_execute(&format!("DROP INDEX \"{table}$embedding\"")).await.expect("drop index");
            let started = Instant::now();
            build_graph(client, &table, GRAPHS[1].1).await;
            older.0 = started.elapsed().as_secs_f64();
            let bytes = client.query_one(&format!("SELECT pg_relation_size('\"{table}$embedding\"')"), &[]).await;
            older.1 = bytes.expect("size").get(0);
        }
    }
    let _ = client
        .batch_execute(&format!("DROP TABLE {table} CASCADE; DELETE FROM knowledge_bases WHERE id = '{kb}'"))
        .await;
    Measured { rows, load_seconds, build_seconds, sizes, write_1000_ms, delete_1000_ms, searches, study, older }
}

/// Builds `table`'s HNSW index with `options` (empty: pgvector's defaults) within 4 GB, so a
/// million vectors' graph is built in memory.
async fn build_graph(client: &tokio_postgres::Client, table: &str, options: &str) {
    client
        .batch_execute(&format!(
            "SET maintenance_work_mem = '4GB'; CREATE INDEX \"{table}$embedding\" ON {table} \
             USING hnsw (embedding vector_cosine_ops) {options}"
        ))
        .await
        .expect("index");
}

/// Each of `asked` searched through `ef` (or exactly): the times in ms, and the mean recall@10
/// against `truth`.
async fn study_scan(
    client: &mut tokio_postgres::Client,
    table: &str,
    kb: Uuid,
    filters: &SearchFilters,
    asked: &[(Vec<f32>, String)],
    truth: &[Vec<Uuid>],
    ef: Option<i64>,
) -> (Vec<f64>, f64) {
    let (mut took, mut recall) = (Vec::new(), 0.0);
    for (query, truth) in asked.iter().zip(truth) {
        let started = Instant::now();
        let found = nearest_ids(client, table, kb, filters, &query.0, ef).await;
        took.push(started.elapsed().as_secs_f64() * 1000.0);
        recall += found.iter().filter(|id| truth.contains(id)).count() as f64 / truth.len().max(1) as f64;
    }
    (took, recall / asked.len() as f64)
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let sizes: Vec<usize> = flag("--sizes")
        .unwrap_or_else(|| "100000,1000000".to_owned())
        .split(',')
        .map(|s| s.trim().parse().expect("--sizes: numbers, comma-separated"))
        .collect();
    let queries: usize = flag("--queries").and_then(|v| v.parse().ok()).unwrap_or(100);
    let stack = sluice_e2e::Stack::from_env().await;
    let db = stack.store(2).await;
    let searcher = stack.search_store(2).await;
    let mut client = stack.db().await;
    let mut measured = Vec::new();
    for rows in sizes {
        eprintln!("building and measuring {rows} chunks");
        let m = measure(&db, &searcher, &mut client, rows, queries).await;
        // Each size's figures as soon as they are in, so a run cut short keeps them.
        eprintln!(
            "{rows} chunks: load {:.0} s, HNSW build {:.0} s, sizes (table, HNSW, GIN, statistics) {:?} bytes, \
             write/delete 1,000 {:.0}/{:.0} ms, searches (filter, mode, p50, p95, recall) {:?}, \
             vector study (filter, graph, ef_search, p50, p95, recall) {:?}, older graph (build s, bytes) {:?}",
            m.load_seconds, m.build_seconds, m.sizes, m.write_1000_ms, m.delete_1000_ms, m.searches, m.study, m.older
        );
        measured.push(m);
    }
    let first = &measured[0];
    println!(
        "| chunks | load s | rows/s | HNSW build s | table MiB | HNSW MiB | GIN MiB | statistics MiB | write 1,000 ms | delete 1,000 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for m in &measured {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.0} |",
            m.rows,
            m.load_seconds,
            m.rows as f64 / m.load_seconds,
            m.build_seconds,
            mib(m.sizes[0]),
            mib(m.sizes[1]),
            mib(m.sizes[2]),
            mib(m.sizes[3]),
            m.write_1000_ms,
            m.delete_1000_ms
        );
    }
    println!();
    let header: Vec<String> = measured.iter().map(|m| format!("{} p50/p95 ms", m.rows)).collect();
    println!("| search | mode | {} | p50 ratio to {} | vector recall@10 |", header.join(" | "), first.rows);
    println!("|---|---|{}---|---|", "---|".repeat(measured.len()));
    for (i, (label, mode, _, _, _)) in first.searches.iter().enumerate() {
        let cells: Vec<String> =
            measured.iter().map(|m| format!("{:.2} / {:.2}", m.searches[i].2, m.searches[i].3)).collect();
        let last = &measured[measured.len() - 1].searches[i];
        let recalls: Vec<String> = measured.iter().filter_map(|m| m.searches[i].4.map(|r| format!("{r:.3}"))).collect();
        println!(
            "| {label} | {mode} | {} | {:.2} | {} |",
            cells.join(" | "),
            last.2 / first.searches[i].2,
            recalls.join(" / ")
        );
    }
    println!();
    println!("The vector leg's choices, top 10 (`ef_search` through the index's iterative scan, or exact):");
    println!();
    let header: Vec<String> = measured.iter().map(|m| format!("{} p50/p95 ms, recall@10", m.rows)).collect();
    println!("| search | graph | scan | {} |", header.join(" | "));
    println!("|---|---|---|{}", "---|".repeat(measured.len()));
    for (i, row) in first.study.iter().enumerate() {
        let cells: Vec<String> = measured
            .iter()
            .map(|m| format!("{:.2} / {:.2}, {:.3}", m.study[i].p50_ms, m.study[i].p95_ms, m.study[i].recall))
            .collect();
        let scan = row.ef_search.map_or_else(|| "exact".to_owned(), |ef| format!("ef_search {ef}"));
        println!("| {} | {} | {scan} | {} |", row.filter, row.graph, cells.join(" | "));
    }
    println!();
    println!("The older graph ({}, tables made before schema 29): build s and MiB at each size", GRAPHS[1].0);
    println!();
    for m in &measured {
        println!("- {} chunks: {:.0} s, {:.0} MiB", m.rows, m.older.0, mib(m.older.1));
    }
}
