//! The name of a cluster's Terraform state bucket, valid for both S3 and GCS.

use sha2::{Digest, Sha256};

const PREFIX: &str = "kubeopera-terraform-state-";
/// The shorter of the S3 and GCS limits (both 3..=63 for names without dots).
const MAX_LEN: usize = 63;
/// 40 bits of the hash: enough to keep clusters apart, short enough to leave room for the readable part.
const HASH_HEX_LEN: usize = 10;
/// S3 reserves these suffixes for access points and directory buckets.
const RESERVED_SUFFIXES: [&str; 4] = ["-s3alias", "--ol-s3", "--x-s3", "--table-s3"];
/// GCS refuses names containing "google" or close misspellings of it.
const FORBIDDEN_PARTS: [(&str, &str); 2] = [("google", "g-oogle"), ("g00gle", "g-00gle")];

/// The state bucket of a cluster: `kubeopera-terraform-state-<environment>-<name>`.
///
/// Validated inputs (an environment of at most 12 and a name of at most 24 DNS-label characters) give exactly
/// that name of at most 63 characters. Anything else (too long, other characters, a name S3 or GCS reserves)
/// is lowercased, cut down and suffixed with a hash of the original inputs, so the result is always a valid
/// bucket name and two clusters never share one. The fixed prefix already rules out IP-like names and the
/// `xn--`, `goog` and `sthree-` prefixes.
pub fn state_bucket_name(environment: &str, runtime_name: &str) -> String {
    let plain = format!("{PREFIX}{environment}-{runtime_name}");
    if is_valid_bucket_name(&plain) {
        return plain;
    }

    // Hash the inputs separately so that ("a-b", "c") and ("a", "b-c") stay apart.
    let digest = Sha256::new().chain_update(environment).chain_update([0]).chain_update(runtime_name).finalize();
    let hash: String = digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>()[..HASH_HEX_LEN].to_owned();

    let mut stem: String = format!("{environment}-{runtime_name}")
        .chars()
        .map(|character| match character.to_ascii_lowercase() {
            lower @ ('a'..='z' | '0'..='9') => lower,
            _ => '-',
        })
        .collect();
    for (forbidden, replacement) in FORBIDDEN_PARTS {
        stem = stem.replace(forbidden, replacement);
    }
    // The stem is ASCII now, so cutting at a byte index is cutting at a character.
    stem.truncate(MAX_LEN - PREFIX.len() - 1 - HASH_HEX_LEN);
    let stem = stem.trim_matches('-');

    if stem.is_empty() { format!("{PREFIX}{hash}") } else { format!("{PREFIX}{stem}-{hash}") }
}

fn is_valid_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=MAX_LEN).contains(&name.len())
        && bytes.iter().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || *byte == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && !RESERVED_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
        && !FORBIDDEN_PARTS.iter().any(|(part, _)| name.contains(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validated_inputs_give_the_documented_name() {
        assert_eq!(state_bucket_name("dev", "team-a"), "kubeopera-terraform-state-dev-team-a");
    }

    #[test]
    fn the_longest_validated_inputs_fit_exactly() {
        let environment = "e".repeat(12);
        let name = "n".repeat(24);
        let bucket = state_bucket_name(&environment, &name);
        assert_eq!(bucket, format!("{PREFIX}{environment}-{name}"));
        assert_eq!(bucket.len(), 63);
    }

    #[test]
    fn longer_inputs_are_cut_to_63_and_stay_unique() {
        let environment = "e".repeat(12);
        let first = state_bucket_name(&environment, &"n".repeat(25));
        let second = state_bucket_name(&environment, &"n".repeat(26));
        assert_eq!(first.len(), 63);
        assert_eq!(second.len(), 63);
        assert_ne!(first, second);
        assert!(first.starts_with("kubeopera-terraform-state-eeeeeeeeeeee-nnnn"));
        assert!(is_valid_bucket_name(&first));
        assert_eq!(first, state_bucket_name(&environment, &"n".repeat(25)), "deterministic");
    }

    #[test]
    fn invalid_characters_are_replaced_and_the_hash_tells_them_apart() {
        let upper = state_bucket_name("Dev", "Team_A");
        let lower = state_bucket_name("dev", "team-a");
        assert!(is_valid_bucket_name(&upper), "{upper}");
        assert!(upper.starts_with("kubeopera-terraform-state-dev-team-a-"));
        assert_ne!(upper, lower);
    }

    #[test]
    fn the_split_between_environment_and_name_matters_once_hashed() {
        assert_ne!(state_bucket_name("a_", "b"), state_bucket_name("a", "_b"));
    }

    #[test]
    fn names_reserved_by_s3_or_gcs_are_avoided() {
        for (environment, name) in
            [("dev", "x-s3alias"), ("dev", "x--ol-s3"), ("dev", "x--x-s3"), ("dev", "google-lab"), ("dev", "g00gle")]
        {
            let bucket = state_bucket_name(environment, name);
            assert!(is_valid_bucket_name(&bucket), "{bucket}");
            assert!(!bucket.contains("google"), "{bucket}");
        }
    }

    #[test]
    fn hostile_and_empty_inputs_still_give_valid_names() {
        for (environment, name) in
            [("", ""), ("-", "-"), ("dev", "\"${x}\"\n"), ("ünïcode", "東京"), ("dev", &"x".repeat(1000))]
        {
            let bucket = state_bucket_name(environment, name);
            assert!(is_valid_bucket_name(&bucket), "{bucket:?}");
            assert!(bucket.len() <= MAX_LEN);
        }
    }
}
