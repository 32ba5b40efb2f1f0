// Invariant: a stage value cannot be built outside rpr: its fields are private.
use rpr::executor::Binding;
use rpr::stage::Bound;
use rpr::State;

fn misuse(binding: Binding) -> Bound {
    Bound { binding, from: State::Approved, previous_attempt: None, _private: () }
}

fn main() {}
