//! Escaping for the inside of an HCL quoted string: the renderer's handlebars escape function, so that no
//! request value can end the string, start an interpolation or directive, or hide itself from a reviewer.

use std::fmt::Write;

/// Escapes `value` for use between the quotes of an HCL (Terraform) string literal.
///
/// Besides `\` and `"`, this doubles the template markers (`${` → `$${`, `%{` → `%%{`) so a value can never be
/// evaluated, and writes line breaks, other control characters and invisible formatting characters (bidi
/// overrides, zero-width spaces) as escapes, so the rendered text shows exactly what Terraform will see.
pub fn escape_hcl_string(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(character) = chars.next() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                escaped.push(character);
                escaped.push(character);
            }
            character if character.is_control() || is_invisible(character) => {
                // Every such character is in the Basic Multilingual Plane, so four hex digits suffice.
                write!(escaped, "\\u{:04X}", u32::from(character)).expect("writing to a String");
            }
            character => escaped.push(character),
        }
    }
    escaped
}

/// Formatting characters that change how text looks without being visible (the "Trojan Source" set plus
/// zero-width characters and Unicode line separators).
fn is_invisible(character: char) -> bool {
    matches!(character,
        '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::escape_hcl_string;

    #[test]
    fn plain_text_and_printable_unicode_stay_as_they_are() {
        assert_eq!(escape_hcl_string("team-a 1.34"), "team-a 1.34");
        assert_eq!(escape_hcl_string("Zürich ☃ 東京"), "Zürich ☃ 東京");
        assert_eq!(escape_hcl_string("# not a comment */"), "# not a comment */");
    }

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        assert_eq!(escape_hcl_string(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_hcl_string(r"\"), r"\\");
    }

    #[test]
    fn line_breaks_and_tabs_use_short_escapes() {
        assert_eq!(escape_hcl_string("a\nb\r\nc\td"), r"a\nb\r\nc\td");
    }

    #[test]
    fn template_markers_are_doubled_but_lone_signs_are_not() {
        assert_eq!(escape_hcl_string("${var.x}"), "$${var.x}");
        assert_eq!(escape_hcl_string("%{ if true }"), "%%{ if true }");
        assert_eq!(escape_hcl_string("$$${x}"), "$$$${x}");
        assert_eq!(escape_hcl_string("100% $5 {}"), "100% $5 {}");
        assert_eq!(escape_hcl_string("$"), "$");
    }

    #[test]
    fn other_control_and_invisible_characters_become_unicode_escapes() {
        assert_eq!(escape_hcl_string("a\u{0}b"), r"a\u0000b");
        assert_eq!(escape_hcl_string("\u{1B}[31m"), r"\u001B[31m");
        assert_eq!(escape_hcl_string("\u{7F}\u{85}"), r"\u007F\u0085");
        assert_eq!(escape_hcl_string("a\u{202E}b"), r"a\u202Eb");
        assert_eq!(escape_hcl_string("\u{200B}\u{2028}\u{FEFF}"), r"\u200B\u2028\uFEFF");
    }
}
