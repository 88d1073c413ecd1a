//! A search request read once, at the edge, into types (serde's derive with
//! `deny_unknown_fields`); every refusal names the field at fault, as the API documents,
//! and the handlers after it work on types only.

use crate::error::{SearchError, invalid, unprocessable};
use serde::Deserialize;
use sluice_store::SearchFilters;
use uuid::Uuid;

pub const DEFAULT_TOP_K: i64 = 5;
pub const MAX_TOP_K: i64 = 100;
/// The longest query embedded.
pub const MAX_QUERY_CHARS: usize = 8_000;
/// The most collections (names and base ids together) one search reads.
pub const MAX_SEARCH_COLLECTIONS: usize = 20;
/// The most values one filter lists.
pub const MAX_FILTER_VALUES: usize = 100;

/// Which legs a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Hybrid,
    Vector,
    Keyword,
}

impl Mode {
    /// The mode a name says: `hybrid`, `vector` or `keyword`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "hybrid" => Some(Self::Hybrid),
            "vector" => Some(Self::Vector),
            "keyword" => Some(Self::Keyword),
            _ => None,
        }
    }
}

/// `group_by`'s one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum GroupBy {
    Document,
}

/// `POST /rag/search`'s body as sent; `null` and absent mean the same for every field.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    query: Option<String>,
    collections: Option<Vec<String>>,
    knowledge_base_ids: Option<Vec<Uuid>>,
    top_k: Option<i64>,
    filters: Option<Filters>,
    /// The legacy filter string: exactly `parent_doc_id == "<uuid>"`.
    filter: Option<String>,
    mode: Option<Mode>,
    explain: Option<bool>,
    group_by: Option<GroupBy>,
    rerank: Option<bool>,
}

/// The names `filters` takes, in the order the refusal lists them.
const FILTER_NAMES: &[&str] =
    &["source", "document_type", "organizational_unit", "date_from", "date_to", "parent_doc_id"];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Filters {
    source: Option<Vec<String>>,
    document_type: Option<Vec<String>>,
    organizational_unit: Option<Vec<String>>,
    date_from: Option<String>,
    date_to: Option<String>,
    parent_doc_id: Option<Uuid>,
}

/// What a search asks, once read and checked.
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub mode: Mode,
    pub top_k: i64,
    pub filters: SearchFilters,
    pub explain: bool,
    /// One hit per document (`group_by: "document"`): its best chunk, the others that
    /// matched as its `citations`; `top_k` then counts documents.
    pub by_document: bool,
    /// Whether to rerank: `None` follows each collection's setting, `Some(false)` skips it.
    pub rerank: Option<bool>,
}

/// A search request: what it asks, and the collections and bases it names (each named
/// once, at most `MAX_SEARCH_COLLECTIONS` together), still to be resolved for the caller.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: Query,
    pub names: Vec<String>,
    pub ids: Vec<Uuid>,
}

/// Reads a search body, refusing it naming the field at fault.
pub fn parse(bytes: &[u8]) -> Result<SearchRequest, SearchError> {
    let body: Body = sluice_web::typed_body(bytes).map_err(refusal)?;
    let text = match body.query {
        None => return Err(invalid("query", "query is required")),
        Some(text) if text.trim().is_empty() => return Err(invalid("query", "query must be a non-empty string")),
        Some(text) if text.chars().count() > MAX_QUERY_CHARS => {
            return Err(invalid("query", format!("the query is longer than {MAX_QUERY_CHARS} characters")));
        }
        Some(text) => text,
    };
    let top_k = match body.top_k {
        None => DEFAULT_TOP_K,
        Some(k) if (1..=MAX_TOP_K).contains(&k) => k,
        Some(_) => return Err(invalid("top_k", format!("top_k must be 1 to {MAX_TOP_K}"))),
    };
    let filters = filters(body.filters.unwrap_or_default(), body.filter.as_deref())?;
    let names = distinct(body.collections.unwrap_or_default());
    let ids = distinct(body.knowledge_base_ids.unwrap_or_default());
    // Bounded before any is resolved: each costs a lookup, and each a query.
    if names.len() + ids.len() > MAX_SEARCH_COLLECTIONS {
        let field =
            if names.len() > MAX_SEARCH_COLLECTIONS || ids.is_empty() { "collections" } else { "knowledge_base_ids" };
        return Err(invalid(field, format!("a search reads at most {MAX_SEARCH_COLLECTIONS} collections and bases")));
    }
    if names.is_empty() && ids.is_empty() {
        return Err(invalid("collections", "name at least one collection"));
    }
    let query = Query {
        text,
        mode: body.mode.unwrap_or(Mode::Hybrid),
        top_k,
        filters,
        explain: body.explain.unwrap_or(false),
        by_document: body.group_by == Some(GroupBy::Document),
        rerank: body.rerank,
    };
    Ok(SearchRequest { query, names, ids })
}

