//! Results as a table (the default, kubectl's way: one line per resource, columns aligned), or the server's JSON
//! as JSON or YAML.

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

const RUNTIME_COLUMNS: [(&str, &str); 6] = [
    ("NAME", "/name"),
    ("ID", "/id"),
    ("STATE", "/state"),
    ("TOPOLOGY", "/clusterConfig/topology"),
    ("VERSION", "/clusterConfig/kubernetesVersion"),
    ("REGION", "/clusterConfig/region"),
];

/// An operation's record names it `id`; the answer to a change (the seed's `Accepted`) names it `operationId`
/// beside the runtime's `id`.
const OPERATION_COLUMNS: [(&str, &str); 5] = [
    ("ID", "/operationId|/id"),
    ("OPERATION", "/operation"),
    ("STATUS", "/status"),
    ("STAGE", "/stage"),
    ("MESSAGE", "/message"),
];

pub fn print(value: &Value, shape: Shape, output: Output, out: &mut dyn Write) -> Result<(), Error> {
    let text = match output {
        Output::Json => serde_json::to_string_pretty(value).map_err(|error| Error::Local(error.to_string()))? + "\n",
        Output::Yaml => serde_saphyr::to_string(value).map_err(|error| Error::Local(error.to_string()))?,
        Output::Table => table(value, shape),
    };
    out.write_all(text.as_bytes()).map_err(|error| Error::Local(format!("cannot print: {error}")))
}

fn table(value: &Value, shape: Shape) -> String {
    let (columns, rows): (&[(&str, &str)], Vec<&Value>) = match shape {
        Shape::Runtimes => (&RUNTIME_COLUMNS, list(value, "runtimes")),
        Shape::Runtime => (&RUNTIME_COLUMNS, vec![value]),
        Shape::Operations => (&OPERATION_COLUMNS, list(value, "operations")),
        Shape::Operation => (&OPERATION_COLUMNS, vec![value]),
    };
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

/// The value at the first of `pointers` (`|`-separated) that the row has.
fn cell(row: &Value, pointers: &str) -> String {
    match pointers.split('|').find_map(|pointer| row.pointer(pointer)) {
        Some(Value::String(text)) => text.replace(['\n', '\t'], " "),
        Some(Value::Null) | None => "-".to_owned(),
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
            table(&runtimes, Shape::Runtimes),
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
            assert!(table(&answer, Shape::Operation).lines().nth(1).unwrap().starts_with("operation "), "{answer}");
        }
    }

    #[test]
    fn json_and_yaml_print_the_answer_itself() {
        let operation = json!({"id": "0192", "operation": "provision", "status": "in_progress"});
        let mut out = Vec::new();
        print(&operation, Shape::Operation, Output::Yaml, &mut out).unwrap();
        let yaml = String::from_utf8(out).unwrap();
        assert_eq!(serde_saphyr::from_str::<Value>(&yaml).unwrap(), operation, "{yaml}");
        let mut out = Vec::new();
        print(&operation, Shape::Operation, Output::Json, &mut out).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), operation);
    }
}
