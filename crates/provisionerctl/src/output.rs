//! `-o`: how results are printed, as kubectl names its outputs.

use crate::jsonpath::Template;

/// The values `-o` takes, for `--help`.
pub const OUTPUTS: &str = "table, wide, name, json, yaml, jsonpath=TEMPLATE";

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// One line per resource, columns aligned.
    Table,
    /// The table with more columns.
    Wide,
    /// `runtime/<id>` or `operation/<id>`, one a line.
    Name,
    /// The server's answer as JSON.
    Json,
    /// The server's answer as YAML.
    Yaml,
    /// A JSONPath template filled from the server's answer (a list's resources are also its `items`).
    JsonPath(Template),
}

/// `-o`'s value; a template that does not parse is refused here, with the reason.
pub fn parse(text: &str) -> Result<Output, String> {
    match text {
        "table" => Ok(Output::Table),
        "wide" => Ok(Output::Wide),
        "name" => Ok(Output::Name),
        "json" => Ok(Output::Json),
        "yaml" => Ok(Output::Yaml),
        "jsonpath" => Err("jsonpath needs a template: -o jsonpath='{.name}'".to_owned()),
        _ => match text.strip_prefix("jsonpath=") {
            Some(template) => Template::parse(template).map(Output::JsonPath),
            None => Err(format!("{text:?} is none of {OUTPUTS}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_named_as_kubectl_names_them() {
        assert_eq!(parse("wide"), Ok(Output::Wide));
        assert_eq!(parse("name"), Ok(Output::Name));
        assert!(matches!(parse("jsonpath={.id}"), Ok(Output::JsonPath(_))));
        assert!(parse("jsonpath").unwrap_err().contains("needs a template"));
        assert!(parse("jsonpath={.id").unwrap_err().contains("is not closed"));
        assert!(parse("xml").unwrap_err().contains("none of table, wide"));
    }
}
