//! [`Keeping`]: an executor that keeps the delivery its server sent, for whoever is waiting
//! for it (the person at the terminal, the gate's client), while the ledger keeps its
//! bounded copy (a large result is stored as its digest).

use serde_json::Value;

use super::{Binding, Carrier, Delivery, Executor, Refusal, Request};

/// Wraps an executor and keeps the last delivery as the server sent it.
#[derive(Debug)]
pub struct Keeping<E> {
    /// The executor that sends.
    pub inner: E,
    /// The last delivery, until taken.
    pub delivery: Option<Delivery>,
}

impl<E: Executor> Keeping<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            delivery: None,
        }
    }

    /// The success reply, if the last call succeeded (taken: a second call gives `None`).
    pub fn reply(&mut self) -> Option<Value> {
        match self.delivery.take() {
            Some(Delivery::Succeeded { reply }) => Some(reply),
            _ => None,
        }
    }
}

impl<E: Executor> Executor for Keeping<E> {
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
    fn still_wanted(&self) -> Result<(), Refusal> {
        self.inner.still_wanted()
    }
    fn carrier(&self) -> Option<Carrier> {
        self.inner.carrier()
    }
}
