//! Answers kept for a while and a bounded number: a flood of distinct keys (tokens, callers) costs a fixed amount
//! of memory and each insertion constant time. Every entry lives equally long, so the order of insertion is the
//! order of expiry: the oldest go first, whether expired or pushed out by a full cache.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<Entries<K, V>>,
}

struct Entries<K, V> {
    by_key: HashMap<K, (Instant, V)>,
    /// Keys in the order they were stored, with when; a key stored again has its older place skipped.
    stored: VecDeque<(K, Instant)>,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        let entries = Entries { by_key: HashMap::new(), stored: VecDeque::new() };
        TtlCache { ttl, capacity, entries: Mutex::new(entries) }
    }

    /// The value of `key`, unless it expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.by_key.get(key).filter(|(stored, _)| stored.elapsed() < self.ttl).map(|(_, value)| value.clone())
    }

    pub fn insert(&self, key: K, value: V) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some((oldest, stored)) = entries.stored.front().cloned() {
            let expired = now.duration_since(stored) >= self.ttl;
            if !expired && entries.by_key.len() < self.capacity && entries.stored.len() < 2 * self.capacity {
                break;
            }
            entries.stored.pop_front();
            if entries.by_key.get(&oldest).is_some_and(|(current, _)| *current == stored) {
                entries.by_key.remove(&oldest);
            }
        }
        entries.stored.push_back((key.clone(), now));
        entries.by_key.insert(key, (now, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_cache_pushes_out_its_oldest_entry_and_an_expired_one_is_gone() {
        let cache = TtlCache::new(Duration::from_secs(60), 3);
        for key in 0..3 {
            cache.insert(key, key * 10);
        }
        cache.insert(0, 1);
        cache.insert(3, 30);
        assert_eq!((cache.get(&0), cache.get(&1), cache.get(&3)), (Some(1), None, Some(30)), "1 was the oldest");
        for key in 4..10_000 {
            cache.insert(key, key);
        }
        assert_eq!(cache.len(), 3, "bounded by its capacity");
        let short = TtlCache::new(Duration::from_millis(20), 8);
        short.insert("token", true);
        assert_eq!(short.get(&"token"), Some(true));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(short.get(&"token"), None, "expired");
        short.insert("next", true);
        assert_eq!(short.len(), 1, "the expired entry went when the next came");
    }
}
