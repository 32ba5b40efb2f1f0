//! An executor for the crate's unit tests: it binds any request to a read-only target and
//! answers every call with success, counting the calls it was given.

use serde_json::json;

use super::{Binding, Delivery, Executor, Refusal, Request};

/// Binds every request read-only and answers each call `ok`; `executed` counts the calls.
#[derive(Debug, Default)]
pub(crate) struct AnswersOk {
    pub(crate) executed: usize,
}

impl Executor for AnswersOk {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("test", json!({"tool": request.action}))
            .expect("a small binding")
            .read_only())
    }
    fn prepare(&mut self, _: &Request, _: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _: &Request) -> Delivery {
        self.executed += 1;
        Delivery::Succeeded {
            reply: json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
        }
    }
}
