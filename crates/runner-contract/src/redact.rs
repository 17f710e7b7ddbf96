//! Keeps credential values out of everything shown to people: the runner passes Terraform's output, its own log
//! lines and its termination message through one [`SharedRedactor`], and the service passes the failure message
//! it records, the logs it keeps and the live logs it serves through one built from the same credential.
//!
//! A value is found as it is and in the forms output shows it in: line by line (a private key), JSON-escaped,
//! URL-encoded, hex, and base64 (standard and URL-safe, also inside a longer encoded text), and split across a
//! line break. A short value is replaced only where it stands as a word of its own.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// Values shorter than this are replaced only where they stand as a whole word: replacing them inside other
/// words would garble ordinary output everywhere (a four-character value such as `3600` is common in Terraform's
/// output), while every real credential value is far longer (access key ids 20 characters, secret keys 40).
const MIN_SUBSTRING_CHARS: usize = 6;
pub const REDACTED: &str = "[REDACTED]";

/// How long a [`LineRedactor`] waits for the next line before it gives out the one it holds anyway: a follower
/// sees each line at most this late, and a value split across a line break is found when both halves are printed
/// within it (they are, printed at once).
pub const HOLD_BACK: Duration = Duration::from_millis(500);

/// The longest failure message: Kubernetes keeps 4 KiB of a termination message, the service records 1 KiB.
pub const MAX_FAILURE_MESSAGE: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Replaced wherever they occur; longest first, so that a value containing another one is replaced whole.
    secrets: Vec<String>,
    /// Shorter than [`MIN_SUBSTRING_CHARS`]: replaced where they stand as a word.
    words: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut redactor = Redactor::default();
        redactor.extend(values);
        redactor
    }

    pub fn extend(&mut self, values: impl IntoIterator<Item = String>) {
        for value in values {
            for form in forms(&value) {
                let list =
                    if form.chars().count() >= MIN_SUBSTRING_CHARS { &mut self.secrets } else { &mut self.words };
                if !form.trim().is_empty() && !list.contains(&form) {
                    list.push(form);
                }
            }
        }
        self.secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        self.words.sort_by_key(|word| std::cmp::Reverse(word.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.words.is_empty()
    }

    /// `text` with every value replaced, also one split across two of its lines.
    pub fn redact(&self, text: &str) -> String {
        let text = self.redact_line(text);
        if !text.contains('\n') || self.secrets.is_empty() {
            return text;
        }
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        for index in 1..lines.len() {
            let (before, after) = lines.split_at_mut(index);
            let (first, second) = self.redact_split(&before[index - 1], &after[0]);
            (before[index - 1], after[0]) = (first, second);
        }
        lines.join("\n")
    }

    /// Every value within `text` replaced (not one split across its line breaks: see [`LineRedactor`]).
    fn redact_line(&self, text: &str) -> String {
        let text = self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), REDACTED));
        self.words.iter().fold(text, |text, word| replace_word(&text, word))
    }

    /// Two adjacent lines with the parts of any value that the line break between them splits replaced: the
    /// first line ending (before trailing white space) with the value's start, the second starting with its rest
    /// (after leading white space, and after the prefix both lines share, such as Terraform's
    /// `null_resource.x (local-exec): `).
    fn redact_split(&self, first: &str, second: &str) -> (String, String) {
        let (head, head_space) = split_end(first);
        for offset in [0, shared_prefix(first, second)] {
            let (prefix, rest_of_line) = second.split_at(offset);
            let (tail_space, tail) = split_start(rest_of_line);
            if let Some((start, rest)) = self.split_secret(head, tail) {
                let first = format!("{}{REDACTED}{head_space}", &head[..head.len() - start]);
                let second = format!("{prefix}{tail_space}{REDACTED}{}", &tail[rest..]);
                return (first, second);
            }
        }
        (first.to_owned(), second.to_owned())
    }

    /// The byte lengths of the start of a value that `head` ends with and of its rest that `tail` starts with.
    fn split_secret(&self, head: &str, tail: &str) -> Option<(usize, usize)> {
        let (last, first) = (head.bytes().last()?, tail.bytes().next()?);
        for secret in &self.secrets {
            let bytes = secret.as_bytes();
            for (at, _) in secret.char_indices().skip(1) {
                // Cheap first: the bytes on both sides of the break (most lines end and start with neither).
                if bytes[at - 1] != last || bytes[at] != first {
                    continue;
                }
                let (start, rest) = secret.split_at(at);
                if head.ends_with(start) && tail.starts_with(rest) {
                    return Some((start.len(), rest.len()));
                }
            }
        }
        None
    }
}

