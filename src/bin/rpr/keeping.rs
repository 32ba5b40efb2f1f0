//! `Keeping`: the MCP executor, keeping the delivery the server sent (for the person at the
//! terminal, or the gate's client) while the ledger keeps its bounded copy.

use rpr::executor::{Binding, Carrier, Delivery, Executor, Refusal, Request};
use rpr::mcp::McpExecutor;
use serde_json::Value;

/// The MCP executor, keeping the delivery as the server sent it, for the person at the
/// terminal or the gate's client (the ledger keeps the bounded copy: a large result is
/// stored as its digest).
pub(crate) struct Keeping {
    pub(crate) inner: McpExecutor,
    pub(crate) delivery: Option<Delivery>,
}

impl Keeping {
    pub(crate) fn new(inner: McpExecutor) -> Self {
        Self {
            inner,
            delivery: None,
        }
    }

    /// The success reply, if the call succeeded.
    pub(crate) fn reply(&mut self) -> Option<Value> {
        match self.delivery.take() {
            Some(Delivery::Succeeded { reply }) => Some(reply),
            _ => None,
        }
    }
}

impl Executor for Keeping {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        let delivery = self.inner.execute(request);
        self.delivery = Some(delivery.clone());
        delivery
    }
    fn release(&mut self) {
        self.inner.release();
    }
    fn carrier(&self) -> Option<Carrier> {
        self.inner.carrier()
    }
}