/// The refusal for a body serde could not read: the field its path starts at, worded as
/// that field's rule.
fn refusal(refused: sluice_web::BodyRefusal) -> SearchError {
    let second = refused.path.get(1).map(String::as_str);
    match (refused.field(), second, refused.unknown.clone()) {
        (Some("filters"), _, Some(name)) => {
            invalid("filters", format!("{name} is not a filter; filters are {}", FILTER_NAMES.join(", ")))
        }
        (_, _, Some(name)) => SearchError::UnknownField { field: name },
        (Some("filters"), Some(name @ ("source" | "document_type" | "organizational_unit")), None)
            if refused.in_list =>
        {
            invalid(name, format!("filters.{name} must be a list of non-empty strings"))
        }
        (Some("filters"), Some(name @ ("source" | "document_type" | "organizational_unit")), None) => {
            invalid(name, format!("filters.{name} must be a list of strings"))
        }
        (Some("filters"), Some(name @ ("date_from" | "date_to")), None) => {
            invalid(name, format!("filters.{name} must be a date, YYYY-MM-DD"))
        }
        (Some("filters"), Some("parent_doc_id"), None) => {
            invalid("parent_doc_id", "filters.parent_doc_id must be a UUID")
        }
        (Some(field), None, None) | (Some(field @ "filters"), Some(_), None) => invalid(field, rule(field)),
        _ => invalid("body", "the body must be a JSON object"),
    }
}

/// What a top-level field must be.
fn rule(field: &str) -> String {
    match field {
        "query" => "query must be a non-empty string".to_owned(),
        "collections" => "collections must be a list of names".to_owned(),
        "knowledge_base_ids" => "knowledge_base_ids must be a list of UUIDs".to_owned(),
        "top_k" => format!("top_k must be 1 to {MAX_TOP_K}"),
        "filters" => "filters must be an object".to_owned(),
        "filter" => "filter must be a string".to_owned(),
        "mode" => "mode is hybrid (the default), vector or keyword".to_owned(),
        "explain" => "explain must be true or false".to_owned(),
        "group_by" => "group_by is \"document\" (one hit per document) or absent".to_owned(),
        "rerank" => "rerank must be true or false (absent: each collection's setting)".to_owned(),
        other => format!("{other} is not a field of this request"),
    }
}

/// The filters of a search: `filters` and the legacy `filter`, never both for one thing.
fn filters(given: Filters, legacy: Option<&str>) -> Result<SearchFilters, SearchError> {
    let mut filters = SearchFilters {
        source: values(given.source, "source")?,
        document_type: values(given.document_type, "document_type")?,
        organizational_unit: values(given.organizational_unit, "organizational_unit")?,
        date_from: date(given.date_from.as_deref(), "date_from")?,
        date_to: date(given.date_to.as_deref(), "date_to")?,
        parent_doc_id: given.parent_doc_id,
    };
    if let Some(text) = legacy.filter(|text| !text.trim().is_empty()) {
        let parent = legacy_filter(text).ok_or_else(|| {
            invalid("filter", "the filter string accepts only parent_doc_id == \"<id>\"; use filters for the rest")
        })?;
        if filters.parent_doc_id.is_some() {
            return Err(invalid("filter", "give parent_doc_id in filters or in filter, not both"));
        }
        filters.parent_doc_id = Some(parent);
    }
    Ok(filters)
}

