//! Vector search within a resolved scope. The scope — which bases, and the tenant each
//! base's chunks carry — comes from the bases the access decision resolved, never from a
//! request, and it is part of the SQL before the top-k, like every filter: a chunk without
//! a value for a filtered dimension is excluded (SQL's `NULL` fails every comparison).
//! Small tables are searched exactly; large ones through the HNSW index with pgvector's
//! iterative scan, which keeps going until `k` rows pass the filters — and should the index
//! still yield fewer than `k` (its scan budget spent), the search is repeated exactly, so a
//! filter never silently returns fewer rows than match.

use crate::keyword_feedback::{FeedbackChunk, expanded_query};
use crate::keyword_scoring::{BM25_K1, Best, Bm25, Scored, read_quoted};
use crate::names::{TEXT_SEARCH_LANGUAGE, VECTOR_TABLE_COMMENT, on_vector_table, vector_width};
use crate::{Db, StoreError};
use futures_util::TryStreamExt;
use sluice_domain::collection::vector_table;
use sluice_domain::config::KeywordReading;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use time::Date;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use uuid::Uuid;

/// One base a search may read: its chunks carry its id and its tenant (`None` for an app
/// base or a personal base outside any organization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeBase {
    pub kb_id: Uuid,
    pub org_id: Option<Uuid>,
}

/// The narrowing filters; each list is OR within, every field AND across.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchFilters {
    pub source: Option<Vec<String>>,
    pub document_type: Option<Vec<String>>,
    pub organizational_unit: Option<Vec<String>>,
    pub date_from: Option<Date>,
    pub date_to: Option<Date>,
    pub parent_doc_id: Option<Uuid>,
}

/// One matching chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub chunk_id: Uuid,
    pub kb_id: Option<Uuid>,
    pub document_id: Uuid,
    pub filename: Option<String>,
    pub chunk_index: i32,
    pub content: String,
    pub score: f64,
    pub source: Option<String>,
    pub document_type: Option<String>,
    pub organizational_unit: Option<String>,
    pub document_date: Option<Date>,
    pub metadata: serde_json::Value,
}

/// The nil UUID stands for "no tenant" inside the SQL, where `NULL` would match nothing.
const NO_TENANT: Uuid = Uuid::nil();

/// Up to this many rows in a collection's table, a search is an exact scan: a few
/// milliseconds, and no approximation at all.
pub const EXACT_SCAN_ROWS: i64 = 2_000;

/// At most this many chunks passing a search's filters are ranked exactly (see
/// `exact_filtered_rows`).
pub const EXACT_FILTERED_ROWS: i64 = 10_000;

/// How many chunks passing a search's filters are found through the filters' B-tree indexes
/// and ranked exactly in a table of `rows`: a filter keeping at most 2% of the table (at
/// least `EXACT_SCAN_ROWS`, at most `EXACT_FILTERED_ROWS`). Measured: at a million chunks a
/// 1% filter's 10,000 rows ranked exactly in 28 ms, the HNSW index's own time for them, at
/// recall 1.0 where the index's iterative scan reached 0.78–0.92; at 100,000 a 10% filter's
/// 10,000 rows took 48 ms exactly against the index's 8 ms at recall 0.98 (BENCHMARKS.md,
/// "Scale"). The index loses recall where a filter is selective. The share is 2%, not 1%, so
/// the fixed cap decides at a million: the table's row count is ANALYZE's estimate, and at 1%
/// a filter of exactly a hundredth fell either side of it from one run to the next.
pub fn exact_filtered_rows(rows: i64) -> i64 {
    (rows / 50).clamp(EXACT_SCAN_ROWS, EXACT_FILTERED_ROWS)
}

/// The HNSW index's search list for `top_k` in a table of `rows` chunks: 10 × `top_k`, at
/// least 100, times the table's started eighths of a million rows, at most 1,000. Measured at
/// a million chunks (top 10, the database's buffers holding the index): the denser graph new
/// tables get (migration 29) reaches recall@10 0.957 at 800 in 13.6 ms, 0.919 at 400; the
/// older default graph 0.90 at 800, 0.86 at 400. At 100,000, 100 already reaches 0.99
/// (BENCHMARKS.md, "Scale").
pub fn ef_search(top_k: i64, rows: i64) -> i64 {
    let base = top_k.saturating_mul(10).clamp(100, 1000);
    let steps = (rows.max(1) + 124_999) / 125_000;
    base.saturating_mul(steps).min(1000)
}

