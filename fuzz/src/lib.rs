//! What the fuzz targets share: a small pathway database, built once per process
//! (`stories`), and a scripted MCP server behind named pipes (`scripted`).

pub mod scripted;
pub mod stories;