/// One redactor for a whole run, shared by what prints (Terraform's output, the log lines) and what learns new
/// values during the run (credentials minted from the one the run was given).
#[derive(Debug, Clone, Default)]
pub struct SharedRedactor(Arc<RwLock<Redactor>>);

impl SharedRedactor {
    pub fn extend(&self, values: impl IntoIterator<Item = String>) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).extend(values);
    }

    pub fn redact(&self, text: &str) -> String {
        self.0.read().unwrap_or_else(PoisonError::into_inner).redact(text)
    }

    /// The redactor as it is now.
    pub fn current(&self) -> Redactor {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Redacts text that arrives line by line (a log as it is printed): each line is given out one line later, so
/// that a value split across the line break between two lines is found too.
#[derive(Debug)]
pub struct LineRedactor {
    redactor: Redactor,
    held: Option<String>,
}

impl LineRedactor {
    pub fn new(redactor: Redactor) -> Self {
        LineRedactor { redactor, held: None }
    }

    /// Takes the next line (without its line break) and gives out the line before it, redacted.
    pub fn push(&mut self, line: &str) -> Option<String> {
        let line = self.redactor.redact_line(line);
        match self.held.take() {
            None => {
                self.held = Some(line);
                None
            }
            Some(held) => {
                let (ready, next) = self.redactor.redact_split(&held, &line);
                self.held = Some(next);
                Some(ready)
            }
        }
    }

    /// The held line, when no more follow or none came within [`HOLD_BACK`].
    pub fn flush(&mut self) -> Option<String> {
        self.held.take()
    }
}

/// The forms of a value that output may show.
fn forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_owned()];
    // Output arrives in lines: a multi-line value (a private key) is also found line by line, also as stored in
    // JSON ("\n" as two characters).
    forms.extend(value.lines().map(str::trim).map(str::to_owned));
    forms.extend(value.split("\\n").map(str::trim).map(str::to_owned));
    let json = serde_json::to_string(value).expect("a string serialises");
    let json = json[1..json.len() - 1].to_owned();
    forms.push(json.replace('/', "\\/"));
    forms.push(json);
    forms.push(percent_encoded(value));
    forms.push(value.bytes().map(|byte| format!("{byte:02x}")).collect());
    forms.push(value.bytes().map(|byte| format!("{byte:02X}")).collect());
    for alphabet in [BASE64_STANDARD, BASE64_URL_SAFE] {
        forms.extend(base64_forms(value.as_bytes(), alphabet));
    }
    forms.retain(|form| !form.is_empty());
    forms
}

/// Every byte outside the unreserved set of RFC 3986 as `%XX`.
fn percent_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

const BASE64_STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The value encoded on its own (unpadded: the padding is not part of it), and the characters that encode only
/// its bytes when it sits one or two bytes into a longer encoded text, so that it is found inside one too.
fn base64_forms(value: &[u8], alphabet: &[u8; 64]) -> Vec<String> {
    let mut forms = Vec::new();
    for offset in 0..3 {
        let mut bytes = vec![0; offset];
        bytes.extend_from_slice(value);
        let encoded = base64_unpadded(&bytes, alphabet);
        // The first characters mix the offset's bytes in, and the last one the bytes that follow the value.
        let first = (offset * 4).div_ceil(3);
        let last = (bytes.len() * 4) / 3;
        if offset == 0 {
            forms.push(encoded.clone());
        }
        if last > first && last - first >= MIN_SUBSTRING_CHARS {
            forms.push(encoded[first..last].to_owned());
        }
    }
    forms
}