impl Db {
    /// The `top_k` chunks of `collection` nearest `vector` within `scope` and `filters`,
    /// best first. A collection with no vector table yet has no chunks.
    pub async fn search_chunks(
        &self,
        collection: &str,
        scope: &[ScopeBase],
        filters: &SearchFilters,
        vector: &[f32],
        top_k: i64,
    ) -> Result<Vec<Hit>, StoreError> {
        if scope.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let table = vector_table(collection);
        let Some(rows_in_table) = table_rows(&tx, &table).await? else {
            return Ok(Vec::new());
        };
        let filtered = *filters != SearchFilters::default();
        // Exact when few rows can match: a small table, or a filter selective enough that its
        // B-tree indexes find the candidates at once. Otherwise the HNSW index.
        let bound = exact_filtered_rows(rows_in_table);
        let plan = match (rows_in_table <= EXACT_SCAN_ROWS, filtered) {
            (true, _) => Ranking::Exact,
            (false, false) => Ranking::Index,
            (false, true) => ranking_for(matching_estimate(&tx, &table, scope, filters).await?, bound),
        };
        let exact = match plan {
            Ranking::Exact => {
                tx.batch_execute("SET LOCAL enable_indexscan = off").await?;
                Some(nearest(&tx, &table, scope, filters, vector, top_k).await?)
            }
            Ranking::ExactIfWithin => nearest_within(&tx, &table, scope, filters, vector, top_k, bound).await?,
            Ranking::Index => None,
        };
        let mut rows = match exact {
            Some(rows) => rows,
            None => {
                // Scanned on until `top_k` rows pass the filters, in strict order; a wider
                // search list keeps recall above 0.95.
                let ef_search = ef_search(top_k, rows_in_table);
                tx.batch_execute(&format!(
                    "SET LOCAL hnsw.iterative_scan = strict_order; SET LOCAL hnsw.ef_search = {ef_search}; \
                     SET LOCAL hnsw.max_scan_tuples = 50000"
                ))
                .await?;
                let rows = nearest(&tx, &table, scope, filters, vector, top_k).await?;
                if (rows.len() as i64) < top_k {
                    // The index's scan budget ran out first: never fewer rows than match.
                    tx.batch_execute("SET LOCAL enable_indexscan = off").await?;
                    nearest(&tx, &table, scope, filters, vector, top_k).await?
                } else {
                    rows
                }
            }
        };
        rows.sort_by(|a, b| {
            a.get::<_, f64>("distance")
                .total_cmp(&b.get::<_, f64>("distance"))
                .then(a.get::<_, Uuid>("id").cmp(&b.get("id")))
        });
        rows.truncate(usize::try_from(top_k).unwrap_or(usize::MAX));
        tx.commit().await?;
        Ok(rows.iter().map(|r| hit(r, 1.0 - r.get::<_, f64>("distance"))).collect())
    }

