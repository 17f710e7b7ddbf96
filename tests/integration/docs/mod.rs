//! The documentation stays true: every integration test that the README or a page under `docs/` names as proof
//! (`` `<module>::<test>` ``, or `` `<module>::<sub>::<test>` `` for a nested module, with `<module>` a module of
//! this binary) exists where the name says; every `make` target they name is in the Makefile; every environment
//! variable they name is read or set somewhere in the project; every REST path they name is in the OpenAPI
//! document (or is one of the service's other endpoints), and every path of that document is named by a page;
//! every GraphQL field they name is in the schema (`graphql`); every relative link leads to a file. That every
//! variable of the service is in the docs is the generated configuration page's test (`generated`). The commands
//! reach the installed service (`examples`), the lists of provisionerctl's commands and variables are whole
//! (`provisionerctl`), every `APP_*` name anywhere is a setting (`settings`), tables render and the route table is
//! whole (`tables`), and the kustomization leaves the shared namespace alone (`resources`).

mod examples;
mod graphql;
mod provisionerctl;
mod resources;
mod settings;
mod tables;

use std::path::{Path, PathBuf};

#[test]
fn every_test_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let modules = modules_of_this_binary(root);
    let mut named = 0;
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for reference in text.split('`').skip(1).step_by(2) {
            let Some((module_path, test)) = test_path(reference) else { continue };
            if !modules.iter().any(|module| module == module_path[0]) {
                continue;
            }
            let file = module_file(root, &module_path)
                .unwrap_or_else(|| panic!("{} names {reference}, but no module file is at that path", page.display()));
            let source = std::fs::read_to_string(&file).unwrap();
            assert!(
                source.contains(&format!("fn {test}(")),
                "{} names {reference}, which is not a test in {}",
                page.display(),
                file.display()
            );
            named += 1;
        }
    }
    assert!(named >= 5, "the security page names its tests ({named} found)");
}

#[test]
fn every_make_target_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let makefile = std::fs::read_to_string(root.join("Makefile")).unwrap();
    let targets: Vec<&str> = makefile
        .lines()
        .filter(|line| line.starts_with(|c: char| c.is_ascii_lowercase()))
        .filter_map(|line| line.split_once(':').map(|(target, _)| target))
        .filter(|target| !target.contains([' ', '=']))
        .collect();
    let mut named = 0;
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for (start, _) in text.match_indices("make ") {
            let target: String = text[start + "make ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            // Prose ("make sure") is no command: only `make` in backticks, after a prompt or opening a line counts.
            if target.is_empty() || !looks_like_a_command(&text[..start]) {
                continue;
            }
            assert!(
                targets.contains(&target.as_str()),
                "{} names `make {target}`, which the Makefile has not",
                page.display()
            );
            named += 1;
        }
    }
    assert!(named >= 5, "the pages name their make targets ({named} found)");
}

/// Whether a `make` after `before` starts a command: in backticks, after a shell prompt, or at a line's very start
/// (a wrapped line of prose is indented).
fn looks_like_a_command(before: &str) -> bool {
    let line = before.rsplit('\n').next().unwrap_or(before);
    line.is_empty() || line.ends_with('`') || line.ends_with("$ ")
}

#[test]
fn every_relative_link_leads_to_a_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in text.split("](").skip(1) {
            let Some(target) = link.split(')').next() else { continue };
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            let file = page.parent().unwrap().join(path);
            assert!(file.exists(), "{} links to {target}, which does not exist", page.display());
            checked += 1;
        }
    }
    assert!(checked >= 3, "the pages link to each other ({checked} links found)");
}

/// The README, CONTRIBUTING.md, CHANGELOG.md and every Markdown page under `docs/`, at any depth.
/// The code-quoted words of every page, with the page's path.
fn quoted(root: &Path) -> Vec<(PathBuf, String)> {
    pages(root)
        .into_iter()
        .flat_map(|page| {
            let text = std::fs::read_to_string(&page).unwrap();
            let words: Vec<String> = text.split('`').skip(1).step_by(2).map(str::to_owned).collect();
            words.into_iter().map(move |word| (page.clone(), word))
        })
        .collect()
}

/// The text of every source, script and package file of the project (not its pages).
fn project_sources(root: &Path) -> String {
    let folders =
        ["src", "crates", "tools", "migrations", "charts", "benches", ".ci", "resources", "examples", "tests"];
    let mut text = std::fs::read_to_string(root.join("Makefile")).unwrap();
    text.push_str(&texts_under(folders.iter().map(|folder| root.join(folder)).collect()));
    text
}

