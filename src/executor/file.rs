//! Local-file executor (being written).
