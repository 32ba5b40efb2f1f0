//! JSON-RPC message parsing: any JSON value is either a message or a specific error, never
//! a panic; a message survives its own round trip (`to_value` then `from_value`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpr::jsonrpc::Message;

fuzz_target!(|input: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) else {
        return;
    };
    if let Ok(message) = Message::from_value(value) {
        let again = Message::from_value(message.to_value()).expect("a message read back");
        assert_eq!(again.to_value(), message.to_value());
    }
});