    /// The keyword leg: the `depth` chunks of `collection` whose text matches `query` best,
    /// within `scope` and `filters` exactly as the vector leg. PostgreSQL's full-text search
    /// finds the candidates (the table's GIN-indexed `search_vector`, read with the
    /// collection's text search configuration) and BM25 ranks them, from the term
    /// statistics of the bases in `scope` only (another tenant's text never weighs on a
    /// score). The query is read forgivingly (`websearch_to_tsquery`: quotes for phrases,
    /// `-` to exclude; never a syntax error) and its words are alternatives, as a keyword
    /// search reads a question: a chunk matches any of them; a `-word` excludes, a phrase
    /// must be whole. One that leaves no word to look for (only stop words or punctuation)
    /// matches nothing. With `feedback`, a query without a phrase is ranked twice: the words
    /// weighing most in the first ranking's best chunks join it at a lower weight
    /// (`crate::keyword_feedback`) and the first ranking's best `max(2 × depth, 100)` are
    /// scored again: the added words reorder what the query's words found, never add a chunk
    /// the query does not match.
    ///
    /// Scoring every chunk that holds a common word would cost as many chunks as hold it, so
    /// the candidates are read rarest words first (MaxScore): the chunks holding the rarest
    /// words, up to about `RARE_CANDIDATES` of them, are scored whole; when the last of the
    /// `depth` best already outscores anything the unread words could add up to, no other
    /// chunk can enter, and the answer is exact. Otherwise the next rarest words are read too
    /// (`next_tier`; a scope of a few thousand chunks is read for every word at once) —
    /// within `reading.time_budget`: a query whose next words are held by so many chunks that
    /// reading them would outrun it (at a million chunks the commonest words' postings cost
    /// hundreds of milliseconds) answers with the best of the chunks holding the words read
    /// so far.
    pub async fn search_keyword(
        &self,
        collection: &str,
        scope: &[ScopeBase],
        filters: &SearchFilters,
        query: &str,
        depth: i64,
        reading: KeywordReading,
    ) -> Result<Vec<Hit>, StoreError> {
        if scope.is_empty() || depth < 1 {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let table = vector_table(collection);
        let (wanted, excluded) = split_exclusions(query);
        let (kb_ids, tenants) = scope_pairs(scope);
        // Read with the table's own language, found in the same statement; no row: no table yet.
        // The same statement counts the words the query's text holds (`spoken`, as `to_tsvector`
        // reads it) over the scope, so the ranking's statistics cost no round trip of their own.
        let Some(parsed) = client
            .query_typed_opt(
                &format!(
                    "SELECT w::text, x::text, querytree(w), spoken, held.* FROM
                     (SELECT replace(websearch_to_tsquery(l.language::regconfig, $4)::text, ' & ', ' | ')::tsquery AS w,
                             replace(plainto_tsquery(l.language::regconfig, $3)::text, ' & ', ' | ')::tsquery AS x,
                             tsvector_to_array(to_tsvector(l.language::regconfig, $4)) AS spoken
                      FROM ({TEXT_SEARCH_LANGUAGE}) AS l) AS parts,
                     LATERAL {}",
                    held_statistics(&statistics_sql(&table, 5, "parts.spoken"))
                ),
                &[
                    (&table, Type::TEXT),
                    (&VECTOR_TABLE_COMMENT, Type::TEXT),
                    (&excluded, Type::TEXT),
                    (&wanted, Type::TEXT),
                    (&kb_ids, Type::UUID_ARRAY),
                    (&tenants, Type::UUID_ARRAY),
                ],
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        let (wanted, excluded): (String, String) = (parsed.get(0), parsed.get(1));
        let mut lexemes = quoted_lexemes(&parsed.get::<_, String>(2));
        lexemes.sort();
        lexemes.dedup();
        if wanted.is_empty() || lexemes.is_empty() {
            return Ok(Vec::new());
        }
        let matching = |words: &str| match excluded.as_str() {
            "" => words.to_owned(),
            excluded => format!("({words}) & !({excluded})"),
        };
        let weighed: Vec<(String, f64)> = lexemes.iter().map(|lexeme| (lexeme.clone(), 1.0)).collect();
        let matches = matching(&wanted);
        let leg =
            KeywordLeg { client: &client, table: &table, scope, filters, depth, time_budget: reading.time_budget };
        let spoken: Vec<String> = parsed.get("spoken");
        let statistics = if lexemes.iter().all(|lexeme| spoken.contains(lexeme)) {
            tally(scope, &weighed, held_counts(&parsed))
        } else {
            // A word the query's text did not hold as `to_tsvector` reads it: counted apart.
            leg.statistics(&weighed).await?
        };
        let Some(statistics) = statistics else {
            return Ok(Vec::new()); // The scope holds no chunk.
        };
        // A phrase asks for those words in that order: feedback would find other wording.
        let Some(feedback) = reading.feedback.filter(|_| !wanted.contains('<')) else {
            let ranked = leg.rank(&matches, statistics).await?;
            return leg.hits(&ranked).await;
        };
        // Ranked deeper first, so a chunk just below `depth` may climb once the added words weigh.
        let deeper = KeywordLeg { depth: depth.saturating_mul(2).max(FEEDBACK_POOL), ..leg };
        let ranked = deeper.rank(&matches, statistics).await?;
        let best: Vec<Uuid> = ranked.iter().take(feedback.chunks).map(|r| r.id).collect();
        let words = client
            .query_typed(
                &format!(
                    "SELECT c.id, t.lexeme, cardinality(t.positions)::float8, c.search_length::float8
                     FROM {table} AS c, unnest(c.search_vector) AS t WHERE c.id = ANY($1)"
                ),
                &[(&best, Type::UUID_ARRAY)],
            )
            .await?;
        let chunks: Vec<FeedbackChunk> = ranked
            .iter()
            .take(feedback.chunks)
            .map(|r| {
                let own = words.iter().filter(|w| w.get::<_, Uuid>(0) == r.id);
                FeedbackChunk {
                    score: r.score,
                    length: own.clone().next().map_or(0.0, |w| w.get(3)),
                    words: own.map(|w| (w.get(1), w.get(2))).collect(),
                }
            })
            .collect();
        let expanded = expanded_query(&lexemes, &chunks, feedback);
        // The same chunks, ranked again with the added words: they reorder what the query's
        // own words matched and never add a chunk.
        let pooled: Vec<Uuid> = ranked.iter().map(|r| r.id).collect();
        leg.rescored_hits(&pooled, &expanded).await
    }

    /// The `organizational_unit` values present in `collection` within `scope`, sorted;
    /// never the empty string.
    pub async fn filter_values(&self, collection: &str, scope: &[ScopeBase]) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        if vector_width(&client, collection).await?.is_none() || scope.is_empty() {
            return Ok(Vec::new());
        }
        let table = vector_table(collection);
        let (kb_ids, tenants) = scope_pairs(scope);
        let rows = client
            .query(
                &format!(
                    "SELECT DISTINCT organizational_unit FROM {table} \
                     WHERE (kb_id, coalesce(org_id, '{NO_TENANT}'::uuid)) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
                     AND organizational_unit IS NOT NULL AND organizational_unit <> '' ORDER BY 1"
                ),
                &[&kb_ids, &tenants],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// One keyword ranking's fixed parts: where it reads and how many chunks it keeps.
#[derive(Clone, Copy)]
struct KeywordLeg<'a> {
    /// Every statement goes out with its parameters' types (`query_typed`): one round trip
    /// each, where a statement prepared first takes two.
    client: &'a tokio_postgres::Client,
    table: &'a str,
    scope: &'a [ScopeBase],
    filters: &'a SearchFilters,
    depth: i64,
    /// How long it reads on after its first reading (`KeywordReading::time_budget`).
    time_budget: Option<Duration>,
}

/// The scope's term statistics for a query's words: how many chunks the scope holds, their
/// average length, and each word (rarest first) with how many chunks hold it and its idf
/// times its weight in the query.
struct Statistics {
    /// Chunks in the scope.
    chunks: f64,
    average_length: f64,
    lexemes: Vec<String>,
    holding: Vec<f64>,
    idfs: Vec<f64>,
}

/// The scope's bases and, beside each, its tenant (the nil UUID for none), as the term
/// statistics are keyed.
fn scope_pairs(scope: &[ScopeBase]) -> (Vec<Uuid>, Vec<Uuid>) {
    scope.iter().map(|b| (b.kb_id, b.org_id.unwrap_or(NO_TENANT))).unzip()
}

/// The statement reading `table`'s term statistics for the words of the `text[]` expression
/// `lexemes` (the empty lexeme, whose rows hold the totals, always added), the scope's bases
/// in parameter `$bases` and their tenants in the next (`scope_pairs`). Every column of the
/// primary key is a condition of its own, so the index finds each (base, word) row directly
/// whatever the planner knows of the table: joined on the pairs instead, a never-analysed
/// table (a fresh or busy one) was read whole, 20,000 rows and 12 ms at 100,000 chunks
/// (BENCHMARKS.md, "Scale"). The pairs are matched in `tally`, so a base's words count only
/// under its own tenant.
fn statistics_sql(table: &str, bases: usize, lexemes: &str) -> String {
    let tenants = bases + 1;
    format!(
        "SELECT kb_id, org_id, lexeme, chunks::float8 AS chunks, occurrences::float8 AS occurrences
         FROM \"{table}$terms\" WHERE kb_id = ANY(${bases}::uuid[]) AND org_id = ANY(${tenants}::uuid[])
         AND lexeme = ANY({lexemes} || ''::text)"
    )
}

/// The rows `statistics_sql` reads as one row of arrays (`held`): the one shape every
/// statement reading the statistics returns (`held_counts` reads it), so one that reads
/// something else carries them beside it, one round trip where two were.
fn held_statistics(statistics_sql: &str) -> String {
    format!(
        "(SELECT array_agg(kb_id) AS held_kb_ids, array_agg(org_id) AS held_org_ids, array_agg(lexeme) AS held_lexemes,
                 array_agg(chunks) AS held_chunks, array_agg(occurrences) AS held_occurrences
          FROM ({statistics_sql}) AS counts) AS held"
    )
}

/// The term counts a row carrying `held_statistics` holds (none read: `NULL` arrays).
fn held_counts(row: &tokio_postgres::Row) -> impl Iterator<Item = TermCount> {
    let numbers = |name: &str| row.get::<_, Option<Vec<f64>>>(name).unwrap_or_default();
    let kb_ids: Option<Vec<Uuid>> = row.get("held_kb_ids");
    let org_ids: Option<Vec<Uuid>> = row.get("held_org_ids");
    let lexemes: Option<Vec<String>> = row.get("held_lexemes");
    let pairs = kb_ids.unwrap_or_default().into_iter().zip(org_ids.unwrap_or_default());
    let counted = numbers("held_chunks").into_iter().zip(numbers("held_occurrences"));
    pairs.zip(lexemes.unwrap_or_default()).zip(counted).map(|(((kb_id, org_id), lexeme), (chunks, occurrences))| {
        TermCount { kb_id, org_id, lexeme, chunks, occurrences }
    })
}

/// The statistics of `words` from the term counts `statistics_sql` read, each counted only
/// where its (base, tenant) pair is one of `scope`'s; `None` when the scope holds no chunk.
fn tally(scope: &[ScopeBase], words: &[(String, f64)], counts: impl Iterator<Item = TermCount>) -> Option<Statistics> {
    let mut counted: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for count in
        counts.filter(|c| scope.iter().any(|b| b.kb_id == c.kb_id && b.org_id.unwrap_or(NO_TENANT) == c.org_id))
    {
        let entry = counted.entry(count.lexeme).or_default();
        entry.0 += count.chunks;
        entry.1 += count.occurrences;
    }
    let (chunks, occurrences) = counted.get("").copied().unwrap_or_default();
    if chunks == 0.0 {
        return None;
    }
    let mut terms: Vec<(String, f64)> =
        words.iter().map(|(lexeme, _)| (lexeme.clone(), counted.get(lexeme).map_or(0.0, |(held, _)| *held))).collect();
    terms.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let weight_of = |lexeme: &str| words.iter().find(|(w, _)| w == lexeme).map_or(0.0, |(_, weight)| *weight);
    Some(Statistics {
        chunks,
        average_length: (occurrences / chunks).max(1.0),
        idfs: terms.iter().map(|(lexeme, holding)| bm25_idf(chunks, *holding) * weight_of(lexeme)).collect(),
        holding: terms.iter().map(|(_, holding)| *holding).collect(),
        lexemes: terms.into_iter().map(|(lexeme, _)| lexeme).collect(),
    })
}

/// One row of the term statistics: how many of a base's chunks hold `lexeme` and how often
/// (the empty lexeme: the base's chunks and their words).
struct TermCount {
    kb_id: Uuid,
    org_id: Uuid,
    lexeme: String,
    chunks: f64,
    occurrences: f64,
}

/// What a candidate chunk is scored from, its words in parameter `$n`: its id, its length
/// and its `tsvector` filtered to those words (`keyword_scoring`).
fn scoring_columns(n: usize) -> String {
    format!("c.id, c.search_length::float8, ts_filter(setweight(c.search_vector, 'A', ${n}::text[]), '{{a}}')::text")
}

const HIT_COLUMNS: &str = "id, kb_id, document_id, filename, chunk_index, content, metadata, source, document_type,
                           organizational_unit, document_date";

impl KeywordLeg<'_> {
    /// The statistics of `words` (each lexeme with its weight in the query) over the
    /// scope; `None` when the scope holds no chunk at all.
    async fn statistics(&self, words: &[(String, f64)]) -> Result<Option<Statistics>, StoreError> {
        let (kb_ids, tenants) = scope_pairs(self.scope);
        let lexemes: Vec<&str> = words.iter().map(|(lexeme, _)| lexeme.as_str()).collect();
        let held = self
            .client
            .query_typed_one(
                &format!("SELECT held.* FROM {}", held_statistics(&statistics_sql(self.table, 1, "$3::text[]"))),
                &[(&kb_ids, Type::UUID_ARRAY), (&tenants, Type::UUID_ARRAY), (&lexemes, Type::TEXT_ARRAY)],
            )
            .await?;
        Ok(tally(self.scope, words, held_counts(&held)))
    }

    /// The `depth` chunks matching `tsquery` that BM25 ranks best for the words `statistics`
    /// describes, best first.
    async fn rank(&self, tsquery: &str, statistics: Statistics) -> Result<Vec<Scored>, StoreError> {
        let Statistics { chunks, average_length, lexemes, holding, idfs } = statistics;
        let bm25 = Bm25::new(&lexemes, &idfs, average_length);
        let started = Instant::now();
        // The last complete reading's answer: exact among the chunks holding the words read.
        let mut answered: Option<Vec<Scored>> = None;
        // Whether the budget's transaction is open.
        let mut timed = false;
        let mut read = first_tier(&holding, chunks);
        loop {
            // The candidates: chunks matching the query and holding one of the words read.
            let candidates = if read < lexemes.len() {
                format!("({tsquery}) & ({})", any_of(&lexemes[..read]))
            } else {
                tsquery.to_owned()
            };
            // Once the answer is full, the readings after it run within what is left of the
            // budget: one transaction holds them, its statement timeout that time, and a
            // reading that would outrun it keeps the answer before it; an answer short of
            // `depth` reads on whatever it costs (never fewer rows than match).
            if let (Some(rows), Some(budget)) = (&answered, self.time_budget)
                && rows.len() as i64 == self.depth
            {
                let Some(left) = budget.checked_sub(started.elapsed()).filter(|left| *left >= MIN_READING_TIME) else {
                    self.end_timed(timed, true).await?;
                    return Ok(answered.unwrap_or_default());
                };
                if !timed {
                    let milliseconds = left.as_millis().max(1);
                    self.client.batch_execute(&format!("BEGIN; SET LOCAL statement_timeout = {milliseconds}")).await?;
                    timed = true;
                }
            }
            let rows = match self.read(&candidates, &lexemes, &bm25).await {
                Ok(rows) => rows,
                Err(StoreError::Query(error)) if timed && error.code() == Some(&SqlState::QUERY_CANCELED) => {
                    self.end_timed(timed, false).await?;
                    return Ok(answered.unwrap_or_default());
                }
                Err(error) => {
                    let _ = self.end_timed(timed, false).await;
                    return Err(error);
                }
            };
            // A chunk holding none of the words read scores at most what the unread words
            // could each add at their most (BM25 saturates at idf × (k1 + 1)).
            let unread_bound: f64 = idfs[read.min(idfs.len())..].iter().map(|idf| idf * (BM25_K1 + 1.0)).sum();
            let full = rows.len() as i64 == self.depth;
            let last = rows.last().map_or(0.0, |r| r.score);
            if read >= lexemes.len() || (full && last > unread_bound) {
                self.end_timed(timed, true).await?;
                return Ok(rows);
            }
            answered = Some(rows);
            read = next_tier(&holding, read);
        }
    }

    /// Ends the budget's transaction when one is `open`: committed, or rolled back after a
    /// cancelled reading.
    async fn end_timed(&self, open: bool, commit: bool) -> Result<(), StoreError> {
        if open {
            self.client.batch_execute(if commit { "COMMIT" } else { "ROLLBACK" }).await?;
        }
        Ok(())
    }

    /// The `depth` best of the scope's chunks matching `candidates`, scored for `lexemes`.
    /// The candidates stream past, only the best kept (`Best`), however many match.
    async fn read(&self, candidates: &str, lexemes: &[String], bm25: &Bm25<'_>) -> Result<Vec<Scored>, StoreError> {
        let mut best = Best::new(self.depth);
        for base in self.scope {
            let sql = format!(
                "SELECT {} FROM {} AS c
                 WHERE kb_id = $1 AND {} {WHERE_FILTERS} AND c.search_vector @@ $9::text::tsquery",
                scoring_columns(10),
                self.table,
                tenant_clause(base)
            );
            let mut params: Vec<(&(dyn ToSql + Sync), Type)> = scoped_params(base, self.filters).into();
            params.extend([(&candidates as &(dyn ToSql + Sync), Type::TEXT), (&lexemes, Type::TEXT_ARRAY)]);
            let rows = self.client.query_typed_raw(&sql, params).await?;
            let mut rows = std::pin::pin!(rows);
            while let Some(row) = rows.try_next().await? {
                best.push(Scored { id: row.get(0), score: bm25.score(row.get(2), row.get(1)) });
            }
        }
        Ok(best.into_sorted())
    }

    /// The chunks `ids` (found by `rank` within this scope) scored again for `words`: the
    /// `depth` best as hits, best first. One statement reads the words' statistics, the
    /// chunks' scoring columns and their whole rows: one round trip where three were. The
    /// pool's rows are held until scored — twice `depth`: 200 at the API's `top_k` 100, 1,000
    /// at its deepest grouped search — where the hits alone were `depth`.
    async fn rescored_hits(&self, ids: &[Uuid], words: &[(String, f64)]) -> Result<Vec<Hit>, StoreError> {
        let (kb_ids, tenants) = scope_pairs(self.scope);
        let lexemes: Vec<&str> = words.iter().map(|(lexeme, _)| lexeme.as_str()).collect();
        let sql = format!(
            "SELECT {}, {HIT_COLUMNS}, held.* FROM {} AS c, {} WHERE c.id = ANY($4)",
            scoring_columns(3),
            self.table,
            held_statistics(&statistics_sql(self.table, 1, "$3::text[]"))
        );
        let rows = self
            .client
            .query_typed(
                &sql,
                &[
                    (&kb_ids, Type::UUID_ARRAY),
                    (&tenants, Type::UUID_ARRAY),
                    (&lexemes, Type::TEXT_ARRAY),
                    (&ids, Type::UUID_ARRAY),
                ],
            )
            .await?;
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let Some(Statistics { average_length, lexemes, idfs, .. }) = tally(self.scope, words, held_counts(first))
        else {
            return Ok(Vec::new());
        };
        let bm25 = Bm25::new(&lexemes, &idfs, average_length);
        let mut best = Best::new(self.depth);
        for row in &rows {
            best.push(Scored { id: row.get(0), score: bm25.score(row.get(2), row.get(1)) });
        }
        Ok(hits_in_order(&best.into_sorted(), &rows))
    }

    /// The chunks `ranked` (found within this scope) read whole, as hits in that order.
    async fn hits(&self, ranked: &[Scored]) -> Result<Vec<Hit>, StoreError> {
        let ids: Vec<Uuid> = ranked.iter().map(|r| r.id).collect();
        let rows = self
            .client
            .query_typed(
                &format!("SELECT {HIT_COLUMNS} FROM {} WHERE id = ANY($1)", self.table),
                &[(&ids, Type::UUID_ARRAY)],
            )
            .await?;
        Ok(hits_in_order(ranked, &rows))
    }
}

/// The chunk rows `rows` as hits in the order and with the scores of `ranked`; a chunk
/// deleted since it was scored (no row) is left out.
fn hits_in_order(ranked: &[Scored], rows: &[tokio_postgres::Row]) -> Vec<Hit> {
    let mut rows: HashMap<Uuid, &tokio_postgres::Row> = rows.iter().map(|r| (r.get("id"), r)).collect();
    ranked.iter().filter_map(|r| rows.remove(&r.id).map(|row| hit(row, r.score))).collect()
}

/// A reading is not started with less time than this left.
const MIN_READING_TIME: Duration = Duration::from_millis(5);

/// How many chunks feedback ranks again, at least: on the relevance benchmark, reordering
/// the first 100 gained as much as ranking every match again, and 50 less.
const FEEDBACK_POOL: i64 = 100;

/// About how many chunks the keyword leg scores before it knows whether the rest can matter.
const RARE_CANDIDATES: f64 = 1_000.0;

/// A scope of at most this many chunks is read for every word at once: a reading scans a scope
/// that small whole anyway, so reading it a word at a time pays the scan again for each word
/// (the relevance benchmark's 2,722 chunks: four readings of 12–15 ms against one of 18).
const WHOLE_SCOPE_CHUNKS: f64 = 4.0 * RARE_CANDIDATES;

/// A later reading adds the next rarest words while, with those read, they are held by at most
/// this many times as many chunks as those read (and always one more word): few readings
/// where the words are held alike, a word at a time where the next is far commoner, so each
/// reading costs at most a few times the one before it.
const TIER_GROWTH: f64 = 4.0;

/// How many of the rarest words (`holding`, ascending: how many chunks hold each) are read
/// first: every word in a scope of at most [`WHOLE_SCOPE_CHUNKS`] `chunks`; elsewhere at least
/// one, and more while together they are held by at most `RARE_CANDIDATES`.
fn first_tier(holding: &[f64], chunks: f64) -> usize {
    if chunks <= WHOLE_SCOPE_CHUNKS {
        return holding.len();
    }
    tier_end(holding, 0, RARE_CANDIDATES)
}

/// How many words the reading after one of `read` words reads: at least one more, and more
/// while together they are held by at most [`TIER_GROWTH`] times the chunks holding those read.
fn next_tier(holding: &[f64], read: usize) -> usize {
    let held: f64 = holding[..read.min(holding.len())].iter().sum();
    tier_end(holding, read, TIER_GROWTH * held.max(1.0))
}

/// The end of the tier after the first `read` of `holding`: one more word while one is left,
/// and more while the chunks holding every word to the end stay within `budget`.
fn tier_end(holding: &[f64], read: usize, budget: f64) -> usize {
    let mut total: f64 = holding[..read.min(holding.len())].iter().sum();
    let mut end = read;
    while let Some(&more) = holding.get(end) {
        if end > read && total + more > budget {
            break;
        }
        total += more;
        end += 1;
    }
    end
}

/// A `tsquery` matching any of `lexemes`, each taken as it is (quoted: no parsing, no
/// stemming), in the text form PostgreSQL reads.
fn any_of(lexemes: &[String]) -> String {
    lexemes
        .iter()
        .map(|lexeme| format!("'{}'", lexeme.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The lexemes of a `tsquery`'s text form (each quoted; inside, `''` is a quote and a
/// backslash escapes the next character).
fn quoted_lexemes(text: &str) -> Vec<String> {
    let mut lexemes = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        lexemes.push(read_quoted(&mut chars));
    }
    lexemes
}

/// BM25's inverse document frequency of a word held by `holding` of `chunks` chunks, in
/// Lucene's form (never negative, so a common word still counts a little).
pub fn bm25_idf(chunks: f64, holding: f64) -> f64 {
    (1.0 + (chunks - holding + 0.5) / (holding + 0.5)).ln()
}

/// A keyword query's wanted part and its excluded words (`-word` outside quotes), so the
/// wanted words can be alternatives while an exclusion still excludes.
pub fn split_exclusions(query: &str) -> (String, String) {
    let (mut wanted, mut excluded) = (Vec::new(), Vec::new());
    let mut quoted = false;
    for token in query.split_whitespace() {
        let opens = token.matches('"').count() % 2 == 1;
        match token.strip_prefix('-') {
            Some(word) if !quoted && !word.is_empty() && !word.starts_with('"') => excluded.push(word),
            _ => wanted.push(token),
        }
        quoted ^= opens;
    }
    (wanted.join(" "), excluded.join(" "))
}

/// A chunk row as a hit with its leg's `score`.
fn hit(r: &tokio_postgres::Row, score: f64) -> Hit {
    Hit {
        chunk_id: r.get("id"),
        kb_id: r.get("kb_id"),
        document_id: r.get("document_id"),
        filename: r.get("filename"),
        chunk_index: r.get("chunk_index"),
        content: r.get("content"),
        score,
        source: r.get("source"),
        document_type: r.get("document_type"),
        organizational_unit: r.get("organizational_unit"),
        document_date: r.get("document_date"),
        metadata: r.get("metadata"),
    }
}

/// The filtered query, one base at a time — each with plain predicates the planner can
/// estimate (`kb_id = …`, `org_id = …` or `IS NULL`), so it picks the right plan.
const WHERE_FILTERS: &str = "AND ($3::text[] IS NULL OR source = ANY($3))
    AND ($4::text[] IS NULL OR document_type = ANY($4))
    AND ($5::text[] IS NULL OR organizational_unit = ANY($5))
    AND ($6::date IS NULL OR document_date >= $6)
    AND ($7::date IS NULL OR document_date <= $7)
    AND ($8::uuid IS NULL OR document_id = $8)";

fn tenant_clause(base: &ScopeBase) -> &'static str {
    if base.org_id.is_some() { "org_id = $2" } else { "org_id IS NULL AND $2::uuid IS NULL" }
}

async fn nearest(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    scope: &[ScopeBase],
    filters: &SearchFilters,
    vector: &[f32],
    top_k: i64,
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let mut rows = Vec::new();
    for base in scope {
        let sql = format!(
            "SELECT id, kb_id, document_id, filename, chunk_index, content, metadata, source, document_type,
                    organizational_unit, document_date, embedding <=> $9::vector AS distance
             FROM {table} WHERE kb_id = $1 AND {} {WHERE_FILTERS}
             ORDER BY embedding <=> $9::vector LIMIT $10",
            tenant_clause(base)
        );
        let params = scoped_params(base, filters)
            .into_iter()
            .chain([(&vector as &(dyn ToSql + Sync), Type::FLOAT4_ARRAY), (&top_k, Type::INT8)]);
        rows.extend(tx.query_typed(&sql, &params.collect::<Vec<_>>()).await?);
    }
    Ok(rows)
}

/// The parameters `$1`…`$8` of a per-base query, each with its type so the statement goes out
/// in one round trip (`query_typed`): the base, its tenant, the filters. The query vector
/// goes as `real[]` and is cast to `vector` in the statement: a built-in type has a fixed OID,
/// where the extension's `vector` type's differs from one database to the next.
fn scoped_params<'a>(base: &'a ScopeBase, filters: &'a SearchFilters) -> [(&'a (dyn ToSql + Sync), Type); 8] {
    [
        (&base.kb_id, Type::UUID),
        (&base.org_id, Type::UUID),
        (&filters.source, Type::TEXT_ARRAY),
        (&filters.document_type, Type::TEXT_ARRAY),
        (&filters.organizational_unit, Type::TEXT_ARRAY),
        (&filters.date_from, Type::DATE),
        (&filters.date_to, Type::DATE),
        (&filters.parent_doc_id, Type::UUID),
    ]
}