/// A filter's values, each once: an empty list would read as "match everything".
fn values(given: Option<Vec<String>>, field: &'static str) -> Result<Option<Vec<String>>, SearchError> {
    let Some(values) = given else { return Ok(None) };
    if values.is_empty() {
        return Err(unprocessable(field, "an empty list matches nothing; leave the filter out instead"));
    }
    if values.len() > MAX_FILTER_VALUES {
        return Err(invalid(field, format!("filters.{field} may list at most {MAX_FILTER_VALUES} values")));
    }
    if values.iter().any(String::is_empty) {
        return Err(invalid(field, format!("filters.{field} must be a list of non-empty strings")));
    }
    Ok(Some(distinct(values)))
}

fn date(given: Option<&str>, field: &'static str) -> Result<Option<time::Date>, SearchError> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    given
        .map(|text| time::Date::parse(text, &format))
        .transpose()
        .map_err(|_| invalid(field, format!("filters.{field} must be a date, YYYY-MM-DD")))
}

/// The legacy `filter` string: exactly `parent_doc_id == "<uuid>"`, nothing else.
fn legacy_filter(text: &str) -> Option<Uuid> {
    let rest = text.trim().strip_prefix("parent_doc_id")?.trim_start().strip_prefix("==")?.trim();
    let quoted = rest.strip_prefix('"')?.strip_suffix('"')?;
    Uuid::parse_str(quoted).ok()
}

