//! `rpr-fault-server`: a stdio MCP server that injects one fault, for testing MCP hosts.
//! See [`rpr::mcp::fault_server`] and `rpr-fault-server --help`.

fn main() -> std::process::ExitCode {
    rpr::mcp::fault_server::run(std::env::args().skip(1))
}
