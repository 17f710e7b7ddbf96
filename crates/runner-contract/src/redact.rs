//! Keeps credential values out of everything shown to people: the runner passes Terraform's output and its
//! termination message through one [`Redactor`], and the service passes the failure message it records through
//! one built from the same credential, before [`bounded_failure_message`] keeps it short.

/// Values shorter than this are not redacted. Every real credential value is far longer (access key ids 20
/// characters, secret keys 40, private-key lines 64), while shorter ones would replace ordinary words and numbers
/// everywhere in a message (a four-character value such as `3600` or `true` is common in Terraform's output).
const MIN_SECRET_CHARS: usize = 6;
pub const REDACTED: &str = "[REDACTED]";

/// The longest failure message: Kubernetes keeps 4 KiB of a termination message, the service records 1 KiB.
pub const MAX_FAILURE_MESSAGE: usize = 1024;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so that a value containing another one is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// Multi-line values (a private key) are also redacted line by line, since output arrives in lines.
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut redactor = Redactor::default();
        redactor.extend(values);
        redactor
    }

    pub fn extend(&mut self, values: impl IntoIterator<Item = String>) {
        for value in values {
            let lines = value.lines().map(str::trim).map(str::to_owned).collect::<Vec<_>>();
            // A JSON-escaped key ("\n" as two characters) shows up in output the way it is stored.
            let escaped = value.split("\\n").map(str::trim).map(str::to_owned).collect::<Vec<_>>();
            for fragment in std::iter::once(value).chain(lines).chain(escaped) {
                if fragment.chars().count() >= MIN_SECRET_CHARS && !self.secrets.contains(&fragment) {
                    self.secrets.push(fragment);
                }
            }
        }
        self.secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    }

    pub fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_owned(), |text, secret| text.replace(secret.as_str(), REDACTED))
    }
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
        let redactor = Redactor::new([key.to_owned(), key.replace('\n', "\\n")]);
        assert_eq!(redactor.redact("line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here"), "line [REDACTED] here");
        let escaped = format!("\"private_key\": \"{}\"", key.replace('\n', "\\n"));
        assert!(!redactor.redact(&escaped).contains("MIIEvQ"), "{}", redactor.redact(&escaped));
    }

    #[test]
    fn short_values_are_not_treated_as_secrets() {
        let redactor = Redactor::new(["abc".to_owned(), "3600".to_owned(), String::new()]);
        assert_eq!(redactor.redact("abc def 3600"), "abc def 3600");
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
