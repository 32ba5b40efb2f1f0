// Invariant: a pathway stage cannot be deserialized (no `Deserialize`), so it cannot be forged from JSON.
use rpr::stage::Bound;
use rpr::Pathway;

fn misuse(json: &str) {
    let _bound = serde_json::from_str::<Pathway<Bound>>(json);
}

fn main() {}
