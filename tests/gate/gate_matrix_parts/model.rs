//! The matrix's axes (clients, servers, cells), a cell's verdict, and the table.

use std::fmt::Write as _;

/// The MCP clients in front of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Client {
    /// The Python SDK's `Client` in its default mode (it probes `server/discover`).
    PyAuto,
    /// The Python SDK's `Client` pinned to 2026-07-28.
    Py2026,
    /// The Python SDK's `ClientSession` (`initialize`).
    PySession,
    /// The TypeScript SDK v2 client, default mode.
    Ts,
    /// The Rust SDK client, rmcp 3.11.
    Rmcp,
    /// inspector-cli 1.0.3: one call per process, no elicitation.
    Inspector,
}

impl Client {
    pub(crate) const ALL: [Self; 6] = [
        Self::PyAuto,
        Self::Py2026,
        Self::PySession,
        Self::Ts,
        Self::Rmcp,
        Self::Inspector,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::PyAuto => "Python `Client` auto",
            Self::Py2026 => "Python `Client` 2026-07-28",
            Self::PySession => "Python `ClientSession`",
            Self::Ts => "TypeScript SDK client 2.4.0",
            Self::Rmcp => "rmcp 3.11 client",
            Self::Inspector => "inspector-cli 1.0.3",
        }
    }

    /// A short name for files and paths.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Self::PyAuto => "py-auto",
            Self::Py2026 => "py-2026",
            Self::PySession => "py-session",
            Self::Ts => "ts",
            Self::Rmcp => "rmcp",
            Self::Inspector => "inspector",
        }
    }

    /// The protocol version the gate answers this client at (`None`: the client does
    /// not report it).
    pub(crate) fn era(self) -> Option<&'static str> {
        match self {
            Self::PyAuto | Self::Py2026 => Some("2026-07-28"),
            Self::PySession | Self::Ts | Self::Rmcp => Some("2025-11-25"),
            Self::Inspector => None,
        }
    }

    /// Whether the client answers the Human Gate itself (a form, or a multi round-trip
    /// request); inspector-cli cannot, so its calls are approved with `rpr approve`.
    pub(crate) fn answers_forms(self) -> bool {
        self != Self::Inspector
    }
}

/// The MCP servers behind the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// `@modelcontextprotocol/server-filesystem` 2026.8.31.
    Filesystem,
    /// `@modelcontextprotocol/server-everything` 2026.8.31.
    Everything,
    /// `rpr-fault-server` (2025-11-25).
    Fault,
    /// `tests/peers/kv_server.py`, the Python SDK's `MCPServer` (dual-era).
    PythonSdk,
    /// `rpr-fault-server --protocol-version 2025-06-18`.
    Old,
}

impl Server {
    pub(crate) const ALL: [Self; 5] = [
        Self::Filesystem,
        Self::Everything,
        Self::Fault,
        Self::PythonSdk,
        Self::Old,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Filesystem => "server-filesystem",
            Self::Everything => "server-everything",
            Self::Fault => "fault server",
            Self::PythonSdk => "Python SDK `MCPServer`",
            Self::Old => "server at 2025-06-18",
        }
    }

    /// The protocol version the gate must have spoken to this server (in its pins).
    pub(crate) fn era(self) -> &'static str {
        match self {
            Self::Filesystem | Self::Everything | Self::Fault => "2025-11-25",
            Self::PythonSdk => "2026-07-28",
            Self::Old => "2025-06-18",
        }
    }
}

/// What each pair of client and server must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cell {
    Connect,
    List,
    Read,
    Approved,
    Declined,
    Unknown,
}

impl Cell {
    pub(crate) const ALL: [Self; 6] = [
        Self::Connect,
        Self::List,
        Self::Read,
        Self::Approved,
        Self::Declined,
        Self::Unknown,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::List => "list",
            Self::Read => "read",
            Self::Approved => "gated write approved",
            Self::Declined => "gated write declined",
            Self::Unknown => "unknown never re-sent",
        }
    }
}

/// A cell's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Fail(String),
    /// Cannot apply to this server, and why.
    NotApplicable(&'static str),
}

