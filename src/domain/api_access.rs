//! Who may reach a cluster's Kubernetes API from outside its network: a list of IPv4 ranges, from the request
//! (`clusterConfig.apiAllowedCidrs`) or else the operator's `APP_API_ALLOWED_CIDRS`. There is no built-in list:
//! a provisioning for which neither names one is refused, so no cluster's API is open to every address unless
//! someone asked for `0.0.0.0/0`. One rule for the settings and the validation of requests.

use ipnet::Ipv4Net;

/// The most ranges one cluster takes. The vanilla control plane's security group holds one rule per range beside
/// its 17 others, within the 60 inbound rules AWS allows a group by default.
pub const MAX_API_ALLOWED_CIDRS: usize = 20;

/// One range as written: an IPv4 CIDR without host bits, in its canonical spelling (what the clouds store and
/// show back, so that a plan never sees a difference of spelling alone).
pub fn parse_api_allowed_cidr(value: &str) -> Result<Ipv4Net, String> {
    let network: Ipv4Net =
        value.parse().map_err(|_| format!("{value:?} is not an IPv4 CIDR such as 203.0.113.0/24"))?;
    if network.trunc() != network {
        return Err(format!("{value:?} has host bits set; did you mean {}?", network.trunc()));
    }
    if network.to_string() != value {
        return Err(format!("{value:?} is not written canonically; write it as {network}"));
    }
    Ok(network)
}

/// Why a list of ranges is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListProblem {
    /// The entry at `index` is not a range as [`parse_api_allowed_cidr`] takes it.
    Invalid { index: usize, message: String },
    /// The entry at `index` is an earlier one again.
    Repeated { index: usize, message: String },
    /// No entry, or more than [`MAX_API_ALLOWED_CIDRS`].
    Count { message: String },
}

impl ListProblem {
    pub fn message(&self) -> &str {
        match self {
            ListProblem::Invalid { message, .. } | ListProblem::Repeated { message, .. } => message,
            ListProblem::Count { message } => message,
        }
    }
}

/// A whole list: 1 to [`MAX_API_ALLOWED_CIDRS`] ranges, each valid and none twice. An empty list is refused
/// rather than read as "nobody": EKS reads an empty list of public access CIDRs as `0.0.0.0/0`.
pub fn parse_api_allowed_cidrs<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Vec<Ipv4Net>, ListProblem> {
    let mut networks = Vec::new();
    for (index, value) in values.into_iter().enumerate() {
        let network = parse_api_allowed_cidr(value).map_err(|message| ListProblem::Invalid { index, message })?;
        if networks.contains(&network) {
            return Err(ListProblem::Repeated { index, message: format!("{value:?} is listed twice") });
        }
        networks.push(network);
    }
    if networks.is_empty() || networks.len() > MAX_API_ALLOWED_CIDRS {
        let message = format!("must list 1 to {MAX_API_ALLOWED_CIDRS} IPv4 ranges, got {}", networks.len());
        return Err(ListProblem::Count { message });
    }
    Ok(networks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_ipv4_cidrs_without_host_bits_in_their_canonical_spelling() {
        for good in ["0.0.0.0/0", "203.0.113.0/24", "198.51.100.7/32", "10.0.0.0/8"] {
            assert_eq!(parse_api_allowed_cidr(good).unwrap().to_string(), good);
        }
        for (bad, says) in [
            ("203.0.113.0", "not an IPv4 CIDR"),
            ("2001:db8::/32", "not an IPv4 CIDR"),
            ("203.0.113.0/33", "not an IPv4 CIDR"),
            ("203.0.113.0/24 ", "not an IPv4 CIDR"),
            ("", "not an IPv4 CIDR"),
            ("\"]}", "not an IPv4 CIDR"),
            ("203.0.113.5/24", "did you mean 203.0.113.0/24?"),
            ("203.0.113.0/024", "not an IPv4 CIDR"),
            ("203.0.113.00/24", "write it as 203.0.113.0/24"),
        ] {
            let message = parse_api_allowed_cidr(bad).expect_err(bad);
            assert!(message.contains(says), "{bad:?}: {message}");
        }
    }

    #[test]
    fn a_list_has_one_to_twenty_distinct_ranges() {
        let list = parse_api_allowed_cidrs(["203.0.113.0/24", "198.51.100.7/32"]).unwrap();
        assert_eq!(list.len(), 2);
        let problem = parse_api_allowed_cidrs([]).unwrap_err();
        assert!(
            matches!(&problem, ListProblem::Count { message } if message.contains("must list 1 to 20")),
            "{problem:?}"
        );
        let many: Vec<String> = (0..21).map(|index| format!("10.0.{index}.0/24")).collect();
        let problem = parse_api_allowed_cidrs(many.iter().map(String::as_str)).unwrap_err();
        assert!(matches!(&problem, ListProblem::Count { message } if message.ends_with("got 21")), "{problem:?}");
        assert!(parse_api_allowed_cidrs(many[..20].iter().map(String::as_str)).is_ok());

        let problem = parse_api_allowed_cidrs(["203.0.113.0/24", "10.0.0.0/8", "203.0.113.0/24"]).unwrap_err();
        let repeated = "\"203.0.113.0/24\" is listed twice".to_owned();
        assert_eq!(problem, ListProblem::Repeated { index: 2, message: repeated });
        let problem = parse_api_allowed_cidrs(["203.0.113.0/24", "nope"]).unwrap_err();
        assert!(matches!(problem, ListProblem::Invalid { index: 1, .. }), "{problem:?}");
    }
}
