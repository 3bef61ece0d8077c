//! [`WindowedError`]: why a windowed manifest holds no window.

/// Why a windowed manifest (seed 003, schemaVersion 4) holds no window: its header is broken,
/// of another schema version, or says neither its rank nor its window number.
#[derive(Debug, thiserror::Error)]
pub enum WindowedError {
    /// The header could not be read (the JSON error gives line and column).
    #[error("not a valid windowed manifest: {0}")]
    NotJson(serde_json::Error),
    /// No `schemaVersion` field.
    #[error("no `schemaVersion`: not a windowed manifest")]
    NoSchemaVersion,
    /// `schemaVersion` is not an integer (the value as written).
    #[error("`schemaVersion` is {0}, expected an integer")]
    SchemaVersionType(serde_json::Value),
    /// A schema version this build does not read.
    #[error(
        "schemaVersion {found} is not supported (this dumpview reads windowed dumps of schemaVersion {supported})",
        supported = super::SCHEMA_VERSION
    )]
    Version {
        /// The version the manifest gives.
        found: u64,
    },
    /// A header number (`rank`, `windowIndex`) that is not a non-negative 32-bit integer.
    #[error("`{field}` is {value}, expected a non-negative integer")]
    NumberType {
        /// The field.
        field: &'static str,
        /// Its value as written.
        value: serde_json::Value,
    },
    /// Neither the header nor the directories above the manifest give the number.
    #[error("no `{field}` in the manifest and no {dir_pattern} directory above it")]
    NoNumber {
        /// The field.
        field: &'static str,
        /// The directory name that would give it (`rank_<R>`).
        dir_pattern: &'static str,
    },
}