fn base64_unpadded(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut encoded = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group =
            chunk.iter().enumerate().fold(0u32, |group, (index, byte)| group | u32::from(*byte) << (16 - 8 * index));
        for index in 0..=chunk.len() {
            encoded.push(char::from(alphabet[(group >> (18 - 6 * index)) as usize & 63]));
        }
    }
    encoded
}

/// `text` with every occurrence of `word` that is not part of a longer word replaced.
fn replace_word(text: &str, word: &str) -> String {
    let is_word_char = |character: Option<char>| character.is_some_and(|character| character.is_alphanumeric());
    let mut result = String::with_capacity(text.len());
    let mut copied = 0;
    for (at, _) in text.match_indices(word) {
        if at < copied {
            continue;
        }
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !is_word_char(before) && !is_word_char(after) {
            result.push_str(&text[copied..at]);
            result.push_str(REDACTED);
            copied = at + word.len();
        }
    }
    result.push_str(&text[copied..]);
    result
}

/// Where the prefix two lines share ends: after its last white space (a value may begin with the same characters
/// in both), or 0.
fn shared_prefix(first: &str, second: &str) -> usize {
    let shared = first.char_indices().zip(second.chars()).take_while(|((_, a), b)| a == b).last();
    let Some(((at, character), _)) = shared else { return 0 };
    let shared = &first[..at + character.len_utf8()];
    shared.rfind(char::is_whitespace).map_or(0, |space| space + 1)
}

/// A line without its trailing white space, and that white space.
fn split_end(line: &str) -> (&str, &str) {
    let trimmed = line.trim_end();
    (trimmed, &line[trimmed.len()..])
}

/// A line's leading white space, and the line without it.
fn split_start(line: &str) -> (&str, &str) {
    let trimmed = line.trim_start();
    (&line[..line.len() - trimmed.len()], trimmed)
}

