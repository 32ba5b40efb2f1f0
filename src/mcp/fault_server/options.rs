//! The command line of the fault server: the faults it can inject and its options.

use super::Options;
use crate::jsonrpc::codes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    None,
    CrashBeforeRead,
    CrashAfterRead,
    CrashAfterEffect,
    GarbageReply,
    WrongId,
    ReplyTwice,
    NeverReply,
    NotifyMidCall,
    HugeLine,
    ChangeSchema,
    ChangeIdentity,
    IsError,
    RpcError,
    IgnoreSigterm,
    Slow,
    NotifyBeforeInit,
    LoopCursor,
    ChangeReadNotify,
    IgnoreDiscover,
    ExitOnDiscover,
    SlowDiscover,
    ElicitUrl,
    HoldList,
    LogOnGet,
}

/// Which era the server speaks (`--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ServerEra {
    /// `initialize` only; `server/discover` is an unknown method.
    Legacy,
    /// 2026-07-28 only: `server/discover`, the `_meta` envelope on every request,
    /// `initialize` refused with `-32022`.
    Modern,
    /// Both: the first `server/discover` or `initialize` settles the era of the process.
    Dual,
}

impl Fault {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "" | "none" => Self::None,
            "crash-before-read" => Self::CrashBeforeRead,
            "crash-after-read" => Self::CrashAfterRead,
            "crash-after-effect" => Self::CrashAfterEffect,
            "garbage-reply" => Self::GarbageReply,
            "wrong-id" => Self::WrongId,
            "reply-twice" => Self::ReplyTwice,
            "never-reply" => Self::NeverReply,
            "notify-mid-call" => Self::NotifyMidCall,
            "huge-line" => Self::HugeLine,
            "change-schema" => Self::ChangeSchema,
            "change-identity" => Self::ChangeIdentity,
            "is-error" => Self::IsError,
            "rpc-error" => Self::RpcError,
            "ignore-sigterm" => Self::IgnoreSigterm,
            "slow" => Self::Slow,
            "notify-before-init" => Self::NotifyBeforeInit,
            "loop-cursor" => Self::LoopCursor,
            "change-read-notify" => Self::ChangeReadNotify,
            "ignore-discover" => Self::IgnoreDiscover,
            "exit-on-discover" => Self::ExitOnDiscover,
            "slow-discover" => Self::SlowDiscover,
            "elicit-url" => Self::ElicitUrl,
            "hold-list" => Self::HoldList,
            "log-on-get" => Self::LogOnGet,
            _ => return None,
        })
    }
}

pub(super) fn parse_options(
    args: impl IntoIterator<Item = String>,
) -> Result<Option<Options>, String> {
    let mut opts = Options {
        effects: None,
        state: None,
        fault: Fault::None,
        rpc_error_code: codes::INTERNAL_ERROR,
        sleep_ms: 3000,
        huge_bytes: 17 * 1024 * 1024,
        lists_before: 1,
        page_size: None,
        server_name: "rpr-fault-server".into(),
        server_version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: "2025-11-25".into(),
        era: ServerEra::Legacy,
        modern_version: crate::mcp::MODERN_PROTOCOL_VERSION.into(),
        input_required: 0,
        request_log: None,
        instructions: None,
        draft07: false,
        claim_read_only: false,
        pid_file: None,
        cancel_log: None,
        release: None,
        fault_on_get: false,
        logging: false,
        listen: false,
    };
    let mut fault_name = std::env::var("RPR_FAULT").ok();
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<i64>()
                .map_err(|e| format!("bad number {text:?}: {e}"))
        };
        let count = |text: String| {
            text.parse::<usize>()
                .map_err(|e| format!("bad count {text:?}: {e}"))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--effects" => opts.effects = Some(value()?.into()),
            "--state" => opts.state = Some(value()?.into()),
            "--fault" => fault_name = Some(value()?),
            "--rpc-error-code" => opts.rpc_error_code = number(value()?)?,
            "--sleep-ms" => opts.sleep_ms = count(value()?)? as u64,
            "--huge-bytes" => opts.huge_bytes = count(value()?)?,
            "--lists-before" => opts.lists_before = count(value()?)?,
            "--page-size" => opts.page_size = Some(count(value()?)?).filter(|n| *n > 0),
            "--server-name" => opts.server_name = value()?,
            "--server-version" => opts.server_version = value()?,
            "--protocol-version" => opts.protocol_version = value()?,
            "--era" => {
                opts.era = match value()?.as_str() {
                    "legacy" => ServerEra::Legacy,
                    "modern" => ServerEra::Modern,
                    "dual" => ServerEra::Dual,
                    other => {
                        return Err(format!("unknown era {other:?}; use legacy, modern or dual"));
                    }
                }
            }
            "--modern-version" => opts.modern_version = value()?,
            "--input-required" => opts.input_required = count(value()?)?,
            "--request-log" => opts.request_log = Some(value()?.into()),
            "--instructions" => opts.instructions = Some(value()?),
            "--draft07" => opts.draft07 = true,
            "--logging" => opts.logging = true,
            "--listen" => opts.listen = true,
            "--claim-read-only" => opts.claim_read_only = true,
            "--pid-file" => opts.pid_file = Some(value()?.into()),
            "--cancel-log" => opts.cancel_log = Some(value()?.into()),
            "--release" => opts.release = Some(value()?.into()),
            "--fault-on" => {
                opts.fault_on_get = match value()?.as_str() {
                    "put" => false,
                    "get" => true,
                    other => return Err(format!("--fault-on {other:?}: expected put or get")),
                }
            }
            other => return Err(format!("unknown option {other:?}; see --help")),
        }
    }
    if let Some(name) = fault_name {
        opts.fault =
            Fault::parse(&name).ok_or_else(|| format!("unknown fault {name:?}; see --help"))?;
    }
    Ok(Some(opts))
}
