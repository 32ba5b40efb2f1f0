//! Opaque cursors, bound to the listing (and filter) that issued them.

use super::{InspectError, MAX_ID_BYTES};

const CURSOR_PREFIX: &str = "rpr1.";

/// An opaque cursor: the listing, its filter and the last key, hex-encoded.
pub(super) fn encode_cursor(kind: &str, filter: &str, after: &str) -> String {
    let text = format!("{kind}\n{filter}\n{after}");
    format!("{CURSOR_PREFIX}{}", crate::canonical::hex(text.as_bytes()))
}

/// The last key of a cursor issued by listing `kind` with `filter`.
pub(super) fn decode_cursor(
    cursor: &str,
    kind: &str,
    filter: &str,
) -> Result<String, InspectError> {
    let hex = cursor
        .strip_prefix(CURSOR_PREFIX)
        .ok_or(InspectError::InvalidCursor)?;
    if hex.len() > 4 * MAX_ID_BYTES {
        return Err(InspectError::InvalidCursor);
    }
    let bytes = crate::canonical::from_hex(hex).ok_or(InspectError::InvalidCursor)?;
    let text = String::from_utf8(bytes).map_err(|_| InspectError::InvalidCursor)?;
    let mut parts = text.splitn(3, '\n');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(k), Some(f), Some(after)) if k == kind && f == filter && !after.is_empty() => {
            Ok(after.to_owned())
        }
        _ => Err(InspectError::InvalidCursor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_bound_to_their_listing() {
        let c = encode_cursor("pathways", "held", "pw_000003");
        assert_eq!(decode_cursor(&c, "pathways", "held").unwrap(), "pw_000003");
        assert!(decode_cursor(&c, "pathways", "").is_err());
        assert!(decode_cursor(&c, "unresolved", "held").is_err());
        for bad in ["", "rpr1.", "rpr1.zz", "rpr1.0", "x", "rpr1.ff"] {
            assert!(decode_cursor(bad, "pathways", "").is_err(), "{bad}");
        }
    }
}
