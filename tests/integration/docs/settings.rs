//! Every `APP_*` variable that a page (generated ones included: `docs/api/errors.md`, `docs/operator/configuration.md`),
//! a comment or string of `src/`, the chart, the manifests or `e2e_test/` names is a variable of the settings
//! (`src/settings/variables.rs`): a name the service does not read, such as one it once read under another name,
//! sends its reader to set something that does nothing.

use std::path::{Path, PathBuf};

/// Read by the settings' loader before the variables: the file that holds them.
const LOADER: &str = "APP_CONFIG_FILE";
/// Variables the service read once; named only where a line says that it reads them no more.
const RETIRED: &[&str] = &["APP_RUNNER_SERVICE_ACCOUNT"];

#[test]
fn every_app_variable_named_anywhere_is_a_setting() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let settings = setting_names(root);
    let mut named = 0;
    let mut unknown = Vec::new();
    for file in files_naming_variables(root) {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (number, line) in text.lines().enumerate() {
            for (variable, wildcard) in app_variables(line) {
                named += 1;
                let known = if wildcard {
                    settings.iter().any(|setting| setting.starts_with(&variable))
                } else {
                    settings.contains(&variable) || variable == LOADER
                };
                let retired = RETIRED.contains(&variable.as_str())
                    && ["no longer read", "nor reads"].iter().any(|says| line.contains(says));
                if !known && !retired {
                    unknown.push(format!("{}:{} names {variable}: {}", file.display(), number + 1, line.trim()));
                }
            }
        }
    }
    assert!(unknown.is_empty(), "variables that are not in src/settings/variables.rs:\n{}", unknown.join("\n"));
    assert!(named >= 200, "the pages and sources name the variables ({named} found)");
}

/// The settings' variables: the fields of `Variables`, upper-cased as the environment spells them.
fn setting_names(root: &Path) -> Vec<String> {
    let source = std::fs::read_to_string(root.join("src/settings/variables.rs")).unwrap();
    let body = source.split("struct Variables {").nth(1).unwrap().split("\n}\n").next().unwrap();
    let names: Vec<String> = body
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub(super) ")?.split(':').next())
        .map(str::to_uppercase)
        .collect();
    assert!(names.len() >= 50 && names.contains(&"APP_ADDRESS".to_owned()), "the settings' variables: {names:?}");
    names
}

/// The pages, every Rust file of `src/`, the chart's and the manifests' YAML and templates, and `e2e_test/`.
fn files_naming_variables(root: &Path) -> Vec<PathBuf> {
    let mut files = super::pages(root);
    let mut folders = vec![root.join("src"), root.join("charts"), root.join("resources"), root.join("e2e_test")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let extension = path.extension().and_then(|extension| extension.to_str()).unwrap_or_default();
            if path.is_dir() {
                folders.push(path);
            } else if ["rs", "yaml", "yml", "tpl", "sh", "txt", ""].contains(&extension) {
                files.push(path);
            }
        }
    }
    files
}

/// The `APP_*` names of a line; a name ending in `_*` (`APP_DATABASE_*`) is a wildcard, returned as its prefix.
fn app_variables(line: &str) -> Vec<(String, bool)> {
    let mut variables = Vec::new();
    for (start, _) in line.match_indices("APP_") {
        if line[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let name: String =
            line[start..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
        let wildcard = name.ends_with('_') && line[start + name.len()..].starts_with('*');
        variables.push((if wildcard { name } else { name.trim_end_matches('_').to_owned() }, wildcard));
    }
    variables
}
