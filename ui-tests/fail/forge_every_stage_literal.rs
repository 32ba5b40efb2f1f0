// Invariant: no stage of the pathway can be built outside rpr, not even a field-less one.
use rpr::stage::*;

fn main() {
    let _ = Proposed { _private: () };
    let _ = AwaitingApproval { _private: () };
    let _ = HumanGate { _private: () };
    let _ = Held { _private: () };
    let _ = Approved { _private: () };
    let _ = Returned { attempt: String::new(), reply: serde_json::Value::Null, _private: () };
    let _ = Unknown { attempt: String::new(), _private: () };
    let _ = Stopped { attempt: String::new(), _private: () };
    let _ = PartiallyCompleted { attempt: String::new(), _private: () };
    let _ = RepairRequired { attempt: None, _private: () };
    let _ = RepairUnsettled { attempt: String::new(), _private: () };
    let _ = ReadyToResume { previous_attempt: None, _private: () };
    let _ = Completed { _private: () };
    let _ = Denied { _private: () };
    let _ = Aborted { _private: () };
}
