//! kubectl's JSONPath templates, the subset `-o jsonpath=` and `wait --for jsonpath=` take: text with `{...}`
//! expressions, each a string literal (`{"\n"}`) or a path from the document's root: `.field`, `['field']`, `[n]`
//! (negative counts from the end), `[*]` or `.*` (every element or value) and `[?(@.path=="value")]` (the
//! elements whose path has that value; `!=` too). As in kubectl, several results print separated by a space, a
//! string prints without quotes, anything else as JSON, and a path that finds nothing prints nothing.

use serde_json::Value;

/// A template, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Path(Vec<Step>),
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter { path: Vec<Step>, equal: bool, value: Value },
}

impl Template {
    /// Parses `text`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_owned()));
            }
            let end = closing_brace(&rest[start..])
                .ok_or_else(|| format!("jsonpath {text:?}: the '{{' at {} is not closed", text.len() - rest.len()))?;
            let expression = rest[start + 1..start + end].trim();
            parts.push(expression_part(expression).map_err(|why| format!("jsonpath {text:?}: {why}"))?);
            rest = &rest[start + end + 1..];
        }
        if rest.contains('}') {
            return Err(format!("jsonpath {text:?}: a '}}' closes no '{{'"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        if !parts.iter().any(|part| matches!(part, Part::Path(_))) {
            return Err(format!("jsonpath {text:?}: no {{...}} expression, for example {{.name}}"));
        }
        Ok(Template { parts })
    }

    /// The template filled from `document`.
    pub fn render(&self, document: &Value) -> String {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Path(steps) => {
                    let found: Vec<String> = select(document, steps).into_iter().map(printed).collect();
                    text.push_str(&found.join(" "));
                }
            }
        }
        text
    }
}

/// A found value as kubectl prints it: a string as it is, anything else as JSON.
pub fn printed(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Where the `{` at the start of `text` is closed, skipping quoted text.
pub fn closing_brace(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (at, character) in text.char_indices().skip(1) {
        match (quote, character) {
            (Some(_), '\\') if !escaped => escaped = true,
            (Some(open), _) if character == open && !escaped => quote = None,
            (Some(_), _) => escaped = false,
            (None, '"' | '\'') => quote = Some(character),
            (None, '}') => return Some(at),
            (None, _) => {}
        }
    }
    None
}

fn expression_part(expression: &str) -> Result<Part, String> {
    if expression.starts_with('"') {
        let literal: String =
            serde_json::from_str(expression).map_err(|_| format!("{expression} is not a string literal"))?;
        return Ok(Part::Text(literal));
    }
    let first = expression.split_whitespace().next().unwrap_or_default();
    if matches!(first, "range" | "end") || expression.starts_with("..") || expression.contains("[.") {
        return Err(format!("{expression:?} is beyond the subset provisionerctl supports"));
    }
    Ok(Part::Path(Parser { text: expression, at: 0 }.path(true)?))
}

/// A path's steps, read from `text` at `at`.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    /// Steps until the end (`whole`) or until a character that cannot continue a path (in a filter).
    fn path(&mut self, whole: bool) -> Result<Vec<Step>, String> {
        if self.rest().starts_with('$') || self.rest().starts_with('@') {
            self.at += 1;
        }
        let mut steps = Vec::new();
        while let Some(next) = self.rest().chars().next() {
            match next {
                '.' => {
                    self.at += 1;
                    if self.rest().starts_with('.') {
                        return Err(format!("recursive descent (..) at {} is not supported", self.at));
                    }
                    if self.rest().starts_with('*') {
                        self.at += 1;
                        steps.push(Step::All);
                    } else if let Some(name) = self.name() {
                        steps.push(Step::Field(name));
                    }
                }
                '[' => steps.push(self.bracket()?),
                _ if !whole => break,
                other => return Err(format!("unexpected {other:?} at {}", self.at)),
            }
        }
        Ok(steps)
    }

    fn name(&mut self) -> Option<String> {
        let length =
            self.rest().find(|c: char| !(c.is_alphanumeric() || "_-/".contains(c))).unwrap_or(self.rest().len());
        let name = &self.rest()[..length];
        self.at += length;
        (!name.is_empty()).then(|| name.to_owned())
    }

    fn bracket(&mut self) -> Result<Step, String> {
        let opened = self.at;
        self.at += 1;
        let step = if self.rest().starts_with('*') {
            self.at += 1;
            Step::All
        } else if self.rest().starts_with(['\'', '"']) {
            Step::Field(self.quoted()?)
        } else if self.rest().starts_with("?(") {
            self.at += 2;
            self.filter()?
        } else {
            let length = self.rest().find(']').ok_or_else(|| format!("the '[' at {opened} is not closed"))?;
            let index = &self.rest()[..length];
            let index = index.trim().parse().map_err(|_| format!("[{index}] at {opened} is not an index or [*]"))?;
            self.at += length;
            Step::Index(index)
        };
        if !self.rest().starts_with(']') {
            return Err(format!("the '[' at {opened} is not closed"));
        }
        self.at += 1;
        Ok(step)
    }

    fn quoted(&mut self) -> Result<String, String> {
        let quote = self.rest().chars().next().unwrap_or('\'');
        let length = self.rest()[1..].find(quote).ok_or_else(|| format!("the quote at {} is not closed", self.at))?;
        let name = self.rest()[1..=length].to_owned();
        self.at += length + 2;
        Ok(name)
    }

    /// `@.path==value)` or `@.path!=value)`, after `[?(`.
    fn filter(&mut self) -> Result<Step, String> {
        if !self.rest().starts_with('@') {
            return Err(format!("a filter at {} must start with @", self.at));
        }
        let path = self.path(false)?;
        let rest = self.rest().trim_start();
        let equal = if rest.starts_with("==") {
            true
        } else if rest.starts_with("!=") {
            false
        } else {
            return Err(format!("a filter at {} compares with == or !=", self.at));
        };
        self.at = self.text.len() - rest.len() + 2;
        let end = self.rest().find(")]").ok_or_else(|| format!("the filter at {} is not closed with )]", self.at))?;
        let literal = self.rest()[..end].trim();
        let value = serde_json::from_str(&literal.replace('\'', "\"")).map_err(|_| {
            format!("{literal} is not a value to compare with (a quoted string, a number, true, false)")
        })?;
        self.at += end + 1;
        Ok(Step::Filter { path, equal, value })
    }
}

