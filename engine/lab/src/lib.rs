//! ruleweave's lab: what a designer runs on a pack's rules between playtests, outside any one
//! session.
//!
//! - [`simulate`]: many games by a pack's scripted (or model) players, each outcome's share with
//!   a 95% interval, turns, tracked numbers and cost ([`simulate::run`]); the same games on two
//!   copies of the rules compared; a sweep of one or two of the pack's numbers
//!   ([`simulate::tune::Sweep`]); the search for the value that gives a target share ([`simulate::tune`]).
//! - [`calibrate`]: how far a profile's stand-in is from the model it stands in for, on what the
//!   model really answered (recorded, or in live games).
//! - [`replay`]: a recorded session or a pack's test case played again on the rules as they are
//!   now, turn by turn, with what changed.
//! - [`cases`]: a pack's test cases as their files write them (`tests/<pack>/*.yaml`), each a
//!   recording to replay.
//! - [`jobs`]: a tune or a sweep as it is asked for in words, parsed once for every face, and the
//!   typed run a server keeps as a job.
//! - [`spend`]: what a run on real models may spend, and the providers it pays through (a budget
//!   never exceeded, a provider's calls in flight capped); [`cache`] the answers they gave, so
//!   the same games again make no new calls.
//!
//! The lab drives an [`Engine`](ruleweave::Engine) from outside its turns, as any embedding
//! program does; the engine knows nothing of it.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod cache;
pub mod calibrate;
pub mod cases;
pub mod jobs;
pub mod outcomes;
pub mod replay;
pub mod simulate;
pub mod spend;
