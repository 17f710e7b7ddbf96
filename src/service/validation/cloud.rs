//! Checks that follow the cloud: each topology's own section, regions and zones, projects, and networks.

use ipnet::Ipv4Net;

use super::{Check, Findings, Invalid, InvalidReason};
use crate::domain::{ClusterConfig, Topology};

/// Each topology needs its own cloud section and no other; vanilla_kubeadm alone has control-plane nodes. Zones
/// are checked against the region only when the region is valid.
pub(super) fn check_topology_sections(config: &ClusterConfig, region_valid: bool, findings: &mut Findings) {
    let topology = config.topology.as_str();
    match config.topology {
        Topology::VanillaKubeadm | Topology::Eks => {
            if config.gcp.is_some() {
                findings.check(Err(Invalid::new(
                    InvalidReason::NotAllowed,
                    "clusterConfig.gcp",
                    format!("must be absent for topology {topology}"),
                )));
            }
            match &config.aws {
                None => {
                    findings.check(Err(Invalid::new(
                        InvalidReason::Required,
                        "clusterConfig.aws",
                        format!("is required for topology {topology}"),
                    )));
                }
                Some(aws) if region_valid => {
                    findings.check(check_zones(
                        "clusterConfig.aws.zones",
                        &config.region,
                        &aws.zones,
                        is_aws_zone_suffix,
                    ));
                }
                Some(_) => {}
            }
        }
        Topology::Gke => {
            if config.aws.is_some() {
                findings.check(Err(Invalid::new(
                    InvalidReason::NotAllowed,
                    "clusterConfig.aws",
                    "must be absent for topology gke",
                )));
            }
            match &config.gcp {
                None => {
                    findings.check(Err(Invalid::new(
                        InvalidReason::Required,
                        "clusterConfig.gcp",
                        "is required for topology gke",
                    )));
                }
                Some(gcp) => {
                    findings.check(check_gcp_project("clusterConfig.gcp.projectId", &gcp.project_id));
                    if region_valid {
                        findings.check(check_zones(
                            "clusterConfig.gcp.zones",
                            &config.region,
                            &gcp.zones,
                            is_gcp_zone_suffix,
                        ));
                    }
                }
            }
        }
    }
    let control_plane = match (config.topology, &config.control_plane) {
        (Topology::VanillaKubeadm, None) => Err(Invalid::new(
            InvalidReason::Required,
            "clusterConfig.controlPlane",
            "is required for topology vanilla_kubeadm",
        )),
        (Topology::Eks | Topology::Gke, Some(_)) => Err(Invalid::new(
            InvalidReason::NotAllowed,
            "clusterConfig.controlPlane",
            format!("must be absent for topology {topology}: its control plane is managed by the cloud"),
        )),
        _ => Ok(()),
    };
    findings.check(control_plane);
}

pub(super) fn check_region(topology: Topology, region: &str) -> Check {
    let field = "clusterConfig.region";
    let valid = match topology {
        Topology::VanillaKubeadm | Topology::Eks => is_aws_region(region),
        Topology::Gke => is_gcp_region(region),
    };
    if !valid {
        let example = match topology {
            Topology::VanillaKubeadm | Topology::Eks => "eu-central-1",
            Topology::Gke => "europe-west3",
        };
        return Err(Invalid::new(
            InvalidReason::UnsupportedValue,
            field,
            format!("{region:?} is not a region of {} (for example {example})", topology.cloud().as_str()),
        ));
    }
    Ok(())
}

fn is_lowercase_word(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_lowercase())
}

/// `us-east-1`, `eu-central-2`, `us-gov-west-1`.
fn is_aws_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    let (Some(number), words) = (parts.last(), &parts[..parts.len().saturating_sub(1)]) else {
        return false;
    };
    (2..=3).contains(&words.len())
        && words[0].len() == 2
        && words.iter().all(|word| is_lowercase_word(word))
        && !number.is_empty()
        && number.len() <= 2
        && number.bytes().all(|byte| byte.is_ascii_digit())
}

/// `europe-west3`, `us-central1`, `northamerica-northeast2`.
fn is_gcp_region(region: &str) -> bool {
    let Some((area, rest)) = region.split_once('-') else {
        return false;
    };
    let letters = rest.trim_end_matches(|character: char| character.is_ascii_digit());
    is_lowercase_word(area)
        && is_lowercase_word(letters)
        && letters.len() < rest.len()
        && rest.len() - letters.len() <= 2
}

fn is_aws_zone_suffix(suffix: &str) -> bool {
    suffix.len() == 1 && is_lowercase_word(suffix)
}

fn is_gcp_zone_suffix(suffix: &str) -> bool {
    suffix.len() == 2 && suffix.starts_with('-') && is_lowercase_word(&suffix[1..])
}

/// Zones are the region followed by the cloud's zone suffix (`eu-central-1a`, `europe-west3-b`).
fn check_zones(field: &str, region: &str, zones: &[String], valid_suffix: fn(&str) -> bool) -> Check {
    if zones.is_empty() || zones.len() > 6 {
        return Err(Invalid::new(InvalidReason::OutOfRange, field, "must list 1 to 6 zones"));
    }
    for (index, zone) in zones.iter().enumerate() {
        let in_region = zone.strip_prefix(region).is_some_and(valid_suffix);
        if !in_region {
            return Err(Invalid::new(
                InvalidReason::UnsupportedValue,
                format!("{field}[{index}]"),
                format!("{zone:?} is not a zone of region {region}"),
            ));
        }
        if zones[..index].contains(zone) {
            return Err(Invalid::new(
                InvalidReason::Conflict,
                format!("{field}[{index}]"),
                format!("{zone:?} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// GCP project ids: 6 to 30 characters, lowercase letters, digits and hyphens, starting with a letter.
fn check_gcp_project(field: &str, value: &str) -> Check {
    let valid = (6..=30).contains(&value.len())
        && value.as_bytes()[0].is_ascii_lowercase()
        && !value.ends_with('-')
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if !valid {
        return Err(Invalid::new(InvalidReason::Format, field, format!("{value:?} is not a GCP project id")));
    }
    Ok(())
}

pub(super) fn parse_cidr(field: &str, value: &str) -> Result<Ipv4Net, Invalid> {
    let network: Ipv4Net = value.parse().map_err(|_| {
        Invalid::new(InvalidReason::Format, field, format!("{value:?} is not an IPv4 CIDR such as 10.0.0.0/16"))
    })?;
    if network.trunc() != network {
        return Err(Invalid::new(
            InvalidReason::Format,
            field,
            format!("{value:?} has host bits set; did you mean {}?", network.trunc()),
        ));
    }
    if !(8..=28).contains(&network.prefix_len()) {
        return Err(Invalid::new(
            InvalidReason::OutOfRange,
            field,
            format!("{value:?} must have a prefix length between 8 and 28"),
        ));
    }
    Ok(network)
}

pub(super) fn check_disjoint(field: &str, network: Ipv4Net, other_name: &str, other: Ipv4Net) -> Check {
    if network.contains(&other.network()) || other.contains(&network.network()) {
        return Err(Invalid::new(InvalidReason::Conflict, field, format!("{network} overlaps {other_name} {other}")));
    }
    Ok(())
}
