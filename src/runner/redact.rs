//! Keeps credential values out of everything the runner prints or reports: Terraform's output is passed
//! through [`Redactor::redact`] line by line, and so is the termination message.

/// Shorter fragments would redact ordinary words; real credential values are far longer.
const MIN_SECRET_CHARS: usize = 6;
pub const REDACTED: &str = "[REDACTED]";

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
        let redactor = Redactor::new(["abc".to_owned(), String::new()]);
        assert_eq!(redactor.redact("abc def"), "abc def");
    }
}
