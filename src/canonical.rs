//! RFC 8785 canonical JSON (placeholder, being written).
use serde_json::Value;

/// Canonicalization failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// placeholder
    #[error("placeholder")]
    Placeholder,
}

/// Canonical JSON text of `value`.
pub fn to_string(value: &Value) -> Result<String, CanonicalError> {
    Ok(value.to_string())
}

/// sha256 hex of the canonical JSON of `value`.
pub fn sha256_hex(value: &Value) -> Result<String, CanonicalError> {
    use sha2::Digest;
    let s = to_string(value)?;
    Ok(format!("{:x}", sha2::Sha256::digest(s.as_bytes())))
}