/// How a filtered search ranks: exactly, through the HNSW index, or exactly when the rows
/// that pass the filters, read and counted in the same pass, are few enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ranking {
    Exact,
    ExactIfWithin,
    Index,
}

/// How far the planner's estimate of a filter's rows may be off before it is trusted to send
/// a search to the index unread: a filter it puts at more than this many times the exact
/// bound goes to the index; one below is read (and counted) first.
const ESTIMATE_MARGIN: i64 = 3;

/// The ranking for a filter the planner expects `estimate` rows to pass, `bound` the most
/// ranked exactly. Counting the rows instead cost a million-chunk table's 10% filter 39 of its
/// 59 ms (BENCHMARKS.md, "Scale"); an estimate that is too high costs recall only (the index,
/// scanned on in strict order, still fills `top_k` or falls back to an exact scan), one too
/// low only a read of `bound` rows.
fn ranking_for(estimate: i64, bound: i64) -> Ranking {
    if estimate > bound.saturating_mul(ESTIMATE_MARGIN) { Ranking::Index } else { Ranking::ExactIfWithin }
}

/// How many chunks in scope the planner expects to pass the filters (its estimate for each
/// base's query, with the filters' values bound).
async fn matching_estimate(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    scope: &[ScopeBase],
    filters: &SearchFilters,
) -> Result<i64, StoreError> {
    let mut total = 0;
    for base in scope {
        let sql = format!(
            "EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE kb_id = $1 AND {} {WHERE_FILTERS}",
            tenant_clause(base)
        );
        let plan: serde_json::Value = tx.query_typed_one(&sql, &scoped_params(base, filters)).await?.get(0);
        total += plan[0]["Plan"]["Plan Rows"].as_f64().unwrap_or(f64::MAX) as i64;
    }
    Ok(total)
}

