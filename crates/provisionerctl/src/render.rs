//! Results as a table (the default, kubectl's way: one line per resource, columns aligned; `wide` has more
//! columns), as kubectl's names (`runtime/<id>`), or the server's JSON as JSON, YAML or through a JSONPath template.

use std::io::Write;

use serde_json::Value;

use crate::{Error, Output};

/// What a JSON answer holds.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// `{"runtimes": [...]}`
    Runtimes,
    Runtime,
    /// `{"operations": [...]}`
    Operations,
    Operation,
}

/// A column's title, and the JSON pointers of its value (`|`-separated: the first the row has).
type Column = (&'static str, &'static str);

const RUNTIME_COLUMNS: [Column; 6] = [
    ("NAME", "/name"),
    ("ID", "/id"),
    ("STATE", "/state"),
    ("TOPOLOGY", "/clusterConfig/topology"),
    ("VERSION", "/clusterConfig/kubernetesVersion"),
    ("REGION", "/clusterConfig/region"),
];

/// `-o wide`'s further columns.
const RUNTIME_WIDE_COLUMNS: [Column; 4] = [
    ("OPERATION", "/lastOperation/operation"),
    ("STAGE", "/lastOperation/stage"),
    ("LABELS", "/labels"),
    ("CREATED", "/createdAt"),
];

/// An operation's record names it `id`; the answer to a change (the seed's `Accepted`) names it `operationId`
/// beside the runtime's `id`.
const OPERATION_COLUMNS: [Column; 5] = [
    ("ID", "/operationId|/id"),
    ("OPERATION", "/operation"),
    ("STATUS", "/status"),
    ("STAGE", "/stage"),
    ("MESSAGE", "/message"),
];

/// `-o wide`'s further columns: an operation's record names its runtime `runtimeId`, the answer to a change `id`.
const OPERATION_WIDE_COLUMNS: [Column; 3] =
    [("RUNTIME", "/runtimeId|/id"), ("CREATED", "/createdAt"), ("FINISHED", "/finishedAt")];

pub fn print(value: &Value, shape: Shape, output: &Output, out: &mut dyn Write) -> Result<(), Error> {
    let text = match output {
        Output::Json => serde_json::to_string_pretty(value).map_err(|error| Error::Local(error.to_string()))? + "\n",
        Output::Yaml => serde_saphyr::to_string(value).map_err(|error| Error::Local(error.to_string()))?,
        Output::Table => table(value, shape, false),
        Output::Wide => table(value, shape, true),
        Output::Name => names(value, shape),
        Output::JsonPath(template) => template.render(&with_items(value, shape)),
    };
    out.write_all(text.as_bytes()).map_err(|error| Error::Local(format!("cannot print: {error}")))
}

/// One resource more, as a watch prints it: a table's row without the titles, a YAML document after `---`, any
/// other output as [`print`](fn@print) prints one runtime.
pub fn print_more(runtime: &Value, output: &Output, out: &mut dyn Write) -> Result<(), Error> {
    let text = match output {
        Output::Table | Output::Wide => {
            let table = table(runtime, Shape::Runtime, *output == Output::Wide);
            table.split_once('\n').map(|(_, row)| row.to_owned()).unwrap_or_default()
        }
        Output::Yaml => {
            format!("---\n{}", serde_saphyr::to_string(runtime).map_err(|error| Error::Local(error.to_string()))?)
        }
        _ => return print(runtime, Shape::Runtime, output, out),
    };
    out.write_all(text.as_bytes()).map_err(|error| Error::Local(format!("cannot print: {error}")))
}

/// The resources of the answer.
fn rows(value: &Value, shape: Shape) -> Vec<&Value> {
    match shape {
        Shape::Runtimes => list(value, "runtimes"),
        Shape::Operations => list(value, "operations"),
        Shape::Runtime | Shape::Operation => vec![value],
    }
}

/// `runtime/<id>` or `operation/<id>` for each resource, as kubectl's `-o name`.
fn names(value: &Value, shape: Shape) -> String {
    let (kind, pointers) = match shape {
        Shape::Runtimes | Shape::Runtime => ("runtime", "/id"),
        Shape::Operations | Shape::Operation => ("operation", "/operationId|/id"),
    };
    rows(value, shape).iter().map(|row| format!("{kind}/{}\n", cell(row, pointers))).collect()
}

/// A list's answer with its resources also under `items`, so that a template written for kubectl's lists
/// (`{.items[*].id}`) reads it too.
fn with_items(value: &Value, shape: Shape) -> Value {
    let key = match shape {
        Shape::Runtimes => "runtimes",
        Shape::Operations => "operations",
        Shape::Runtime | Shape::Operation => return value.clone(),
    };
    let mut document = value.clone();
    if let (Some(fields), Some(items)) = (document.as_object_mut(), value.get(key)) {
        fields.entry("items").or_insert_with(|| items.clone());
    }
    document
}

