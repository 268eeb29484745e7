//! A turn as a synchronous caller plays it, for the benches that time turns one by one.

/// A turn on this thread (`Session::blocking_turn`), as a synchronous caller plays it.
pub fn turn_here(
    rt: &tokio::runtime::Runtime,
    session: &mut ruleweave::Session,
    input: serde_json::Value,
) -> ruleweave::Result<ruleweave::TurnResult> {
    let _runtime = rt.enter();
    session.blocking_turn(input)
}
