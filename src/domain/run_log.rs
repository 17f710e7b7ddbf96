//! What is kept of a run's logs once its pod may go: each container's log within the operation's byte budget;
//! and how many bytes of logs one request may read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes of logs one request may still read (decompressed): a query that names many operations' logs, or an
/// archive that inflates far beyond what was kept, cannot make the service hold gigabytes.
#[derive(Debug, Clone)]
pub struct LogBudget {
    left: Arc<AtomicUsize>,
    total: usize,
}

impl LogBudget {
    pub fn new(bytes: usize) -> Self {
        LogBudget { left: Arc::new(AtomicUsize::new(bytes)), total: bytes }
    }

    /// The request's whole budget, for messages.
    pub fn total(&self) -> usize {
        self.total
    }

    /// What is left to read.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::SeqCst)
    }

    /// Takes `bytes` from what is left; false (and nothing taken) when that is less.
    pub fn spend(&self, bytes: usize) -> bool {
        self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(bytes)).is_ok()
    }
}

/// A log read to its end in bounded memory: its first and last bytes, each half of `max_bytes`, and how long it
/// was, so that a container printing without end costs no more than what is kept of it.
#[derive(Debug)]
pub struct BoundedRead {
    half: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
}

impl BoundedRead {
    pub fn new(max_bytes: usize) -> Self {
        let half = max_bytes / 2;
        BoundedRead { half, head: Vec::new(), tail: std::collections::VecDeque::new(), total: 0 }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let into_head = (self.half - self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() >= self.half {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.half..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.half);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The log: whole when it fit, else its head and tail around a marker saying how much was left out. Both
    /// are cut at line ends, so that a credential value on a cut line is left out whole, never kept in part where
    /// redaction, which runs after, could not recognise it.
    pub fn text(self) -> String {
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if self.total == self.head.len() + tail.len() {
            return String::from_utf8_lossy(&[self.head, tail].concat()).into_owned();
        }
        let head_end = self.head.iter().rposition(|&byte| byte == b'\n').map_or(0, |newline| newline + 1);
        let tail_start = tail.iter().position(|&byte| byte == b'\n').map_or(tail.len(), |newline| newline + 1);
        let left_out = self.total - head_end - (tail.len() - tail_start);
        let (head, tail) =
            (String::from_utf8_lossy(&self.head[..head_end]), String::from_utf8_lossy(&tail[tail_start..]));
        format!("{head}[... {left_out} bytes left out: the log is over its size limit ...]\n{tail}")
    }
}

/// What one container of a run's pod printed (the last lines of it, when asked for a tail).
#[derive(Debug, Clone, PartialEq, Eq, async_graphql::SimpleObject)]
pub struct ContainerLog {
    /// `init` or `terraform-runner`.
    pub container: String,
    pub log: String,
}

/// One container's log as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptLog {
    pub container: String,
    pub text: String,
    /// What the container printed, in bytes: more than `text` holds when the log was over its share.
    pub printed_bytes: usize,
}

/// Shares `max_bytes` among the containers' logs, the shortest first, each taking at most an even share of what
/// is left: a short init log is kept whole and the runner's gets the rest. A log over its share keeps its head and
/// its tail (where Terraform's errors are) with a marker between them. The order of `logs` is kept.
pub fn within_budget(logs: Vec<(String, String)>, max_bytes: usize) -> Vec<KeptLog> {
    let mut order: Vec<usize> = (0..logs.len()).collect();
    order.sort_by_key(|&index| logs[index].1.len());
    let mut shares = vec![0; logs.len()];
    let mut left = max_bytes;
    for (position, &index) in order.iter().enumerate() {
        let share = (left / (logs.len() - position)).min(logs[index].1.len());
        shares[index] = share;
        left -= share;
    }
    logs.into_iter()
        .zip(shares)
        .map(|((container, text), share)| KeptLog {
            printed_bytes: text.len(),
            text: head_and_tail(&text, share),
            container,
        })
        .collect()
}

/// `text` in at most `limit` bytes: whole when it fits, else its first and last bytes (cut at character
/// boundaries) around a marker saying how much was left out.
pub fn head_and_tail(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    // The marker's own length depends on the count it shows; a count as long as the whole text's is enough.
    let marker_for =
        |left_out: usize| format!("\n[... {left_out} bytes left out: the log is over its size limit ...]\n");
    let room = limit.saturating_sub(marker_for(text.len()).len());
    let head = floor_char_boundary(text, room / 2);
    let tail = ceil_char_boundary(text, text.len() - (room - room / 2));
    format!("{}{}{}", &text[..head], marker_for(tail - head), &text[tail..])
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// The last `lines` lines of `log` (all of it without a count).
pub fn tail_lines(log: &str, lines: Option<usize>) -> &str {
    let Some(lines) = lines else { return log };
    let trimmed = log.strip_suffix('\n').unwrap_or(log);
    let start = trimmed.rmatch_indices('\n').nth(lines.saturating_sub(1)).map_or(0, |(index, _)| index + 1);
    &log[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_read_to_its_end_keeps_its_head_and_tail_within_its_bound() {
        let mut short = BoundedRead::new(8);
        short.push(b"abc");
        short.push(b"d");
        assert_eq!(short.text(), "abcd");
        let mut long = BoundedRead::new(16);
        for chunk in [&b"one\ntwo "[..], b"secret\n", b"three\nfou", b"r secret\nfive\n"] {
            long.push(chunk);
        }
        assert_eq!(long.text(), "one\n[... 29 bytes left out: the log is over its size limit ...]\nfive\n");
        let mut exact = BoundedRead::new(8);
        exact.push(b"01234567");
        assert_eq!(exact.text(), "01234567");
    }

    #[test]
    fn a_budget_is_shared_by_its_clones_and_never_overdrawn() {
        let budget = LogBudget::new(100);
        let clone = budget.clone();
        assert!(budget.spend(60));
        assert!(!clone.spend(50), "only 40 left");
        assert!(clone.spend(40));
        assert!(!budget.spend(1), "nothing left");
        assert_eq!(budget.total(), 100);
    }

    #[test]
    fn a_log_within_its_limit_is_kept_whole() {
        assert_eq!(head_and_tail("short log\n", 10), "short log\n");
    }

    #[test]
    fn a_log_over_its_limit_keeps_head_and_tail_around_a_marker() {
        let text = format!("{}{}{}", "H".repeat(1000), "m".repeat(10_000), "T".repeat(1000));
        let kept = head_and_tail(&text, 1000);
        assert!(kept.len() <= 1000, "{}", kept.len());
        assert!(kept.starts_with(&"H".repeat(400)) && kept.ends_with(&"T".repeat(400)), "{kept}");
        // The marker counts exactly what is missing.
        let (start, end) = (kept.find("\n[... ").unwrap(), kept.find(" ...]\n").unwrap() + " ...]\n".len());
        let left_out: usize = kept[start + "\n[... ".len()..].split(' ').next().unwrap().parse().unwrap();
        assert_eq!(kept.len() - (end - start) + left_out, text.len(), "{kept}");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "ä".repeat(2000);
        let kept = head_and_tail(&text, 501);
        assert!(kept.len() <= 501 && kept.starts_with('ä') && kept.ends_with('ä'), "{kept}");
    }

    #[test]
    fn the_shortest_log_is_kept_whole_and_the_longest_takes_the_rest() {
        let logs = vec![("init".to_owned(), "x".repeat(100)), ("terraform-runner".to_owned(), "y".repeat(5000))];
        let kept = within_budget(logs, 1000);
        assert_eq!((kept[0].container.as_str(), kept[0].text.len(), kept[0].printed_bytes), ("init", 100, 100));
        assert_eq!(kept[1].container, "terraform-runner");
        assert!(kept[1].text.len() <= 900 && kept[1].text.len() > 800, "{}", kept[1].text.len());
        assert_eq!(kept[1].printed_bytes, 5000);
        let both_long = within_budget(vec![("a".into(), "a".repeat(900)), ("b".into(), "b".repeat(900))], 1000);
        assert!(both_long.iter().all(|log| log.text.len() <= 500), "{both_long:?}");
    }

    #[test]
    fn a_tail_is_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", Some(2)), "b\nc\n");
        assert_eq!(tail_lines("a\nb\nc", Some(1)), "c");
        assert_eq!(tail_lines("a\nb\n", Some(5)), "a\nb\n");
        assert_eq!(tail_lines("a\nb\n", None), "a\nb\n");
    }
}
