//! The host functions' model and search calls: a script waits on the turn's runtime for them,
//! on a thread that may block.

use rhai::{Array, Dynamic, EvalAltResult, Map, NativeCallContext};

use super::{HostShared, with_turn};
use crate::llm::Message;
use crate::script::{may_block, pause_deadline};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

pub(super) fn ask(
    ctx: &NativeCallContext<'_>,
    shared: &HostShared,
    profile: &str,
    messages: Vec<Message>,
) -> RhaiResult<String> {
    ask_with(ctx, shared, profile, messages, &Map::new())
}

/// [`ask`] with some of the profile's settings replaced for this call: `model`, `provider`,
/// `temperature`, `max_tokens`, `json`.
pub(super) fn ask_with(
    ctx: &NativeCallContext<'_>,
    shared: &HostShared,
    profile: &str,
    messages: Vec<Message>,
    overrides: &Map,
) -> RhaiResult<String> {
    with_turn(ctx, |tag| {
        if !may_block() {
            return Err(format!(
                "{}() can only be called by name from a pack script (not through a function pointer, \
                 and not from a stand-in model)",
                ctx.fn_name()
            )
            .into());
        }
        let p = shared.profiles.get(profile).ok_or_else(|| {
            let known: Vec<&str> = shared.profiles.keys().map(String::as_str).collect();
            format!("unknown llm profile `{profile}` (profiles: {})", known.join(", "))
        })?;
        let mut request = p.request(&tag.turn.options, messages).map_err(|e| e.detail().to_owned())?;
        // With a provider named for this call, the model its fallback asks: the profile's own.
        let own_model = overrides
            .get("provider")
            .is_some_and(|v| v.is_string() && !v.to_string().trim().is_empty())
            .then(|| request.default_model.clone().unwrap_or_else(|| request.model.clone()));
        // A model the pack names for this profile is the pack's own choice, which a fallback to
        // another vendor replaces with the profile's model; any other is the player's (a session
        // option), honoured by whichever provider answers.
        let mut players_model = false;
        for (k, v) in overrides {
            match k.as_str() {
                "model" if v.is_string() => {
                    let model = v.to_string();
                    if !model.trim().is_empty() {
                        players_model = !p.names_model(&model);
                        if let Some(allowed) = &tag.turn.allowed_models
                            && !allowed.contains(&model)
                            && !shared.profiles.values().any(|p| p.names_model(&model))
                        {
                            return Err(format!(
                                "model `{model}` is not one this host lets a session choose: a pack's own models, \
                                 and those its operator allows ({}; `[llm] allowed_models` in ruleweave.toml)",
                                if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
                            )
                            .into());
                        }
                        request.model = model;
                        // A model chosen here is the caller's, whichever provider answers.
                        request.default_model = None;
                    }
                }
                // A named provider for this call (a debater's own vendor), asked for `model` when
                // the settings give one; when it is not set up, the default provider answers with
                // the profile's own model (a vendor's model means nothing to another vendor).
                "provider" if v.is_string() => {
                    let name = v.to_string();
                    if !name.trim().is_empty() {
                        request.provider = Some(name);
                    }
                }
                "temperature" => request.temperature = v.as_float().ok().or_else(|| v.as_int().ok().map(|i| i as f64)),
                "max_tokens" => request.max_tokens = v.as_int().ok().and_then(|n| u32::try_from(n).ok()),
                "json" => request.json = v.as_bool().unwrap_or(request.json),
                other => {
                    return Err(format!(
                        "llm_chat: unknown setting `{other}` (model, provider, temperature, max_tokens, json)"
                    )
                    .into());
                }
            }
        }
        if own_model.is_some() && !players_model {
            request.default_model = own_model;
        }
        let rt = tag.turn.runtime.clone().ok_or("model calls need the async runtime the turn runs on")?;
        pause_deadline(|| rt.block_on(tag.turn.ask(&tag.node, request))).map(|r| r.content).map_err(thrown)
    })
}

pub(super) fn web_search(ctx: &NativeCallContext<'_>, query: &str, max: usize) -> RhaiResult<Array> {
    with_turn(ctx, |tag| {
        if !may_block() {
            return Err("search() can only be called by name from a pack script (not through a function pointer, \
                        and not from a stand-in)"
                .into());
        }
        let rt = tag.turn.runtime.clone().ok_or("searches need the async runtime the turn runs on")?;
        let found = pause_deadline(|| rt.block_on(tag.turn.search(&tag.node, query, max))).map_err(thrown)?;
        Ok(found
            .into_iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("title".into(), r.title.into());
                m.insert("url".into(), r.url.into());
                m.insert("content".into(), r.content.into());
                m.insert("score".into(), Dynamic::from_float(r.score));
                Dynamic::from_map(m)
            })
            .collect())
    })
}

/// An engine error thrown into a script: a script may catch it; uncaught, the turn fails with its
/// kind (a spent model budget stays a limit error, not a script error).
pub(super) fn thrown(e: crate::error::Error) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(e), rhai::Position::NONE))
}

pub(super) fn as_messages(list: &Array) -> RhaiResult<Vec<Message>> {
    list.iter()
        .map(|m| {
            let map = m.read_lock::<Map>().ok_or("messages must be maps #{role, content}")?;
            let get = |k: &str| map.get(k).map(|v| v.to_string()).ok_or_else(|| format!("a message has no `{k}`"));
            Ok(Message::new(get("role")?, get("content")?))
        })
        .collect()
}