/// The `top_k` nearest rows in scope passing the filters, ranked exactly, when at most
/// `bound` rows pass them in all; `None` when more do. Each base's rows are read once, at
/// most `bound + 1` of them, and counted as they are ranked.
async fn nearest_within(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    scope: &[ScopeBase],
    filters: &SearchFilters,
    vector: &[f32],
    top_k: i64,
    bound: i64,
) -> Result<Option<Vec<tokio_postgres::Row>>, StoreError> {
    let (mut rows, mut matching) = (Vec::new(), 0);
    let limit = bound + 1;
    for base in scope {
        // Only ids and distances are held (a hit's columns for 10,000 rows outgrew work_mem
        // and went to disk); the best are joined back. No ORDER BY reaches the table, so the
        // HNSW index cannot stand in for the exact ranking.
        let sql = format!(
            "WITH passing AS MATERIALIZED (
                 SELECT id, embedding <=> $9::vector AS distance
                 FROM {table} WHERE kb_id = $1 AND {} {WHERE_FILTERS} LIMIT $11),
             best AS (SELECT id, distance FROM passing ORDER BY distance, id LIMIT $10)
             SELECT c.id, c.kb_id, c.document_id, c.filename, c.chunk_index, c.content, c.metadata, c.source,
                    c.document_type, c.organizational_unit, c.document_date, best.distance,
                    (SELECT count(*) FROM passing) AS passing
             FROM best JOIN {table} AS c ON c.id = best.id",
            tenant_clause(base)
        );
        let params = scoped_params(base, filters).into_iter().chain([
            (&vector as &(dyn ToSql + Sync), Type::FLOAT4_ARRAY),
            (&top_k, Type::INT8),
            (&limit, Type::INT8),
        ]);
        let found = tx.query_typed(&sql, &params.collect::<Vec<_>>()).await?;
        matching += found.first().map_or(0, |row| row.get::<_, i64>("passing"));
        if matching > bound {
            return Ok(None);
        }
        rows.extend(found);
    }
    Ok(Some(rows))
}

