//! The pages tell provisionerctl as it is: every list of its commands (a paragraph of its page, or one naming
//! provisionerctl elsewhere, that names at least three, such as the page's `Commands:`) names every command its
//! `--help` lists, and every `PROVISIONER_*` or `PROVISIONERCTL_*` variable a page or an `e2e_test/` script names is
//! one provisionerctl reads.

use std::collections::BTreeSet;
use std::path::Path;

#[tokio::test]
async fn every_list_of_provisionerctls_commands_names_each_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut commands = BTreeSet::new();
    for top in help_commands(&[]).await {
        // `get` is listed as what it gets: `get runtimes`, `get runtime ID`, `get operation ID`.
        if top == "get" {
            commands.extend(help_commands(&["get"]).await.into_iter().map(|sub| format!("get {sub}")));
        } else {
            commands.insert(top);
        }
    }
    assert!(commands.len() >= 18, "provisionerctl --help lists its commands: {commands:?}");
    let reference = root.join("docs/operator/provisionerctl.md");
    let mut lists = Vec::new();
    for page in super::pages(root).into_iter().filter(|page| !page.ends_with("CHANGELOG.md")) {
        let text = std::fs::read_to_string(&page).unwrap();
        for paragraph in prose_paragraphs(&text) {
            let named = named_commands(&paragraph, &commands);
            // Elsewhere `get`, `create` and `delete` are RBAC's verbs too: there a list says it is provisionerctl's.
            if named.len() < 3 || (page != reference && !paragraph.contains("provisionerctl")) {
                continue;
            }
            let missing: Vec<&String> = commands.iter().filter(|command| !named.contains(*command)).collect();
            assert!(
                missing.is_empty(),
                "{} lists provisionerctl's commands without {missing:?}:\n{paragraph}",
                page.display()
            );
            lists.push(page.clone());
        }
    }
    assert!(lists.contains(&reference), "docs/operator/provisionerctl.md lists the commands");
}

/// The commands `provisionerctl <args> --help` lists under `Commands:`, but `help`.
async fn help_commands(args: &[&str]) -> Vec<String> {
    let argv = std::iter::once("provisionerctl").chain(args.iter().copied()).chain(["--help"]);
    let locations = crate::provisionerctl_support::nowhere();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = provisionerctl::run_args_in(&locations, argv, &mut out, &mut err).await;
    let help = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "provisionerctl {args:?} --help: {}", String::from_utf8_lossy(&err));
    let section = help.split_once("\nCommands:\n").map(|(_, rest)| rest).unwrap_or_default();
    section
        .lines()
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| *command != "help")
        .map(str::to_owned)
        .collect()
}

/// The paragraphs of a page outside its fenced code blocks.
fn prose_paragraphs(text: &str) -> Vec<String> {
    let mut paragraphs = vec![String::new()];
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            paragraphs.push(String::new());
        } else if !fenced && line.trim().is_empty() {
            paragraphs.push(String::new());
        } else if !fenced {
            let last = paragraphs.last_mut().unwrap();
            last.push_str(line);
            last.push('\n');
        }
    }
    paragraphs.retain(|paragraph| !paragraph.is_empty());
    paragraphs
}

/// The commands a paragraph names in code: `` `wake ID` ``, `` `provisionerctl get runtimes` ``, `` `cancel` ``.
fn named_commands(paragraph: &str, commands: &BTreeSet<String>) -> BTreeSet<String> {
    let words = paragraph.replace('\n', " ");
    let quoted = words.split('`').skip(1).step_by(2);
    quoted
        .filter_map(|quote| {
            let quote = quote.strip_prefix("provisionerctl ").unwrap_or(quote);
            let mut words = quote.split_whitespace();
            let first = words.next()?;
            let command = match (first, words.next()) {
                ("get", Some(what)) => format!("get {what}"),
                _ => first.to_owned(),
            };
            commands.contains(&command).then_some(command)
        })
        .collect()
}

#[test]
fn every_provisioner_variable_the_docs_and_scripts_name_is_provisionerctls() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let provisionerctl = super::texts_under(vec![root.join("crates/provisionerctl/src")]);
    let mut files = super::pages(root);
    files.extend(std::fs::read_dir(root.join("e2e_test")).unwrap().map(|entry| entry.unwrap().path()));
    let mut named = 0;
    let mut unknown = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (start, _) in text.match_indices("PROVISIONER") {
            let variable: String = text[start..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let is_provisionerctls = variable.starts_with("PROVISIONER_") || variable.starts_with("PROVISIONERCTL_");
            if !is_provisionerctls || text[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            named += 1;
            // Read as clap's `env = "…"` or by name: the name as a string literal.
            if !provisionerctl.contains(&format!("\"{variable}\"")) {
                unknown.push(format!("{} names {variable}, which provisionerctl does not read", file.display()));
            }
        }
    }
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
    assert!(named >= 10, "the pages and scripts name provisionerctl's variables ({named} found)");
}
