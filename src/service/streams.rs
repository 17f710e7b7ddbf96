//! Caps on the long-lived streams a caller holds (followed logs and subscriptions), per caller and tenant and in
//! total: each one costs a connection and a follower that polls the cluster, so no caller may hold what the others
//! need. A caller is a username within a tenant: tenants behind one gateway identity do not share a cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::domain::tenant::Tenant;

/// Whose streams count together: a username, for the tenant its request named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Holder {
    pub(super) username: String,
    pub(super) tenant: Option<Tenant>,
}

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
    by_caller: HashMap<Holder, usize>,
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
    holder: Holder,
}

impl Streams {
    pub(super) fn new(limits: StreamLimits) -> Self {
        Streams { limits, open: Arc::default() }
    }

    pub(super) fn open(&self, holder: Holder) -> Result<StreamSlot, Full> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let of_caller = open.by_caller.get(&holder).copied().unwrap_or(0);
        if of_caller >= self.limits.per_caller {
            return Err(Full::Caller(self.limits.per_caller));
        }
        if open.total >= self.limits.total {
            return Err(Full::Total(self.limits.total));
        }
        open.total += 1;
        *open.by_caller.entry(holder.clone()).or_default() += 1;
        Ok(StreamSlot { open: self.open.clone(), holder })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.total -= 1;
        if let Some(count) = open.by_caller.get_mut(&self.holder) {
            *count -= 1;
            if *count == 0 {
                open.by_caller.remove(&self.holder);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(username: &str, tenant: Option<&str>) -> Holder {
        Holder { username: username.to_owned(), tenant: tenant.map(|tenant| Tenant::parse(tenant).unwrap()) }
    }

    #[test]
    fn streams_are_capped_per_caller_and_tenant_and_in_total_and_freed_when_closed() {
        let streams = Streams::new(StreamLimits { per_caller: 2, total: 4 });
        let first = streams.open(holder("alice", None)).unwrap();
        let _second = streams.open(holder("alice", None)).unwrap();
        assert_eq!(streams.open(holder("alice", None)).err(), Some(Full::Caller(2)));
        let _gateway_for_a = streams.open(holder("alice", Some("tenant-a"))).unwrap();
        let _bob = streams.open(holder("bob", None)).unwrap();
        assert_eq!(streams.open(holder("carol", None)).err(), Some(Full::Total(4)));
        drop(first);
        assert!(streams.open(holder("alice", None)).is_ok(), "a closed stream frees its place");
    }
}