/// The row count of `collection`'s vector table `table` as the planner estimates it, or
/// counted up to just past `EXACT_SCAN_ROWS` when it was never analysed; `None` when the
/// collection has no vector table yet. One typed statement: one round trip.
async fn table_rows(tx: &tokio_postgres::Transaction<'_>, table: &str) -> Result<Option<i64>, StoreError> {
    let Some(row) = tx
        .query_typed_opt(on_vector_table!("c.reltuples"), &[(&table, Type::TEXT), (&VECTOR_TABLE_COMMENT, Type::TEXT)])
        .await?
    else {
        return Ok(None);
    };
    let estimate: f32 = row.get(0);
    if estimate >= 0.0 {
        return Ok(Some(estimate as i64));
    }
    let limit = EXACT_SCAN_ROWS + 1;
    let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT $1) AS sample");
    Ok(Some(tx.query_typed_one(&sql, &[(&limit, Type::INT8)]).await?.get(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_are_told_from_wanted_words_and_phrases() {
        assert_eq!(split_exclusions("pump seal -gasket"), ("pump seal".to_owned(), "gasket".to_owned()));
        assert_eq!(split_exclusions("\"seal -kit\" -old"), ("\"seal -kit\"".to_owned(), "old".to_owned()));
        assert_eq!(split_exclusions("XJ-4471-B"), ("XJ-4471-B".to_owned(), String::new()));
        assert_eq!(split_exclusions("- -"), ("- -".to_owned(), String::new()));
        assert_eq!(split_exclusions(""), (String::new(), String::new()));
    }

    #[test]
    fn a_tsquery_s_lexemes_are_read_back_as_postgresql_wrote_them() {
        assert_eq!(quoted_lexemes("'pump' | 'seal' <-> 'kit'"), ["pump", "seal", "kit"]);
        assert_eq!(quoted_lexemes("'it''s' & !'a\\\\b'"), ["it's", "a\\b"]);
        assert_eq!(quoted_lexemes("'pump':*"), ["pump"]);
        assert!(quoted_lexemes("").is_empty());
        let lexemes = vec!["it's".to_owned(), "a\\b".to_owned()];
        assert_eq!(quoted_lexemes(&any_of(&lexemes)), lexemes);
    }

    #[test]
    fn a_filter_keeping_at_most_a_fiftieth_of_the_table_is_ranked_exactly() {
        assert_eq!(exact_filtered_rows(100_000), 2_000);
        assert_eq!(exact_filtered_rows(250_000), 5_000);
        assert_eq!(exact_filtered_rows(998_000), 10_000, "a million, as ANALYZE may estimate it");
        assert_eq!(exact_filtered_rows(50_000_000), 10_000);
    }

    #[test]
    fn a_filter_the_planner_expects_to_keep_many_rows_goes_to_the_index_unread() {
        let bound = exact_filtered_rows(1_000_000);
        assert_eq!(ranking_for(100_000, bound), Ranking::Index, "a 10% filter at a million");
        assert_eq!(ranking_for(10_000, bound), Ranking::ExactIfWithin, "a 1% filter is read and counted");
        assert_eq!(ranking_for(bound * ESTIMATE_MARGIN, bound), Ranking::ExactIfWithin, "within the margin");
        assert_eq!(ranking_for(0, bound), Ranking::ExactIfWithin, "an estimate of none is checked, never trusted");
    }

    #[test]
    fn the_search_list_widens_with_the_table() {
        assert_eq!(ef_search(10, 100_000), 100);
        assert_eq!(ef_search(10, 125_000), 100);
        assert_eq!(ef_search(10, 125_001), 200);
        assert_eq!(ef_search(50, 100_000), 500);
        assert_eq!(ef_search(10, 1_000_000), 800);
        assert_eq!(ef_search(50, 1_000_000), 1000);
        assert_eq!(ef_search(10, 100_000_000), 1000);
        assert_eq!(ef_search(10, 0), 100);
    }

    #[test]
    fn the_rarest_words_are_read_first_up_to_the_candidate_budget() {
        let large = 100_000.0;
        assert_eq!(first_tier(&[5.0, 40.0, 900.0, 40_000.0], large), 3);
        assert_eq!(first_tier(&[30_000.0, 40_000.0], large), 1, "at least the rarest");
        assert_eq!(first_tier(&[1.0, 2.0], large), 2);
        assert_eq!(first_tier(&[5.0, 40.0, 900.0, 2_000.0], 3_000.0), 4, "a small scope is read at once");
        // Later readings grow by words held alike, a word at a time where the next is commoner.
        assert_eq!(next_tier(&[500.0, 400.0, 600.0, 900.0, 1_000.0, 90_000.0], 2), 5);
        assert_eq!(next_tier(&[500.0, 40_000.0, 60_000.0], 1), 2, "at least one more word");
        assert_eq!(next_tier(&[500.0, 40_000.0, 60_000.0], 2), 3);
        assert!(bm25_idf(100.0, 1.0) > bm25_idf(100.0, 50.0));
        assert!(bm25_idf(100.0, 100.0) > 0.0, "a word every chunk holds still counts a little");
    }
}
