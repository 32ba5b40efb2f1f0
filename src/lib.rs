#![doc = include_str!("../README.md")]

pub mod canonical;
pub mod evidence;
pub mod executor;
pub mod gate;
pub mod inspect;
pub mod ledger;
mod pathway;
pub mod policy;
mod process;
mod runtime;
pub mod shown;
mod state;
pub mod store;

pub use pathway::stage;
pub use pathway::token;
pub use pathway::{
    ALLOW_ALL, Act, ActionClass, Actor, Admission, Admit, AnotherBinding, ApprovalRule, Authority,
    BoundRead, Confirmed, Decision, Definition, NotSent, Outcome, Pathway, PathwayError,
    ReadUnrecorded, Refused, Role, StoredPathway, TRANSITIONS, Unrecorded,
};
pub use runtime::{
    ApprovedBinding, Clock, DEFAULT_BUSY_TIMEOUT, Decided, IdSource, Proposal, RandomIds, Reader,
    Ready, Runtime, RuntimeBuilder, SequentialIds, StepPoint, SystemClock,
};
pub use state::{AttemptStatus, EDGES, State, UnknownName};
pub mod jsonrpc;
pub mod mcp;
