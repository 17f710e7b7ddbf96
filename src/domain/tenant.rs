//! The tenant a runtime belongs to (Kyma's `Tenant` header): recorded when it is created, and, when a request
//! names one, the only runtimes that request sees or changes. It scopes; it does not authenticate: which caller
//! may act for which tenant is decided in front of the provisioner (Kyma's gateway sets the header).

/// The longest tenant accepted: Kyma's global account ids are UUIDs, and a tenant is shown in every audit line.
const MAX_LEN: usize = 64;

/// A tenant id: 1 to 64 letters, digits, `-`, `_` and `.`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant(String);

impl Tenant {
    /// The tenant `value` names, or what is wrong with it.
    pub fn parse(value: &str) -> Result<Tenant, String> {
        if value.is_empty() || value.len() > MAX_LEN {
            return Err(format!("must be 1 to {MAX_LEN} characters"));
        }
        if !value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err("may hold only letters, digits, '-', '_' and '.'".to_owned());
        }
        Ok(Tenant(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_a_short_plain_id() {
        assert_eq!(
            Tenant::parse("3e64ebae-38b5-46a0-b1ed-9ccee153a0ae").unwrap().as_str(),
            "3e64ebae-38b5-46a0-b1ed-9ccee153a0ae"
        );
        assert!(Tenant::parse("").is_err());
        assert!(Tenant::parse(&"a".repeat(65)).is_err());
        assert!(Tenant::parse("a b").is_err());
        assert!(Tenant::parse("a/../b").is_err());
    }
}
