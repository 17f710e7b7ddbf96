//! The pages' tables render as tables, and the API's route table is whole: every path the router serves is in the
//! Path column of `docs/api/README.md`'s table, and every value of the states it answers with is named there.

use std::path::Path;

use super::path_shape;

/// A table is a header row, a delimiter row (`|---|`) and rows, starting a block (after a blank line); every row has the header's
/// number of cells. A row anywhere else (after a paragraph, or without a header) renders as text.
#[test]
fn every_table_of_the_pages_renders_with_its_headers_columns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut tables = 0;
    let mut wrong = Vec::new();
    for page in super::pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let lines = outside_code(&text);
        let mut columns: Option<usize> = None;
        for (index, (number, line)) in lines.iter().enumerate() {
            let at = format!("{}:{number}", page.display());
            if !line.starts_with('|') {
                columns = None;
                continue;
            }
            let cells = cells(line).len();
            match columns {
                Some(header) if cells != header => wrong.push(format!("{at}: {cells} cells, the header {header}")),
                Some(_) => {}
                None => {
                    let delimiter = lines.get(index + 1).is_some_and(|(_, next)| is_delimiter(next));
                    // A table starts a block: after a blank line, a heading or the end of an HTML comment.
                    let previous = if index == 0 { "" } else { lines[index - 1].1.trim() };
                    let starts_a_block = previous.is_empty() || previous.starts_with('#') || previous.ends_with("-->");
                    if !delimiter || !starts_a_block {
                        wrong.push(format!("{at}: a row outside a table (no header and `|---|` after a blank line)"));
                    }
                    columns = Some(cells);
                    tables += 1;
                }
            }
        }
    }
    assert!(wrong.is_empty(), "tables that do not render:\n{}", wrong.join("\n"));
    assert!(tables >= 20, "the pages have tables ({tables} found)");
}

/// The lines of a page outside fenced code blocks, with their line numbers.
fn outside_code(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            lines.push((number + 1, ""));
        } else {
            lines.push((number + 1, if fenced { "" } else { line }));
        }
    }
    lines
}

/// The cells of a row: split at every `|` that is not escaped (GitHub splits inside code spans too).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|');
    let row = row.strip_suffix('|').filter(|rest| !rest.ends_with('\\')).unwrap_or(row);
    let mut cells = vec![String::new()];
    let mut escaped = false;
    for c in row.chars() {
        if c == '|' && !escaped {
            cells.push(String::new());
        } else {
            cells.last_mut().unwrap().push(c);
        }
        escaped = c == '\\';
    }
    cells
}

fn is_delimiter(line: &str) -> bool {
    line.starts_with('|') && cells(line).iter().all(|cell| cell.trim().trim_matches(':').chars().all(|c| c == '-'))
}

#[test]
fn every_route_and_state_is_in_the_api_route_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/api/README.md")).unwrap();
    let table = text.split("\n| Method | Path | Answer |\n").nth(1).expect("docs/api/README.md's route table");
    let rows: Vec<Vec<String>> =
        table.lines().take_while(|line| line.starts_with('|')).filter(|line| !is_delimiter(line)).map(cells).collect();
    assert!(rows.len() >= 20 && rows.iter().all(|row| row.len() == 3), "the route table's rows: {rows:?}");
    let listed: Vec<String> =
        rows.iter().flat_map(|row| row[1].split('`').skip(1).step_by(2).map(path_shape).collect::<Vec<_>>()).collect();
    let mut missing: Vec<String> = super::examples::router_paths(root);
    missing.extend(super::openapi_paths(root));
    missing.retain(|path| !listed.contains(path));
    assert!(missing.is_empty(), "routes that docs/api/README.md's route table has not in its Path column: {missing:?}");
    let openapi: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("assets/openapi.json")).unwrap()).unwrap();
    let answers = rows.iter().map(|row| row[2].as_str()).collect::<Vec<_>>().join("\n");
    for schema in ["ProvisionStatus", "RuntimeState", "OperationKind"] {
        for value in openapi["components"]["schemas"][schema]["enum"].as_array().unwrap() {
            let value = value.as_str().unwrap();
            assert!(answers.contains(&format!("`{value}`")), "the route table does not name the {schema} `{value}`");
        }
    }
}
