//! What the simulate route and the jobs share: the engine their games play on (the stand-ins, or
//! a job's real models, on a copy of the rules with its params), the lab's refusals as API
//! errors, and the policy of a report's page.

use std::collections::BTreeMap;

use serde_json::Value;

use super::ApiError;
use super::error::{ApiResult, Code};
use ruleweave_lab::jobs::Refused;

/// A request the lab refused, answered as the error it is: `invalid_request` for a body of the
/// wrong shape, the engine's own kind for what the pack does not have or take.
pub(super) fn refused(r: Refused) -> ApiError {
    match (r.shape, r.field) {
        (true, _) => ApiError::new(Code::InvalidRequest, r.message(|f| format!("`{f}`"))),
        (false, Some(_)) => ApiError::new(Code::Engine(r.error.kind()), r.message(|f| format!("`{f}`"))),
        (false, None) => (*r.error).into(),
    }
}

/// The policy of a page of charts (a report, a sweep, a tune): it has no script and loads
/// nothing, so it allows its own styles alone.
pub(super) const PAGE_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                                      base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The packs under `root` on their stand-in models, in a store of their own, with `params` set
/// for `pack` (checked as a run's `--param`): where a server's batches and jobs play.
pub(super) async fn standin(
    root: &std::path::Path,
    pack: &str,
    params: &BTreeMap<String, Value>,
) -> ApiResult<ruleweave::Engine> {
    // A copy of the rules even with no params (it loads the pack, the engine's own need not):
    // a copy keeps its stand-in's answers.
    Ok(crate::standin_engine(root).await?.with_params(pack, params.clone())?)
}

/// [`standin`], with `llm` answering the pack's model calls (a job on real models).
pub(super) async fn on_models(
    root: &std::path::Path,
    pack: &str,
    params: &BTreeMap<String, Value>,
    llm: ruleweave::LlmChoice,
) -> ApiResult<ruleweave::Engine> {
    let engine = ruleweave_natives::register(ruleweave::Engine::builder(root)).llm(llm).build();
    Ok(engine.with_params(pack, params.clone())?)
}

/// An input the pack does not take, in words (`invalid_input`, 422).
pub(super) fn unprocessable(message: String) -> ApiError {
    ApiError::new(Code::Engine(ruleweave::ErrorKind::Input), message)
}
