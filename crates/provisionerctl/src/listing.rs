//! Lists as kubectl users expect them: filtered by labels (`-l key=value,...`) and, with `--all`, every page,
//! following the server's `nextCursor` to the end. The server filters by one label (`?label=key=value`); further
//! ones are checked here, on the page's `labels`.

use std::io::Write;

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use crate::{Client, Error};

/// How much of a list is read.
#[derive(Debug, Args)]
pub struct Pages {
    /// Every page: follows the server's `nextCursor` until the last (without it, the first page only).
    #[arg(long)]
    pub all: bool,
    /// Resources per page (1 to 100) [default: the server's, 20].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub chunk_size: Option<u8>,
}

/// `-l`'s value: `key=value` pairs, comma-separated (`==` as kubectl also takes).
pub fn parse_selector(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(|pair| {
            let refused = || format!("{pair:?} is not key=value (provisionerctl selects by equal labels only)");
            let (key, value) = pair.split_once("==").or_else(|| pair.split_once('=')).ok_or_else(refused)?;
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() || key.ends_with('!') || value.contains('=') {
                return Err(refused());
            }
            Ok((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The list at `path` (its resources under `key`), with `query` and the labels of `selector`: one page or, with
/// `--all`, every page as one answer. A first page with more after it says so on `err`.
pub async fn list(
    client: &Client,
    (path, key): (&str, &str),
    query: &[(&str, &str)],
    selector: &[(String, String)],
    pages: &Pages,
    err: &mut dyn Write,
) -> Result<Value, Error> {
    let label = selector.first().map(|(key, value)| format!("{key}={value}"));
    let chunk_size = pages.chunk_size.map(|size| size.to_string());
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut page_query: Vec<(&str, &str)> = query.to_vec();
        page_query.extend(label.iter().map(|label| ("label", label.as_str())));
        page_query.extend(chunk_size.iter().map(|size| ("first", size.as_str())));
        page_query.extend(cursor.iter().map(|cursor| ("after", cursor.as_str())));
        let mut page = client.json(Method::GET, path, &page_query, None).await?;
        let found = page.get_mut(key).map(Value::take);
        items.extend(found.and_then(|found| found.as_array().cloned()).unwrap_or_default());
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        match &cursor {
            Some(_) if pages.all => {}
            Some(_) => {
                let _ = writeln!(err, "provisionerctl: more {key} follow on further pages: --all lists them all");
                break;
            }
            None => break,
        }
    }
    items.retain(|item| selector.iter().all(|(key, value)| item["labels"][key].as_str() == Some(value.as_str())));
    Ok(serde_json::json!({ key: items, "nextCursor": cursor }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_equal_labels_only() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect()
        };
        assert_eq!(parse_selector("team=blue"), Ok(pairs(&[("team", "blue")])));
        assert_eq!(parse_selector("team==blue, tier=1"), Ok(pairs(&[("team", "blue"), ("tier", "1")])));
        for refused in ["team", "team!=blue", "=blue", "team in (a,b)", "a=b=c"] {
            let why = parse_selector(refused).unwrap_err();
            assert!(why.contains("is not key=value"), "{refused}: {why}");
        }
    }
}
