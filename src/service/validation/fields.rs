//! Checks of single fields: names, texts, labels, machine types, credentials and ids.

use super::{Check, Invalid, InvalidReason, MAX_ENVIRONMENT_LEN, MAX_LABELS};
use crate::domain::{Labels, OperationId, RuntimeId};

pub(super) fn check_credential_id(value: &str) -> Check {
    check_text("clusterConfig.credentialId", value, 255)?;
    if value.trim().is_empty() {
        return Err(Invalid::new(InvalidReason::Required, "clusterConfig.credentialId", "must not be empty"));
    }
    Ok(())
}

pub(super) fn check_dns_label(field: &str, value: &str, max_len: usize) -> Check {
    if value.is_empty() || value.len() > max_len {
        return Err(Invalid::new(InvalidReason::OutOfRange, field, format!("must be 1 to {max_len} characters long")));
    }
    let valid_chars = value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    let starts_with_letter = value.as_bytes()[0].is_ascii_lowercase();
    let ends_alphanumeric = value.as_bytes()[value.len() - 1] != b'-';
    if !(valid_chars && starts_with_letter && ends_alphanumeric) {
        return Err(Invalid::new(
            InvalidReason::Format,
            field,
            "must be a DNS-1123 label: lowercase letters, digits and '-', starting with a letter and ending with a \
             letter or digit",
        ));
    }
    Ok(())
}

/// Letters and digits only: the state bucket joins environment and name with `-`, so a hyphen in the
/// environment could make two clusters share a bucket (`dev-a` + `b` and `dev` + `a-b`).
pub(super) fn check_environment(value: &str) -> Check {
    let valid = !value.is_empty()
        && value.len() <= MAX_ENVIRONMENT_LEN
        && value.as_bytes()[0].is_ascii_lowercase()
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
    if !valid {
        return Err(Invalid::new(
            InvalidReason::Format,
            "clusterConfig.environment",
            format!("must be 1 to {MAX_ENVIRONMENT_LEN} lowercase letters and digits, starting with a letter"),
        ));
    }
    Ok(())
}

pub(super) fn check_text(field: &str, value: &str, max_len: usize) -> Check {
    if value.chars().count() > max_len {
        return Err(Invalid::new(
            InvalidReason::OutOfRange,
            field,
            format!("must be at most {max_len} characters long"),
        ));
    }
    if value.chars().any(|character| character.is_control() && character != '\n') {
        return Err(Invalid::new(InvalidReason::Format, field, "must not contain control characters"));
    }
    Ok(())
}

pub(super) fn check_machine_type(field: &str, value: &str) -> Check {
    let valid = !value.is_empty()
        && value.len() <= 64
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-._".contains(&byte));
    if !valid {
        return Err(Invalid::new(
            InvalidReason::Format,
            field,
            format!("{value:?} is not a machine type such as t3.large or e2-standard-4"),
        ));
    }
    Ok(())
}

/// A `key=value` filter of the runtime list: the key and the value follow the label rules.
pub fn parse_label_filter(field: &str, filter: &str) -> Result<(String, String), Invalid> {
    let (key, value) = filter
        .split_once('=')
        .ok_or_else(|| Invalid::new(InvalidReason::Format, field, format!("{filter:?} is not key=value")))?;
    let labels = Labels([(key.to_owned(), value.to_owned())].into());
    check_labels(field, &labels).map_err(|invalid| Invalid { field: field.to_owned(), ..invalid })?;
    Ok((key.to_owned(), value.to_owned()))
}

/// Kubernetes label rules: an optional DNS-subdomain prefix and a name of at most 63 characters; values of at
/// most 63 characters from the same alphabet.
pub(super) fn check_labels(field: &str, labels: &Labels) -> Check {
    if labels.0.len() > MAX_LABELS {
        return Err(Invalid::new(InvalidReason::OutOfRange, field, format!("at most {MAX_LABELS} labels are allowed")));
    }
    for (key, value) in &labels.0 {
        let (prefix, name) = match key.split_once('/') {
            Some((prefix, name)) => (Some(prefix), name),
            None => (None, key.as_str()),
        };
        let key_field = format!("{field}.{key}");
        if let Some(prefix) = prefix {
            let valid_prefix = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|part| check_dns_label(&key_field, part, 63).is_ok());
            if !valid_prefix {
                return Err(Invalid::new(InvalidReason::Format, key_field, "the key prefix must be a DNS subdomain"));
            }
        }
        if name.is_empty() || !is_label_value(name) {
            return Err(Invalid::new(
                InvalidReason::Format,
                key_field,
                "the key name must be 1 to 63 characters of letters, digits, '-', '_' or '.', starting and ending \
                 with a letter or digit",
            ));
        }
        if !value.is_empty() && !is_label_value(value) {
            return Err(Invalid::new(
                InvalidReason::Format,
                key_field,
                "the value must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending \
                 with a letter or digit",
            ));
        }
    }
    Ok(())
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(byte))
}

/// Checks a string id argument and names the field when it is not a UUID.
pub fn parse_id(field: &str, value: &str) -> Result<uuid::Uuid, Invalid> {
    uuid::Uuid::parse_str(value)
        .map_err(|_| Invalid::new(InvalidReason::Format, field, format!("{value:?} is not a UUID")))
}

/// A runtime id as a request names it in `field`.
pub fn parse_runtime_id(field: &str, value: &str) -> Result<RuntimeId, Invalid> {
    parse_id(field, value).map(RuntimeId)
}

/// An operation id as a request names it in `field`.
pub fn parse_operation_id(field: &str, value: &str) -> Result<OperationId, Invalid> {
    parse_id(field, value).map(OperationId)
}
