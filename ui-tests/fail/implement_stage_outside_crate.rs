// Invariant: `Stage` is sealed; no crate but rpr can define a stage.
use rpr::stage::Stage;
use rpr::State;

struct MyBound;

impl Stage for MyBound {
    const STATE: State = State::Approved;
}

fn main() {}
