//! Keyless models' query embeddings, kept per sandbox: a repeated search (the same question
//! asked again, a page of results fetched twice) does not embed its query again.
//!
//! An entry is keyed by the asking tenant (the caller's organization, or the caller outside
//! any — never the base's owner, since an app base is every organization's), the service and
//! model, and the query's text: a tenant never finds, even by its latency, what another
//! tenant asked. Only keyless models are cached (the deployment's in-process model or
//! service, an organization's own service): a keyed provider's vectors are that provider's,
//! and its key's, to answer. The hit rate goes to the log with every lookup.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

/// How many queries a sandbox keeps (384 floats each: about 1.5 MB in all).
pub const QUERY_CACHE_ENTRIES: usize = 1024;

/// Who asked, of which service and model, what.
pub type QueryKey = (Uuid, String, String);

/// The tenant whose entries `caller`'s searches use: its organization, else itself.
pub fn tenant_of(caller: &sluice_domain::Caller) -> Uuid {
    caller.org_id.unwrap_or(caller.user_id)
}

#[derive(Debug)]
pub struct QueryCache {
    entries: Mutex<LruCache<QueryKey, Vec<f32>>>,
    hits: AtomicU64,
    lookups: AtomicU64,
}

impl QueryCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN))),
            hits: AtomicU64::new(0),
            lookups: AtomicU64::new(0),
        }
    }

    /// The vector kept for `key`, if any; counted and logged with the hit rate so far.
    pub fn get(&self, key: &QueryKey) -> Option<Vec<f32>> {
        let found = self.entries.lock().ok().and_then(|mut entries| entries.get(key).cloned());
        let lookups = self.lookups.fetch_add(1, Ordering::Relaxed) + 1;
        let hits = self.hits.fetch_add(u64::from(found.is_some()), Ordering::Relaxed) + u64::from(found.is_some());
        tracing::info!(
            hit = found.is_some(),
            hits,
            lookups,
            hit_rate = hits as f64 / lookups as f64,
            "query embedding cache"
        );
        found
    }

    pub fn put(&self, key: QueryKey, vector: Vec<f32>) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.put(key, vector);
        }
    }

    /// Hits and lookups so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.lookups.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tenant: u128, text: &str) -> QueryKey {
        (Uuid::from_u128(tenant), "all-minilm-l6-v2".to_owned(), text.to_owned())
    }

    #[test]
    fn a_query_is_found_again_by_its_tenant_only_and_the_oldest_goes_first() {
        let cache = QueryCache::new(2);
        assert_eq!(cache.get(&key(1, "tide tables")), None);
        cache.put(key(1, "tide tables"), vec![0.5, 0.25]);
        assert_eq!(cache.get(&key(1, "tide tables")), Some(vec![0.5, 0.25]));
        // Another tenant asking the same never sees the first one's entry.
        assert_eq!(cache.get(&key(2, "tide tables")), None);
        cache.put(key(1, "berths"), vec![1.0]);
        cache.put(key(1, "pilots"), vec![2.0]);
        // Two entries fit: the least recently used ("tide tables" was read before "berths"
        // was put) went.
        assert_eq!(cache.get(&key(1, "tide tables")), None);
        assert_eq!(cache.get(&key(1, "pilots")), Some(vec![2.0]));
        assert_eq!(cache.counts(), (2, 5));
    }
}
