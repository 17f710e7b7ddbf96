//! The operations this process is running, which its claims skip.

use std::collections::HashSet;
use std::sync::Arc;

use uuid::Uuid;

/// The operations this process runs now, so that it never claims one of them a second time (after an outage let
/// their leases expire); an entry leaves when its run's future ends, however it ends.
#[derive(Default)]
pub(super) struct Following(std::sync::Mutex<HashSet<Uuid>>);

impl Following {
    pub(super) fn ids(&self) -> Vec<Uuid> {
        self.0.lock().expect("never poisoned: no code panics while holding it").iter().copied().collect()
    }

    pub(super) fn follow(self: &Arc<Self>, id: Uuid) -> Followed {
        self.0.lock().expect("never poisoned: no code panics while holding it").insert(id);
        Followed { following: self.clone(), id }
    }
}

pub(super) struct Followed {
    following: Arc<Following>,
    id: Uuid,
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Ok(mut ids) = self.following.0.lock() {
            ids.remove(&self.id);
        }
    }
}
