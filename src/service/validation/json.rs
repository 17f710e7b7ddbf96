//! Reading a JSON body into its type while naming every field serde refuses, not only the first.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use super::{Invalid, InvalidReason, Rejected};

/// Bounds the tries on one body: each refused field costs a few, and a body is small (APP_MAX_REQUEST_BODY_BYTES).
const MAX_TRIES: usize = 256;

/// One step into a JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// What serde said about a field; it tells its errors apart only by their messages.
enum Refusal {
    Missing { name: String },
    Unknown,
    UnknownVariant { first_expected: Option<String> },
    Other,
}

impl Refusal {
    fn of(error: &serde_json::Error) -> Refusal {
        let message = error.to_string();
        let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
        match message.split(' ').take(2).collect::<Vec<_>>()[..] {
            ["missing", "field"] => Refusal::Missing { name: quoted.first().copied().unwrap_or_default().to_owned() },
            ["unknown", "field"] => Refusal::Unknown,
            ["unknown", "variant"] => {
                Refusal::UnknownVariant { first_expected: quoted.get(1).map(|variant| (*variant).to_owned()) }
            }
            _ => Refusal::Other,
        }
    }
}

impl Invalid {
    /// What serde refused in a JSON body, at `path` (as serde_path_to_error spells it, `.` for the body itself)
    /// under `prefix`: a missing field is named itself rather than the object that lacks it.
    pub fn from_serde(prefix: Option<&str>, path: &str, error: &serde_json::Error) -> Invalid {
        let message = error.to_string();
        let message = message.split(" at line ").next().unwrap_or_default().to_owned();
        let path = (path != ".").then_some(path);
        let joined = |name: Option<&str>| [prefix, path, name].into_iter().flatten().collect::<Vec<_>>().join(".");
        let (reason, field) = match Refusal::of(error) {
            Refusal::Missing { name } => {
                return Invalid::new(InvalidReason::Required, joined(Some(&name)), "is required");
            }
            Refusal::Unknown => (InvalidReason::NotAllowed, joined(None)),
            Refusal::UnknownVariant { .. } => (InvalidReason::UnsupportedValue, joined(None)),
            Refusal::Other => (InvalidReason::Format, joined(None)),
        };
        let field = if field.is_empty() { "body".to_owned() } else { field };
        Invalid::new(reason, field, message)
    }
}

/// Deserializes `value` as `T`, or names every field serde refuses (under `prefix`, for a body that is part of a
/// larger input). serde stops at its first refusal, so each refused field is got out of the way (an unknown one
/// removed; a missing or invalid one given, in turn, the first value serde names, `""`, `0`, `false`, `{}` and
/// `[]`) and serde tries again; what it then refuses inside such a stand-in is not the caller's and not reported.
pub fn deserialize_naming_every_field<T: DeserializeOwned>(
    mut value: Value,
    prefix: Option<&str>,
) -> Result<T, Rejected> {
    let mut refused: Vec<Invalid> = Vec::new();
    let mut stand_ins: Vec<(Vec<Step>, usize)> = Vec::new();
    for _ in 0..MAX_TRIES {
        let error = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) if refused.is_empty() => return Ok(parsed),
            Ok(_) => break,
            Err(error) => error,
        };
        let invalid = Invalid::from_serde(prefix, &error.path().to_string(), error.inner());
        let refusal = Refusal::of(error.inner());
        let Some(mut at) = steps(error.path()) else {
            refused.push(invalid);
            break;
        };
        if let Refusal::Missing { name } = &refusal {
            at.push(Step::Key(name.clone()));
        }
        let made_up = stand_ins.iter().any(|(place, _)| at.starts_with(place));
        if !made_up {
            refused.push(invalid);
        }
        let moved_on = match refusal {
            Refusal::Unknown if !made_up => remove(&mut value, &at),
            Refusal::UnknownVariant { first_expected } => stand_in(&mut value, &at, &mut stand_ins, first_expected),
            _ => stand_in(&mut value, &at, &mut stand_ins, None),
        };
        if !moved_on {
            break;
        }
    }
    let mut refused = refused.into_iter();
    match refused.next() {
        Some(first) => Err(Rejected { first, more: refused.collect() }),
        // Not reached: the first try's refusal is always recorded.
        None => Err(Invalid::new(InvalidReason::Format, prefix.unwrap_or("body"), "is not valid").into()),
    }
}

