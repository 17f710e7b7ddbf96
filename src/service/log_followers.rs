//! One follower of a running operation's runner log, shared by everyone who follows it (followed REST logs and
//! subscriptions with logs), as [`super::operation_changes`] shares one poller of its record: a hundred followers of one run
//! cost one log stream from the API server and one pod lookup at a time, not a hundred. The follower keeps the
//! lines it read so far, up to [`HISTORY_BYTES`], so that one who joins late gets the log from its start.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::sync::watch;
use uuid::Uuid;

use super::{Error, Result};
use crate::domain::Component;

/// How many bytes of lines a follower keeps for those who join late; older lines are let go (a late joiner of a
/// run that printed more starts with the newest lines).
const HISTORY_BYTES: usize = 4 << 20;

/// The followers of the operations being followed.
#[derive(Clone, Default)]
pub(super) struct LogFollowers(Arc<Mutex<HashMap<Uuid, Arc<SharedLog>>>>);

/// What one follower read, and a signal to its readers whenever that grows or ends.
struct SharedLog {
    read: Mutex<Read>,
    /// Each reader holds a receiver; the follower stops when none is left.
    changed: watch::Sender<()>,
}

#[derive(Default)]
struct Read {
    lines: VecDeque<String>,
    bytes: usize,
    /// How many lines were let go from the front of `lines`.
    dropped: usize,
    /// `Some` once the log ended: `Ok` at its end, `Err` with what a reader is told when following failed.
    end: Option<Result<(), Failure>>,
}

/// Why following failed, as each reader is told (a service error is not `Clone`).
#[derive(Clone)]
struct Failure {
    component: Component,
    message: String,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        match error {
            Error::Unavailable { component, message } => Failure { component, message },
            other => Failure { component: Component::Kubernetes, message: other.to_string() },
        }
    }
}

/// What a reader does next.
enum Next {
    Line(usize, String),
    End,
    Fail(Failure),
    Wait,
}

/// Where one reader stands in a shared log.
struct Reader {
    log: Arc<SharedLog>,
    changed: watch::Receiver<()>,
    next: usize,
}

impl LogFollowers {
    /// A reader of the operation's shared log from its first kept line: of the follower already running, or of
    /// a new one that reads `start()` (the redacted lines, each ending with its line break).
    pub(super) async fn follow<F>(&self, operation_id: Uuid, start: F) -> Result<BoxStream<'static, Result<String>>>
    where
        F: AsyncFnOnce() -> Result<BoxStream<'static, Result<String>>>,
    {
        if let Some(reader) = self.join(operation_id) {
            return Ok(reader.into_stream());
        }
        let lines = start().await?;
        let mut followed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // Another request may have started one while this one was starting: the newer is dropped unread.
        if let Some(log) = followed.get(&operation_id) {
            return Ok(Reader::of(log.clone()).into_stream());
        }
        let log = Arc::new(SharedLog { read: Mutex::default(), changed: watch::Sender::new(()) });
        followed.insert(operation_id, log.clone());
        let reader = Reader::of(log.clone());
        tokio::spawn(self.clone().read_into(operation_id, log, lines));
        Ok(reader.into_stream())
    }

    fn join(&self, operation_id: Uuid) -> Option<Reader> {
        let followed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        followed.get(&operation_id).map(|log| Reader::of(log.clone()))
    }

    /// Reads `lines` into `log` until they end or no reader is left; then the operation has no follower.
    async fn read_into(self, operation_id: Uuid, log: Arc<SharedLog>, mut lines: BoxStream<'static, Result<String>>) {
        loop {
            let next = tokio::select! {
                next = lines.next() => next,
                () = log.changed.closed() => {
                    // Under the lock, so that no reader joins a follower that is ending.
                    let mut followed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                    if log.changed.receiver_count() == 0 {
                        followed.remove(&operation_id);
                        return;
                    }
                    continue;
                }
            };
            let ended = match next {
                Some(Ok(line)) => {
                    log.lock().push(line);
                    false
                }
                Some(Err(error)) => {
                    log.lock().end = Some(Err(error.into()));
                    true
                }
                None => {
                    log.lock().end = Some(Ok(()));
                    true
                }
            };
            if ended {
                // Removed before readers learn of the end, so that one who comes next starts anew.
                self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&operation_id);
            }
            log.changed.send_replace(());
            if ended {
                return;
            }
        }
    }
}

impl SharedLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Read> {
        self.read.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Read {
    fn push(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.bytes > HISTORY_BYTES && self.lines.len() > 1 {
            let first = self.lines.pop_front().expect("more than one line");
            self.bytes -= first.len();
            self.dropped += 1;
        }
    }

    /// The line numbered `index` (counted from the log's start), or the first kept one after it.
    fn line_at(&self, index: usize) -> Option<(usize, &str)> {
        let index = index.max(self.dropped);
        self.lines.get(index - self.dropped).map(|line| (index, line.as_str()))
    }
}

impl Reader {
    fn of(log: Arc<SharedLog>) -> Self {
        let changed = log.changed.subscribe();
        Reader { log, changed, next: 0 }
    }

    fn next_step(&self) -> Next {
        let read = self.log.lock();
        match (read.line_at(self.next), &read.end) {
            (Some((index, line)), _) => Next::Line(index, line.to_owned()),
            (None, Some(Ok(()))) => Next::End,
            (None, Some(Err(failure))) => Next::Fail(failure.clone()),
            (None, None) => Next::Wait,
        }
    }

    fn into_stream(self) -> BoxStream<'static, Result<String>> {
        futures::stream::unfold(Some(self), |reader| async move {
            let mut reader = reader?;
            loop {
                match reader.next_step() {
                    Next::Line(index, line) => {
                        reader.next = index + 1;
                        return Some((Ok(line), Some(reader)));
                    }
                    Next::End => return None,
                    Next::Fail(Failure { component, message }) => {
                        return Some((Err(Error::Unavailable { component, message }), None));
                    }
                    // The follower writes the end before it signals, and the sender lives as long as this reader.
                    Next::Wait => reader.changed.changed().await.ok()?,
                }
            }
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_reader_starts_at_the_first_kept_line() {
        let mut read = Read::default();
        let line = "x".repeat(HISTORY_BYTES / 2);
        for _ in 0..3 {
            read.push(line.clone());
        }
        assert_eq!((read.dropped, read.lines.len()), (1, 2), "the history holds at most HISTORY_BYTES");
        assert_eq!(read.line_at(0).map(|(index, _)| index), Some(1));
        assert_eq!(read.line_at(2).map(|(index, _)| index), Some(2));
        assert_eq!(read.line_at(3), None);
    }
}