/// The values `steps` find in `document`.
fn select<'a>(document: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut current = vec![document];
    for step in steps {
        current = current.into_iter().flat_map(|value| apply(value, step)).collect();
    }
    current
}

fn apply<'a>(value: &'a Value, step: &Step) -> Vec<&'a Value> {
    match (step, value) {
        (Step::Field(name), Value::Object(fields)) => fields.get(name).into_iter().collect(),
        (Step::Index(index), Value::Array(items)) => {
            let at = if *index < 0 { items.len() as i64 + index } else { *index };
            usize::try_from(at).ok().and_then(|at| items.get(at)).into_iter().collect()
        }
        (Step::All, Value::Array(items)) => items.iter().collect(),
        (Step::All, Value::Object(fields)) => fields.values().collect(),
        (Step::Filter { path, equal, value: wanted }, Value::Array(items)) => items
            .iter()
            .filter(|item| select(item, path).first().is_some_and(|found| (*found == wanted) == *equal))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(template: &str, document: &Value) -> String {
        Template::parse(template).unwrap().render(document)
    }

    #[test]
    fn paths_fields_indexes_wildcards_and_filters_find_what_kubectl_finds() {
        let document = json!({"items": [
            {"id": "a", "state": "Ready", "conditions": [{"type": "Provisioned", "status": "True"}], "n": 1},
            {"id": "b", "state": "Failed", "conditions": [{"type": "Provisioned", "status": "False"}], "n": 2},
        ], "labels": {"team": "x"}});
        assert_eq!(rendered("{.items[*].id}", &document), "a b");
        assert_eq!(rendered("{.items[0].id}{\"\\n\"}", &document), "a\n");
        assert_eq!(rendered("{$.items[-1]['id']}", &document), "b");
        assert_eq!(rendered("{.items[*].n}", &document), "1 2");
        assert_eq!(rendered("{.labels.*}", &document), "x");
        assert_eq!(rendered("{.labels}", &document), r#"{"team":"x"}"#);
        assert_eq!(rendered(r#"{.items[?(@.state=="Failed")].id}"#, &document), "b");
        assert_eq!(rendered("{.items[?(@.state!='Failed')].id}", &document), "a");
        let condition = r#"{.items[0].conditions[?(@.type=="Provisioned")].status}"#;
        assert_eq!(rendered(condition, &document), "True");
        assert_eq!(rendered("id={.items[1].id} missing={.nothing.here}", &document), "id=b missing=");
    }

    #[test]
    fn a_bad_template_says_what_is_wrong() {
        for (template, why) in [
            ("{.items[", "is not closed"),
            ("{.items[x]}", "is not an index"),
            ("name", "no {...} expression"),
            ("{.a}}", "closes no"),
            ("{..name}", "beyond the subset"),
            ("{range .items[*]}{.id}{end}", "beyond the subset"),
            ("{.a b}", "unexpected ' '"),
            ("{.items[?(@.a>1)]}", "== or !="),
        ] {
            let refused = Template::parse(template).unwrap_err();
            assert!(refused.contains(why), "{template}: {refused}");
        }
    }
}