/// `values` without repeats, in first-seen order.
fn distinct<T: PartialEq>(values: Vec<T>) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(values.len());
    for value in values {
        if !kept.contains(&value) {
            kept.push(value);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn read(body: Value) -> Result<SearchRequest, SearchError> {
        parse(body.to_string().as_bytes())
    }

    /// The field a refusal names, and its status's kind.
    fn refused(body: Value) -> (String, String) {
        match read(body.clone()) {
            Err(SearchError::Invalid { field, message }) => (field, message),
            Err(SearchError::UnknownField { field }) => (field, "unknown".to_owned()),
            Err(SearchError::Unprocessable { field, message }) => (field.to_owned(), message),
            other => panic!("{body} was not refused: {other:?}"),
        }
    }

    #[test]
    fn the_mode_is_hybrid_unless_named() {
        let base = json!({"query": "pumps", "collections": ["c"]});
        assert_eq!(read(base.clone()).expect("read").query.mode, Mode::Hybrid);
        let mut keyword = base.clone();
        keyword["mode"] = json!("keyword");
        assert_eq!(read(keyword).expect("read").query.mode, Mode::Keyword);
        let mut wrong = base;
        wrong["mode"] = json!("bm25");
        assert_eq!(refused(wrong).0, "mode");
    }

    #[test]
    fn a_whole_request_reads_into_types_with_repeats_dropped() {
        let id = Uuid::new_v4();
        let request = read(json!({"query": "pumps", "collections": ["a", "b", "a"], "knowledge_base_ids": [id, id],
            "top_k": 7, "mode": "vector", "explain": true, "group_by": "document", "rerank": false, "filter": null,
            "filters": {"source": ["upload"], "document_type": ["pdf", "pdf", "md"], "organizational_unit": ["Ops"],
                "date_from": "2026-01-01", "date_to": "2026-12-31", "parent_doc_id": id}}))
        .expect("read");
        assert_eq!(request.names, ["a", "b"]);
        assert_eq!(request.ids, [id]);
        let query = request.query;
        assert_eq!(
            (query.top_k, query.mode, query.explain, query.by_document, query.rerank),
            (7, Mode::Vector, true, true, Some(false))
        );
        assert_eq!(query.filters.document_type, Some(vec!["pdf".to_owned(), "md".to_owned()]));
        assert_eq!(query.filters.date_to.map(|d| d.to_string()), Some("2026-12-31".to_owned()));
        assert_eq!(query.filters.parent_doc_id, Some(id));
    }

    #[test]
    fn every_refusal_names_the_field_at_fault() {
        let id = Uuid::new_v4();
        let with = |extra: Value| {
            let mut body = json!({"query": "pumps", "collections": ["c"]});
            for (key, value) in extra.as_object().expect("object") {
                body[key] = value.clone();
            }
            body
        };
        for (body, field) in [
            (json!({"collections": ["c"]}), "query"),
            (with(json!({"query": "  "})), "query"),
            (with(json!({"query": 7})), "query"),
            (with(json!({"query": "x".repeat(MAX_QUERY_CHARS + 1)})), "query"),
            (with(json!({"collections": "c"})), "collections"),
            (with(json!({"collections": [1]})), "collections"),
            (json!({"query": "pumps"}), "collections"),
            (with(json!({"knowledge_base_ids": ["not a uuid"]})), "knowledge_base_ids"),
            (with(json!({"top_k": 0})), "top_k"),
            (with(json!({"top_k": 101})), "top_k"),
            (with(json!({"top_k": 2.5})), "top_k"),
            (with(json!({"top_k": "5"})), "top_k"),
            (with(json!({"explain": "yes"})), "explain"),
            (with(json!({"group_by": "chunk"})), "group_by"),
            (with(json!({"rerank": 1})), "rerank"),
            (with(json!({"filter": 3})), "filter"),
            (with(json!({"filter": "source == \"upload\""})), "filter"),
            (with(json!({"filter": format!("parent_doc_id == \"{id}\" and x")})), "filter"),
            (with(json!({"filter": format!("parent_doc_id == \"{id}\""), "filters": {"parent_doc_id": id}})), "filter"),
            (with(json!({"filters": []})), "filters"),
            (with(json!({"filters": {"colour": ["red"]}})), "filters"),
            (with(json!({"filters": {"date_from": "yesterday"}})), "date_from"),
            (with(json!({"filters": {"date_to": 20260101}})), "date_to"),
            (with(json!({"filters": {"source": "upload"}})), "source"),
            (with(json!({"filters": {"document_type": [""]}})), "document_type"),
            (with(json!({"filters": {"organizational_unit": [7]}})), "organizational_unit"),
            (with(json!({"filters": {"parent_doc_id": "x"}})), "parent_doc_id"),
            (with(json!({"colour": "red"})), "colour"),
            (json!(["pumps"]), "body"),
        ] {
            assert_eq!(refused(body.clone()).0, field, "{body}");
        }
        let (_, why) = refused(with(json!({"filters": {"colour": ["red"]}})));
        assert!(why.starts_with("colour is not a filter; filters are source, "), "{why}");
        assert_eq!(refused(with(json!({"filters": {"source": []}}))).0, "source", "an empty list is a 422");
        assert!(matches!(read(with(json!({"filters": {"source": []}}))), Err(SearchError::Unprocessable { .. })));
        let many: Vec<String> = (0..=MAX_FILTER_VALUES).map(|n| format!("unit {n}")).collect();
        assert_eq!(refused(with(json!({"filters": {"organizational_unit": many}}))).0, "organizational_unit");
        let names: Vec<String> = (0..=MAX_SEARCH_COLLECTIONS).map(|n| format!("c{n}")).collect();
        assert_eq!(refused(json!({"query": "q", "collections": names})).0, "collections");
        let ids: Vec<Uuid> = (0..MAX_SEARCH_COLLECTIONS).map(|_| Uuid::new_v4()).collect();
        assert_eq!(
            refused(json!({"query": "q", "collections": ["c"], "knowledge_base_ids": ids})).0,
            "knowledge_base_ids"
        );
        assert!(
            parse(b"{\"query\": \"q\", \"collections\": [\"c\"]} trailing").is_err(),
            "one JSON object, nothing after"
        );
    }

    #[test]
    fn the_legacy_filter_names_one_document() {
        let id = Uuid::new_v4();
        let request = read(json!({"query": "q", "collections": ["c"], "filter": format!("parent_doc_id == \"{id}\"")}))
            .expect("legacy");
        assert_eq!(request.query.filters.parent_doc_id, Some(id));
        let blank = read(json!({"query": "q", "collections": ["c"], "filter": "  "})).expect("blank");
        assert_eq!(blank.query.filters, SearchFilters::default());
    }
}