/// The text of every file under `folders` but the pages.
fn texts_under(mut folders: Vec<PathBuf>) -> String {
    let mut text = String::new();
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_none_or(|extension| extension != "md")
                && let Ok(source) = std::fs::read_to_string(&path)
            {
                text.push_str(&source);
            }
        }
    }
    text
}

#[test]
fn every_variable_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = project_sources(root);
    // Variables of other programs that the pages name for their readers.
    let outside = ["AWS_", "GOOGLE_", "TF_", "KUBERNETES_", "CLOUDSDK_", "STORAGE_EMULATOR_HOST", "HTTPS_PROXY"];
    let mut named = 0;
    for (page, word) in quoted(root) {
        let variable = word.split('=').next().unwrap_or_default();
        let is_variable = variable.len() > 3
            && variable.contains('_')
            && variable.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && variable.starts_with(|c: char| c.is_ascii_uppercase());
        if !is_variable || outside.iter().any(|prefix| variable.starts_with(prefix)) {
            continue;
        }
        // The service's own are fields of its settings, lower-cased as the `config` crate reads them.
        let read = sources.contains(variable) || sources.contains(&variable.to_lowercase());
        assert!(read, "{} names {variable}, which nothing in the project reads", page.display());
        named += 1;
    }
    assert!(named >= 50, "the pages name the variables ({named} found)");
}

#[test]
fn every_rest_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let documented = openapi_paths(root);
    // The endpoints outside the OpenAPI document (the API reference, probes, GraphQL) are spelled in src/api.
    let router = texts_under(vec![root.join("src/api")]);
    let named: Vec<(PathBuf, String)> =
        rest_paths_named(root).into_iter().filter(|(_, path)| path.starts_with("/api/")).collect();
    for (page, path) in &named {
        assert!(
            documented.contains(path) || router.contains(path.as_str()),
            "{} names {path}, which is no path of the OpenAPI document",
            page.display()
        );
    }
    assert!(named.len() >= 10, "the pages name the REST paths ({} found)", named.len());
}

#[test]
fn every_rest_path_of_the_openapi_document_is_in_the_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let named: Vec<String> = rest_paths_named(root).into_iter().map(|(_, path)| path).collect();
    for path in openapi_paths(root) {
        assert!(named.contains(&path), "no page names {path}, a path of the OpenAPI document");
    }
}

/// The paths of `assets/openapi.json`, as shapes.
fn openapi_paths(root: &Path) -> Vec<String> {
    let openapi: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("assets/openapi.json")).unwrap()).unwrap();
    openapi["paths"].as_object().unwrap().keys().map(|path| path_shape(path)).collect()
}

/// Every quoted absolute path of the pages (`/api/…`, `/healthz`), as a shape, with its page.
fn rest_paths_named(root: &Path) -> Vec<(PathBuf, String)> {
    quoted(root)
        .into_iter()
        .filter_map(|(page, word)| {
            let path = word.split_whitespace().find(|part| part.starts_with('/'))?;
            Some((page, path_shape(path)))
        })
        .collect()
}

/// `{runtimeId}` and `{id}` alike: the shape of a path, not its parameters' names.
fn path_shape(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = path.trim_end_matches([',', '.', ';', ':', ')', '"']).trim_end_matches('/');
    let segments: Vec<&str> = path
        .split('/')
        .map(|segment| if segment.starts_with('{') || segment.starts_with('<') { "{}" } else { segment })
        .collect();
    segments.join("/")
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md"), root.join("CONTRIBUTING.md"), root.join("CHANGELOG.md")];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("docs/") {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|extension| extension == "md") {
                pages.push(path);
            }
        }
    }
    pages
}

/// The top-level modules that `main.rs` declares.
fn modules_of_this_binary(root: &Path) -> Vec<String> {
    let main = std::fs::read_to_string(root.join("tests/integration/main.rs")).unwrap();
    main.lines().filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)).collect()
}

/// `a::b::test` as its module path (`[a, b]`) and its test name; `None` for text that is no such path.
fn test_path(reference: &str) -> Option<(Vec<&str>, &str)> {
    let mut segments: Vec<&str> = reference.split("::").collect();
    let is_identifier = |segment: &&str| {
        segment.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && segment.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if segments.len() < 2 || !segments.iter().all(is_identifier) {
        return None;
    }
    let test = segments.pop()?;
    Some((segments, test))
}

/// The file of a module path: `a/b.rs` or `a/b/mod.rs` under `tests/integration`.
fn module_file(root: &Path, module_path: &[&str]) -> Option<PathBuf> {
    let folder = root.join("tests/integration").join(module_path.join("/"));
    [folder.with_extension("rs"), folder.join("mod.rs")].into_iter().find(|file| file.exists())
}
