//! Which object manages a runtime: a `Runtime` resource, named by its namespace and name. Once managed, only that
//! object's reconciler changes the runtime; REST and GraphQL still read it (and approve its plans).

use std::fmt;

use chrono::{DateTime, Utc};

use super::OperationId;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRef {
    pub namespace: String,
    pub name: String,
}

/// A write to an operation of a runtime a resource manages (its claim, a stage, its end, an approval): what the
/// resource's reconciler looks at the object again for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedOperationChange {
    pub resource: ResourceRef,
    pub operation_id: OperationId,
    pub updated_at: DateTime<Utc>,
}

impl ResourceRef {
    /// `namespace/name`, as the database stores it and the APIs show it.
    pub fn parse(text: &str) -> Result<ResourceRef, String> {
        match text.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ResourceRef { namespace: namespace.to_owned(), name: name.to_owned() })
            }
            _ => Err(format!("{text:?} is not namespace/name")),
        }
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_reads_back_as_it_is_written() {
        let reference = ResourceRef { namespace: "team-a".into(), name: "blue".into() };
        assert_eq!(ResourceRef::parse(&reference.to_string()), Ok(reference));
        for bad in ["", "blue", "/blue", "team-a/", "a/b/c"] {
            assert!(ResourceRef::parse(bad).is_err(), "{bad}");
        }
    }
}
