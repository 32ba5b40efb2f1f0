//! `rpr-fault-server`: a stdio MCP server that injects one fault, for testing MCP hosts.
//! See [`rpr::mcp::fault_server`] and `rpr-fault-server --help`. Built only with the
//! `fault-server` feature, which the tests, examples and benchmarks turn on.

fn main() -> std::process::ExitCode {
    let mut args = Vec::new();
    for (i, a) in std::env::args_os().skip(1).enumerate() {
        match a.into_string() {
            Ok(a) => args.push(a),
            Err(a) => {
                eprintln!(
                    "rpr-fault-server: argument {} is not valid UTF-8 ({})",
                    i + 1,
                    a.to_string_lossy()
                );
                return std::process::ExitCode::from(2);
            }
        }
    }
    rpr::mcp::fault_server::run(args)
}