/// A cell expected to fail, and why (`EXPECTED_FAILURES` in `tests/gate/gate_matrix.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expected {
    /// What the table shows for it while it fails.
    pub(crate) mark: &'static str,
    /// Why it fails.
    pub(crate) reason: &'static str,
}

/// A judged cell.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    pub(crate) client: Client,
    pub(crate) server: Server,
    pub(crate) cell: Cell,
    pub(crate) verdict: Verdict,
    /// Listed as expected to fail.
    pub(crate) expected: Option<Expected>,
}

impl Judged {
    /// Where the cell stands in the table: client, server, cell.
    pub(crate) fn order(&self) -> (usize, usize, usize) {
        let at = |found: Option<usize>| found.unwrap_or(usize::MAX);
        (
            at(Client::ALL.iter().position(|c| *c == self.client)),
            at(Server::ALL.iter().position(|s| *s == self.server)),
            at(Cell::ALL.iter().position(|c| *c == self.cell)),
        )
    }

    fn at(&self) -> String {
        format!(
            "{} × {} × {}",
            self.client.label(),
            self.server.label(),
            self.cell.label()
        )
    }

    /// What the test fails for, if anything: a failing cell that is not listed, or a
    /// listed one that does not fail.
    pub(crate) fn problem(&self) -> Option<String> {
        match (&self.verdict, self.expected) {
            (Verdict::Fail(why), None) => Some(format!("{}: {why}", self.at())),
            (Verdict::Pass | Verdict::NotApplicable(_), Some(_)) => Some(format!(
                "{}: listed in EXPECTED_FAILURES but it does not fail; delete it from the list",
                self.at()
            )),
            _ => None,
        }
    }

    fn mark(&self) -> String {
        match (&self.verdict, self.expected) {
            (Verdict::Pass, None) => "pass".into(),
            (Verdict::Pass, Some(_)) => "**PASSES BUT LISTED**".into(),
            (Verdict::Fail(_), Some(expected)) => expected.mark.into(),
            (Verdict::Fail(_), None) => "**FAIL**".into(),
            (Verdict::NotApplicable(_), _) => "n/a".into(),
        }
    }

    /// A line below the table for a cell that does not pass (none for a cell that only
    /// failed because its session did not connect: its connect cell says why).
    fn note(&self) -> Option<String> {
        let short = |why: &str| {
            let mut cut: String = why.chars().take(300).collect();
            if cut.len() < why.len() {
                cut.push_str(" …");
            }
            cut
        };
        match &self.verdict {
            Verdict::Pass => None,
            Verdict::NotApplicable(why) => Some(format!(
                "- n/a, {} × {}: {why}",
                self.server.label(),
                self.cell.label()
            )),
            Verdict::Fail(why) if why.starts_with(NO_SESSION) => None,
            Verdict::Fail(why) => Some(format!("- {}: {}", self.at(), short(why))),
        }
    }
}

/// How a cell whose session never connected fails.
pub(crate) const NO_SESSION: &str = "no session";

/// The markdown table (rows: client and cell; columns: servers), then every cell that
/// does not pass, with its reason.
pub(crate) fn table(judged: &[Judged]) -> String {
    let mut out = String::from("| client | cell |");
    for server in Server::ALL {
        let _ = write!(out, " {} |", server.label());
    }
    out.push_str("\n|---|---|");
    out.push_str(&"---|".repeat(Server::ALL.len()));
    out.push('\n');
    for client in Client::ALL {
        for cell in Cell::ALL {
            let _ = write!(out, "| {} | {} |", client.label(), cell.label());
            for server in Server::ALL {
                let mark = judged
                    .iter()
                    .find(|j| j.client == client && j.server == server && j.cell == cell)
                    .map_or_else(|| "not run".into(), Judged::mark);
                let _ = write!(out, " {mark} |");
            }
            out.push('\n');
        }
    }
    let mut notes: Vec<String> = Vec::new();
    for note in judged.iter().filter_map(Judged::note) {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    for j in judged {
        if let (Verdict::Fail(_), Some(expected)) = (&j.verdict, j.expected) {
            let legend = format!("- {}: {}", expected.mark, expected.reason);
            if !notes.contains(&legend) {
                notes.push(legend);
            }
        }
    }
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    out
}
