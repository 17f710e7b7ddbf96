//! Parsed documents kept by their text: clients send the same few queries again and again, and copying a parsed
//! document costs a fraction of parsing it. Validation and the limits still run on every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::parser::types::ExecutableDocument;

/// How many distinct documents are kept; when full the cache starts again, so a caller sending ever new texts
/// costs a parse each, as without the cache, and the usual queries are kept again at their next request.
const CAPACITY: usize = 256;
/// Longer texts are parsed every time: they are rare, and keeping them would hold their size in memory.
const MAX_KEPT_LEN: usize = 4096;

#[derive(Default)]
pub struct ParsedDocuments {
    /// Shared, so that a request copies its document after the lock is released.
    documents: Mutex<HashMap<String, Arc<ExecutableDocument>>>,
}

impl ParsedDocuments {
    /// Gives `request` its parsed document: a copy of the kept one, or the one parsed now, then kept. A text that
    /// does not parse is left for the schema to refuse with its usual error.
    pub fn prepare(&self, request: &mut async_graphql::Request) {
        if request.query.len() > MAX_KEPT_LEN {
            return;
        }
        if let Some(document) = self.kept(&request.query) {
            request.set_parsed_query(ExecutableDocument::clone(&document));
            return;
        }
        if let Ok(document) = request.parsed_query() {
            let document = Arc::new(document.clone());
            self.keep(request.query.clone(), document);
        }
    }

    fn kept(&self, query: &str) -> Option<Arc<ExecutableDocument>> {
        let documents = self.documents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        documents.get(query).cloned()
    }

    fn keep(&self, query: String, document: Arc<ExecutableDocument>) {
        let mut documents = self.documents.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if documents.len() >= CAPACITY {
            documents.clear();
        }
        documents.insert(query, document);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.documents.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "query($id: String!) { runtimeOperationStatus(id: $id) { id state } }";

    fn prepared(documents: &ParsedDocuments, query: &str) -> async_graphql::Request {
        let mut request = async_graphql::Request::new(query);
        documents.prepare(&mut request);
        request
    }

    #[test]
    fn a_text_sent_again_gets_the_kept_document() {
        let documents = ParsedDocuments::default();
        let mut first = prepared(&documents, STATUS);
        let mut again = prepared(&documents, STATUS);
        assert_eq!(documents.len(), 1);
        let first = format!("{:?}", first.parsed_query().unwrap());
        assert_eq!(format!("{:?}", again.parsed_query().unwrap()), first);
        prepared(&documents, "{ runtimes { totalCount } }");
        assert_eq!(documents.len(), 2);
    }

    #[test]
    fn a_text_that_does_not_parse_is_not_kept() {
        let documents = ParsedDocuments::default();
        let mut request = prepared(&documents, "query { runtimeOperationStatus(");
        assert_eq!(documents.len(), 0);
        assert!(request.parsed_query().is_err(), "the schema still refuses it");
    }

    #[test]
    fn a_full_cache_starts_again() {
        let documents = ParsedDocuments::default();
        for n in 0..CAPACITY {
            prepared(&documents, &format!("{{ a{n} }}"));
        }
        assert_eq!(documents.len(), CAPACITY);
        prepared(&documents, STATUS);
        assert_eq!(documents.len(), 1);
    }

    #[test]
    fn a_long_text_is_parsed_each_time() {
        let documents = ParsedDocuments::default();
        let long = format!("{{ a {} }}", " ".repeat(MAX_KEPT_LEN));
        prepared(&documents, &long);
        assert_eq!(documents.len(), 0);
    }
}
