//! Caps on the long-lived streams a caller holds (followed logs and subscriptions), per caller and in total: each
//! one costs a connection and a follower that polls the cluster, so no caller may hold what the others need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// How many streams may be open.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    pub per_caller: usize,
    pub total: usize,
}

#[derive(Clone)]
pub(super) struct Streams {
    limits: StreamLimits,
    open: Arc<Mutex<Open>>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_caller: HashMap<String, usize>,
}

/// Which cap a new stream would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Full {
    Caller(usize),
    Total(usize),
}

/// One open stream; closing it (dropping the slot) frees its place.
pub struct StreamSlot {
    open: Arc<Mutex<Open>>,
    caller: String,
}

impl Streams {
    pub(super) fn new(limits: StreamLimits) -> Self {
        Streams { limits, open: Arc::default() }
    }

    pub(super) fn open(&self, caller: &str) -> Result<StreamSlot, Full> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let of_caller = open.by_caller.get(caller).copied().unwrap_or(0);
        if of_caller >= self.limits.per_caller {
            return Err(Full::Caller(self.limits.per_caller));
        }
        if open.total >= self.limits.total {
            return Err(Full::Total(self.limits.total));
        }
        open.total += 1;
        *open.by_caller.entry(caller.to_owned()).or_default() += 1;
        Ok(StreamSlot { open: self.open.clone(), caller: caller.to_owned() })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total -= 1;
        if let Some(count) = open.by_caller.get_mut(&self.caller) {
            *count -= 1;
            if *count == 0 {
                open.by_caller.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_per_caller_and_in_total_and_freed_when_closed() {
        let streams = Streams::new(StreamLimits { per_caller: 2, total: 3 });
        let first = streams.open("alice").unwrap();
        let _second = streams.open("alice").unwrap();
        assert_eq!(streams.open("alice").err(), Some(Full::Caller(2)));
        let _bob = streams.open("bob").unwrap();
        assert_eq!(streams.open("carol").err(), Some(Full::Total(3)));
        drop(first);
        assert!(streams.open("alice").is_ok(), "a closed stream frees its place");
    }
}
