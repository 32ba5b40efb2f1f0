//! What the fuzz targets share: a small pathway database, built once per process.

pub mod stories;
