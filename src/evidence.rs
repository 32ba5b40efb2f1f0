//! Evidence redaction and bounds (placeholder, being written).
