//! The name of a cluster's Terraform state bucket, valid for both S3 and GCS. Bucket names are global across every
//! account and project, so a name must be one that nobody else takes first: it ends with a part derived from the
//! runtime's (random) id, unknown before the runtime exists. The runtime records its bucket when it is created;
//! runtimes recorded before that keep their [`legacy_state_bucket_name`].

use sha2::{Digest, Sha256};
use uuid::Uuid;

const PREFIX: &str = "kubeopera-state-";
const LEGACY_PREFIX: &str = "kubeopera-terraform-state-";
/// 32 bits of the runtime id's hash: with the readable part, no two runtimes share a name in practice, and the
/// runner refuses a bucket that holds another runtime's state anyway.
const RUNTIME_HEX_LEN: usize = 8;
/// The shorter of the S3 and GCS limits (both 3..=63 for names without dots).
const MAX_LEN: usize = 63;
/// 40 bits of the hash: enough to keep clusters apart, short enough to leave room for the readable part.
const HASH_HEX_LEN: usize = 10;
/// S3 reserves these suffixes for access points and directory buckets.
const RESERVED_SUFFIXES: [&str; 4] = ["-s3alias", "--ol-s3", "--x-s3", "--table-s3"];
/// GCS refuses names containing "google" or close misspellings of it.
const FORBIDDEN_PARTS: [(&str, &str); 2] = [("google", "g-oogle"), ("g00gle", "g-00gle")];

/// The state bucket of a new runtime: `kubeopera-state-<environment>-<name>-<8 hex of its id's hash>`.
///
/// Validated inputs (an environment of at most 12 and a name of at most 24 DNS-label characters) keep their
/// spelling in at most 62 characters; anything else is lowercased, cut down and stripped of what S3 or GCS
/// reserve, the id's part keeping it unique. The fixed prefix already rules out IP-like names and the `xn--`,
/// `goog` and `sthree-` prefixes.
pub fn state_bucket_name(environment: &str, runtime_name: &str, runtime_id: Uuid) -> String {
    let digest = Sha256::digest(runtime_id.as_bytes());
    let id_part: String =
        digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>()[..RUNTIME_HEX_LEN].to_owned();
    let stem = sanitized_stem(environment, runtime_name, MAX_LEN - PREFIX.len() - 1 - RUNTIME_HEX_LEN);
    if stem.is_empty() { format!("{PREFIX}{id_part}") } else { format!("{PREFIX}{stem}-{id_part}") }
}

/// The bucket of a runtime recorded before runtimes recorded their bucket:
/// `kubeopera-terraform-state-<environment>-<name>`, or for other inputs a cut-down name with a hash of them.
pub fn legacy_state_bucket_name(environment: &str, runtime_name: &str) -> String {
    let plain = format!("{LEGACY_PREFIX}{environment}-{runtime_name}");
    if is_valid_bucket_name(&plain) {
        return plain;
    }

    // Hash the inputs separately so that ("a-b", "c") and ("a", "b-c") stay apart.
    let digest = Sha256::new().chain_update(environment).chain_update([0]).chain_update(runtime_name).finalize();
    let hash: String = digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>()[..HASH_HEX_LEN].to_owned();
    let stem = sanitized_stem(environment, runtime_name, MAX_LEN - LEGACY_PREFIX.len() - 1 - HASH_HEX_LEN);
    if stem.is_empty() { format!("{LEGACY_PREFIX}{hash}") } else { format!("{LEGACY_PREFIX}{stem}-{hash}") }
}

/// `<environment>-<name>` in bucket-name characters, without the parts GCS refuses, at most `max` long, without
/// dashes at either end.
fn sanitized_stem(environment: &str, runtime_name: &str, max: usize) -> String {
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
    stem.truncate(max);
    stem.trim_matches('-').to_owned()
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

    const ID: Uuid = Uuid::from_u128(0x0190b8a6_7f3e_7c4a_9a41_3f2d3c1b2a10);

    #[test]
    fn validated_inputs_keep_their_spelling_and_end_with_the_runtimes_part() {
        let bucket = state_bucket_name("dev", "team-a", ID);
        assert!(bucket.starts_with("kubeopera-state-dev-team-a-"), "{bucket}");
        assert_eq!(bucket.len(), "kubeopera-state-dev-team-a-".len() + RUNTIME_HEX_LEN);
        assert!(is_valid_bucket_name(&bucket), "{bucket}");
        assert_eq!(bucket, state_bucket_name("dev", "team-a", ID), "deterministic");
    }

    #[test]
    fn two_runtimes_of_the_same_name_get_different_buckets() {
        assert_ne!(state_bucket_name("dev", "team-a", ID), state_bucket_name("dev", "team-a", Uuid::now_v7()));
    }

    #[test]
    fn the_longest_validated_inputs_fit() {
        let environment = "e".repeat(12);
        let name = "n".repeat(24);
        let bucket = state_bucket_name(&environment, &name, ID);
        assert!(bucket.starts_with(&format!("{PREFIX}{environment}-{name}-")), "{bucket}");
        assert!(bucket.len() <= MAX_LEN, "{}", bucket.len());
    }

    #[test]
    fn legacy_names_are_the_ones_recorded_runtimes_were_given() {
        assert_eq!(legacy_state_bucket_name("dev", "team-a"), "kubeopera-terraform-state-dev-team-a");
        let long = legacy_state_bucket_name(&"e".repeat(12), &"n".repeat(25));
        assert_eq!(long.len(), 63);
        assert!(long.starts_with("kubeopera-terraform-state-eeeeeeeeeeee-nnnn"));
        assert_ne!(legacy_state_bucket_name("a_", "b"), legacy_state_bucket_name("a", "_b"));
    }

    #[test]
    fn names_reserved_by_s3_or_gcs_are_avoided() {
        for (environment, name) in
            [("dev", "x-s3alias"), ("dev", "x--ol-s3"), ("dev", "x--x-s3"), ("dev", "google-lab"), ("dev", "g00gle")]
        {
            for bucket in [state_bucket_name(environment, name, ID), legacy_state_bucket_name(environment, name)] {
                assert!(is_valid_bucket_name(&bucket), "{bucket}");
                assert!(!bucket.contains("google"), "{bucket}");
            }
        }
    }

    #[test]
    fn hostile_and_empty_inputs_still_give_valid_names() {
        for (environment, name) in
            [("", ""), ("-", "-"), ("dev", "\"${x}\"\n"), ("ünïcode", "東京"), ("dev", &"x".repeat(1000))]
        {
            for bucket in [state_bucket_name(environment, name, ID), legacy_state_bucket_name(environment, name)] {
                assert!(is_valid_bucket_name(&bucket), "{bucket:?}");
                assert!(bucket.len() <= MAX_LEN);
            }
        }
    }
}