/// The path as steps into the value; `None` for a step a value cannot be walked by (an enum variant).
fn steps(path: &serde_path_to_error::Path) -> Option<Vec<Step>> {
    path.iter()
        .map(|segment| match segment {
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

/// Puts the next stand-in at `at`; false when every one has been tried.
fn stand_in(value: &mut Value, at: &[Step], stand_ins: &mut Vec<(Vec<Step>, usize)>, named: Option<String>) -> bool {
    let tried = match stand_ins.iter_mut().find(|(place, _)| place == at) {
        Some((_, tried)) => {
            *tried += 1;
            *tried
        }
        None => {
            stand_ins.push((at.to_vec(), 0));
            0
        }
    };
    let mut candidates = named.map(Value::String).into_iter().chain([
        Value::String(String::new()),
        Value::from(0),
        Value::Bool(false),
        Value::Object(serde_json::Map::new()),
        Value::Array(Vec::new()),
    ]);
    let Some(candidate) = candidates.nth(tried) else { return false };
    let Some((last, parents)) = at.split_last() else { return false };
    match (walk(value, parents), last) {
        (Some(Value::Object(object)), Step::Key(key)) => {
            object.insert(key.clone(), candidate);
            true
        }
        (Some(Value::Array(items)), Step::Index(index)) if *index < items.len() => {
            items[*index] = candidate;
            true
        }
        _ => false,
    }
}

fn remove(value: &mut Value, at: &[Step]) -> bool {
    match (at.split_last(), at.split_last().and_then(|(_, parents)| walk(value, parents))) {
        (Some((Step::Key(key), _)), Some(Value::Object(object))) => object.remove(key).is_some(),
        _ => false,
    }
}

fn walk<'a>(value: &'a mut Value, steps: &[Step]) -> Option<&'a mut Value> {
    steps.iter().try_fold(value, |value, step| match (value, step) {
        (Value::Object(object), Step::Key(key)) => object.get_mut(key),
        (Value::Array(items), Step::Index(index)) => items.get_mut(*index),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Body {
        name: String,
        config: Config,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Config {
        topology: Topology,
        size: u32,
        zones: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Topology {
        Eks,
        Gke,
    }

    fn refused(body: Value) -> Vec<(String, &'static str)> {
        let rejected = deserialize_naming_every_field::<Body>(body, None).unwrap_err();
        rejected.all().map(|invalid| (invalid.field.clone(), invalid.reason.as_str())).collect()
    }

    #[test]
    fn an_empty_body_names_every_missing_field_but_not_the_fields_of_a_missing_object() {
        assert_eq!(refused(json!({})), [("name".into(), "required"), ("config".into(), "required")]);
    }

    #[test]
    fn every_wrong_field_is_named_at_once_with_its_reason() {
        let body = json!({
            "name": 7,
            "surprise": true,
            "config": {"topology": "openstack", "size": "large", "zones": ["a", 1]},
        });
        assert_eq!(
            refused(body),
            // In the order serde reads the body's keys.
            [
                ("config.size".into(), "format"),
                ("config.topology".into(), "unsupported_value"),
                ("config.zones[1]".into(), "format"),
                ("name".into(), "format"),
                ("surprise".into(), "not_allowed"),
            ]
        );
    }

    #[test]
    fn a_valid_body_is_read() {
        let body = json!({"name": "a", "config": {"topology": "gke", "size": 3, "zones": []}});
        let read = deserialize_naming_every_field::<Body>(body, None).unwrap();
        assert!(matches!(read.config.topology, Topology::Gke));
    }

    #[test]
    fn a_prefix_names_fields_of_the_larger_input() {
        let rejected = deserialize_naming_every_field::<Config>(json!({"size": 1, "zones": []}), Some("config"));
        assert_eq!(rejected.unwrap_err().first.field, "config.topology");
    }
}