fn table(value: &Value, shape: Shape, wide: bool) -> String {
    let (base, more): (&[Column], &[Column]) = match shape {
        Shape::Runtimes | Shape::Runtime => (&RUNTIME_COLUMNS, &RUNTIME_WIDE_COLUMNS),
        Shape::Operations | Shape::Operation => (&OPERATION_COLUMNS, &OPERATION_WIDE_COLUMNS),
    };
    let columns: Vec<Column> = base.iter().chain(more.iter().filter(|_| wide)).copied().collect();
    let rows = rows(value, shape);
    let mut lines = vec![columns.iter().map(|(title, _)| (*title).to_owned()).collect::<Vec<_>>()];
    lines.extend(rows.iter().map(|row| columns.iter().map(|(_, pointer)| cell(row, pointer)).collect()));
    let widths: Vec<usize> = (0..columns.len())
        .map(|column| lines.iter().map(|line| line[column].chars().count()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for line in lines {
        let cells: Vec<String> =
            line.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}", width = *width)).collect();
        text.push_str(cells.join("   ").trim_end());
        text.push('\n');
    }
    text
}

fn list<'a>(value: &'a Value, key: &str) -> Vec<&'a Value> {
    value.get(key).and_then(Value::as_array).map(|items| items.iter().collect()).unwrap_or_default()
}

/// The value at the first of `pointers` (`|`-separated) that the row has; labels as `key=value,...`.
fn cell(row: &Value, pointers: &str) -> String {
    match pointers.split('|').find_map(|pointer| row.pointer(pointer)) {
        Some(Value::String(text)) => text.replace(['\n', '\t'], " "),
        Some(Value::Null) | None => "-".to_owned(),
        Some(Value::Object(fields)) if fields.is_empty() => "-".to_owned(),
        Some(Value::Object(fields)) => fields
            .iter()
            .map(|(key, value)| format!("{key}={}", crate::jsonpath::printed(value)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn runtimes_print_as_aligned_columns() {
        let runtimes = json!({"runtimes": [
            {"name": "team-a", "id": "0190", "state": "Ready",
             "clusterConfig": {"topology": "eks", "kubernetesVersion": "1.34", "region": "eu-west-1"}},
            {"name": "b", "id": "0191", "state": "Provisioning", "clusterConfig": {"topology": "gke"}},
        ]});
        assert_eq!(
            table(&runtimes, Shape::Runtimes, false),
            "NAME     ID     STATE          TOPOLOGY   VERSION   REGION\n\
             team-a   0190   Ready          eks        1.34      eu-west-1\n\
             b        0191   Provisioning   gke        -         -\n"
        );
    }

    #[test]
    fn an_operation_is_named_by_its_operation_id_where_the_answer_has_one() {
        let accepted =
            json!({"id": "runtime", "operationId": "operation", "operation": "provision", "status": "running"});
        let record = json!({"id": "operation", "operation": "provision", "status": "running", "stage": "Queued"});
        for answer in [accepted, record] {
            assert!(
                table(&answer, Shape::Operation, false).lines().nth(1).unwrap().starts_with("operation "),
                "{answer}"
            );
        }
    }

    #[test]
    fn json_and_yaml_print_the_answer_itself() {
        let operation = json!({"id": "0192", "operation": "provision", "status": "in_progress"});
        let mut out = Vec::new();
        print(&operation, Shape::Operation, &Output::Yaml, &mut out).unwrap();
        let yaml = String::from_utf8(out).unwrap();
        assert_eq!(serde_saphyr::from_str::<Value>(&yaml).unwrap(), operation, "{yaml}");
        let mut out = Vec::new();
        print(&operation, Shape::Operation, &Output::Json, &mut out).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), operation);
    }

    #[test]
    fn names_wide_columns_and_templates_read_a_list_as_kubectl_reads_one() {
        let runtimes = json!({"runtimes": [
            {"name": "a", "id": "0190", "state": "Ready", "labels": {"team": "x", "tier": "1"},
             "lastOperation": {"operation": "provision", "stage": "Done"}},
        ], "nextCursor": null});
        assert_eq!(names(&runtimes, Shape::Runtimes), "runtime/0190\n");
        let accepted = json!({"id": "runtime", "operationId": "operation"});
        assert_eq!(names(&accepted, Shape::Operation), "operation/operation\n");
        let wide = table(&runtimes, Shape::Runtimes, true);
        assert!(wide.lines().nth(1).unwrap().ends_with("provision   Done    team=x,tier=1   -"), "{wide}");
        let mut out = Vec::new();
        let template = crate::output::parse("jsonpath={.items[*].id} {.runtimes[0].name}").unwrap();
        print(&runtimes, Shape::Runtimes, &template, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "0190 a");
    }
}