/// `message` trimmed and cut to [`MAX_FAILURE_MESSAGE`] bytes (at a character boundary, marked with `…`).
pub fn bounded_failure_message(message: &str) -> String {
    let message = message.trim();
    if message.len() <= MAX_FAILURE_MESSAGE {
        return message.to_owned();
    }
    let mut end = MAX_FAILURE_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY";

    fn standard_base64(bytes: &[u8]) -> String {
        let mut encoded = base64_unpadded(bytes, BASE64_STANDARD);
        while !encoded.len().is_multiple_of(4) {
            encoded.push('=');
        }
        encoded
    }

    #[test]
    fn replaces_every_occurrence_of_every_value() {
        let redactor = Redactor::new(["AKIAEXAMPLEKEY".to_owned(), "wJalrXUtnFEMI/K7MDENG".to_owned()]);
        assert_eq!(
            redactor.redact("id=AKIAEXAMPLEKEY secret=wJalrXUtnFEMI/K7MDENG again AKIAEXAMPLEKEY"),
            "id=[REDACTED] secret=[REDACTED] again [REDACTED]"
        );
    }

    #[test]
    fn redacts_private_key_lines_and_json_escaped_keys() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";
        let redactor = Redactor::new([key.to_owned()]);
        assert_eq!(redactor.redact("line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here"), "line [REDACTED] here");
        let escaped = format!("\"private_key\": \"{}\"", key.replace('\n', "\\n"));
        assert!(!redactor.redact(&escaped).contains("MIIEvQ"), "{}", redactor.redact(&escaped));
    }

    #[test]
    fn encoded_forms_are_redacted() {
        let redactor = Redactor::new([SECRET.to_owned()]);
        let hex: String = SECRET.bytes().map(|byte| format!("{byte:02x}")).collect();
        let quoted = serde_json::to_string(&serde_json::json!({ "secret": SECRET })).unwrap().replace('/', "\\/");
        for shown in [
            standard_base64(SECRET.as_bytes()),
            base64_unpadded(SECRET.as_bytes(), BASE64_URL_SAFE),
            hex.clone(),
            hex.to_uppercase(),
            percent_encoded(SECRET),
            quoted,
        ] {
            let redacted = redactor.redact(&format!("value: {shown} end"));
            assert!(redacted.contains(REDACTED), "{shown} stayed: {redacted}");
            assert!(!redacted.contains(&shown), "{shown} stayed: {redacted}");
        }
    }

    #[test]
    fn a_value_inside_a_longer_base64_text_is_redacted_at_every_offset() {
        let redactor = Redactor::new([SECRET.to_owned()]);
        for prefix in ["", "a", "ab", "[default]\naws_secret_access_key = "] {
            let document = format!("{prefix}{SECRET}\nregion = eu-west-1\n");
            let encoded = standard_base64(document.as_bytes());
            let redacted = redactor.redact(&encoded);
            assert!(redacted.contains(REDACTED), "offset {}: {redacted}", prefix.len());
            // What is left of the encoded value is at most the few characters it shares with its neighbours.
            let left = redacted.replace(REDACTED, "");
            assert!(left.len() + 30 <= encoded.len(), "offset {}: {redacted}", prefix.len());
        }
    }

    #[test]
    fn a_value_split_across_a_line_break_is_redacted() {
        let redactor = Redactor::new([SECRET.to_owned()]);
        let (start, rest) = SECRET.split_at(12);
        let text = format!("key = {start}\n    {rest} more\nnext");
        let redacted = redactor.redact(&text);
        assert_eq!(redacted, "key = [REDACTED]\n    [REDACTED] more\nnext");

        let prefixed = format!("x (local-exec): {start}\nx (local-exec): {rest}");
        assert_eq!(redactor.redact(&prefixed), "x (local-exec): [REDACTED]\nx (local-exec): [REDACTED]");

        let mut lines = LineRedactor::new(redactor);
        let mut out: Vec<String> = text.lines().filter_map(|line| lines.push(line)).collect();
        out.extend(lines.flush());
        assert_eq!(out.join("\n"), "key = [REDACTED]\n    [REDACTED] more\nnext");
    }

    #[test]
    fn short_values_are_redacted_only_as_whole_words() {
        let redactor = Redactor::new(["abc".to_owned(), "x1".to_owned(), String::new(), " ".to_owned()]);
        assert_eq!(redactor.redact("abc, tabc abcd (x1) x12 3600"), "[REDACTED], tabc abcd ([REDACTED]) x12 3600");
    }

    #[test]
    fn a_shared_redactor_learns_values_during_a_run() {
        let shared = SharedRedactor::default();
        let printer = shared.clone();
        assert_eq!(printer.redact("token ya29.minted-token"), "token ya29.minted-token");
        shared.extend(["ya29.minted-token".to_owned()]);
        assert_eq!(printer.redact("token ya29.minted-token"), "token [REDACTED]");
    }

    #[test]
    fn failure_messages_are_bounded_at_a_character_boundary() {
        assert_eq!(bounded_failure_message("  short\n"), "short");
        let bounded = bounded_failure_message(&"é".repeat(2000));
        assert!(bounded.len() <= MAX_FAILURE_MESSAGE + '…'.len_utf8(), "{}", bounded.len());
        assert!(bounded.ends_with('…'));
        assert_eq!(bounded_failure_message(&"x".repeat(MAX_FAILURE_MESSAGE)).len(), MAX_FAILURE_MESSAGE);
    }
}
