//! Why a field was refused, for a program to branch on: REST `errors[].reason`, GraphQL `extensions.errors[].reason`.

/// Why one field of a request was refused; `as_str()` is what both APIs show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    /// Missing, or empty where a value is needed.
    Required,
    /// Present where it may not be: unknown, fixed after provisioning, absent for the topology, or `null`.
    NotAllowed,
    /// Not of the type or format the field takes.
    Format,
    /// A number, length or count outside its bounds.
    OutOfRange,
    /// Well-formed, but not one of the values the service accepts (a region, zone, version, filter value).
    UnsupportedValue,
    /// Contradicts another field, or the runtime's current configuration.
    Conflict,
    /// Names something that does not exist (a credential).
    NotFound,
}

impl InvalidReason {
    pub const ALL: [InvalidReason; 7] = [
        InvalidReason::Required,
        InvalidReason::NotAllowed,
        InvalidReason::Format,
        InvalidReason::OutOfRange,
        InvalidReason::UnsupportedValue,
        InvalidReason::Conflict,
        InvalidReason::NotFound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::Required => "required",
            InvalidReason::NotAllowed => "not_allowed",
            InvalidReason::Format => "format",
            InvalidReason::OutOfRange => "out_of_range",
            InvalidReason::UnsupportedValue => "unsupported_value",
            InvalidReason::Conflict => "conflict",
            InvalidReason::NotFound => "not_found",
        }
    }

    /// What the reason means, for the catalogue of errors.
    pub fn meaning(self) -> &'static str {
        match self {
            InvalidReason::Required => "The field is missing, or empty where a value is needed.",
            InvalidReason::NotAllowed => {
                "The field may not be sent: unknown, fixed after provisioning, not for this topology, or null."
            }
            InvalidReason::Format => "The value is not of the field's type or format.",
            InvalidReason::OutOfRange => "A number, length or count is outside the field's bounds.",
            InvalidReason::UnsupportedValue => {
                "The value is well-formed but not one the service accepts (a region, zone, version or filter value)."
            }
            InvalidReason::Conflict => "The value contradicts another field, or the runtime's current configuration.",
            InvalidReason::NotFound => "The value names something that does not exist (a credential).",
        }
    }
}

impl serde::Serialize for InvalidReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The OpenAPI document lists the reasons as an enum.
impl utoipa::PartialSchema for InvalidReason {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(InvalidReason::ALL.map(InvalidReason::as_str)))
            .into()
    }
}

impl utoipa::ToSchema for InvalidReason {}
