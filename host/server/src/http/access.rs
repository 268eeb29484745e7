//! Who may touch what. With an operator token configured, every request of the API carries a key
//! (`Authorization: Bearer ...`): the operator's token opens everything; a key the operator issued
//! (`POST /v1/keys`) makes sessions of its packs and reaches the sessions it made; a session's key
//! (answered when the session is made) reaches that session and the forks made with it; a
//! player's key (answered by a lobby) answers for that player. Each route's facts say which kinds
//! of key it takes (`routes.rs`), which docs/security.md shows as one table; a session that is not the key's
//! answers exactly as one that does not exist. Keys live in the store (as hashes), so every
//! replica honours the same ones; without a token nothing is asked, as on a developer's machine.

use std::sync::Arc;

use crate::tables::{Grant, IssuedKey, Keys};
use axum::RequestExt as _;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ruleweave::{Error, ErrorKind};

use super::error::{ApiResult, Code};
use super::routes::{self, Route, Who};
use super::{ApiError, Shared};

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Access {
    /// No token is configured: everything is open (the local default).
    Open,
    /// The operator's token.
    Operator,
    /// A key the operator issued.
    Issued(IssuedKey),
    /// A session's key; `debug` when its session was made for debugging by a key that may.
    Session { session: String, debug: bool },
    /// A player's key in a session's lobby.
    Player { session: String, player: String },
}

/// The hash of the key a request carried (none for the operator's token, or no token): what an
/// open event stream checks again, so a revoked key's streams end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Presented(pub Option<String>);

impl Presented {
    /// Whether the key still opens something (the operator's token always does). A store that
    /// cannot say is not taken for a refusal: the stream goes on and asks again.
    pub(crate) async fn still_valid(&self, s: &Shared) -> bool {
        let Some(hash) = &self.0 else { return true };
        match s.keys().await {
            Ok(keys) => !matches!(keys.find_key(hash).await, Ok(None)),
            Err(_) => true,
        }
    }
}

impl Access {
    fn who(&self) -> Option<Who> {
        match self {
            Access::Open => None,
            Access::Operator => Some(Who::Operator),
            Access::Issued(_) => Some(Who::Issued),
            Access::Session { .. } => Some(Who::Session),
            Access::Player { .. } => Some(Who::Player),
        }
    }

    /// Who the request's writes are recorded as made by (a checkpoint's `by`): `operator`, an
    /// issued key's id, `session:ID` for a session's key (the session whose key it is),
    /// `player:NAME`; nobody without a token.
    pub(crate) fn by(&self) -> Option<String> {
        match self {
            Access::Open => None,
            Access::Operator => Some("operator".to_owned()),
            Access::Issued(key) => Some(key.id.clone()),
            Access::Session { session, .. } => Some(format!("session:{session}")),
            Access::Player { player, .. } => Some(format!("player:{player}")),
        }
    }

    /// What this request may do beyond playing: `debug` for the operator (and with no token),
    /// an issued key given it, and a session's key whose session was made for debugging.
    pub(crate) fn rights(&self) -> Vec<&'static str> {
        let (debug, spend) = match self {
            Access::Open | Access::Operator => (true, true),
            Access::Issued(k) => (k.rights.iter().any(|r| r == DEBUG), k.rights.iter().any(|r| r == SPEND)),
            Access::Session { debug, .. } => (*debug, false),
            Access::Player { .. } => (false, false),
        };
        [(debug, DEBUG), (spend, SPEND)].into_iter().filter(|(has, _)| *has).map(|(_, r)| r).collect()
    }

    /// Refuses `what` (editing state, a breakpoint, resuming, a fork with a patch, a replay)
    /// unless this request may debug: a player must not edit the game they play (403).
    pub(crate) fn may_debug(&self, what: &str) -> ApiResult<()> {
        if self.rights().contains(&DEBUG) {
            return Ok(());
        }
        Err(ApiError::new(
            Code::Forbidden,
            format!(
                "{what} is debugging: it needs the operator's token, a key with the `debug` right, or a session made \
                 with \"debug\": true by one (this key plays)"
            ),
        ))
    }

    /// Refuses a new session (or fork) when the issued key it would go back to made as many as
    /// one key may: `sessions_per_key_per_hour` in the last hour, or `sessions_per_key` kept
    /// (429, naming the limit). The operator's token, and no token, have no such limit.
    pub(crate) async fn within_quota(&self, s: &Shared) -> ApiResult<()> {
        let issuer = match self {
            Access::Issued(k) => Some(k.id.clone()),
            Access::Session { session, .. } => s.keys().await?.lineage(session).await?.and_then(|l| l.issuer),
            Access::Open | Access::Operator | Access::Player { .. } => None,
        };
        let Some(issuer) = issuer else { return Ok(()) };
        let hour_ago = super::sse::unix_ms() - 3_600_000;
        let (recent, kept) = s.keys().await?.sessions_of(&issuer, hour_ago).await?;
        let (per_hour, most) = (s.settings.sessions_per_key_per_hour, s.settings.sessions_per_key);
        let over = if recent >= per_hour {
            format!(
                "this key made {recent} sessions (forks included) in the last hour, the most one key may \
                 (`[server] sessions_per_key_per_hour` = {per_hour}): try again later"
            )
        } else if kept >= most {
            format!(
                "this key keeps {kept} sessions, the most one key may (`[server] sessions_per_key` = {most}): \
                 delete some first"
            )
        } else {
            return Ok(());
        };
        Err(ApiError::new(Code::QuotaExceeded, over))
    }

    /// Whether everything is open to this request (no token, or the operator's).
    pub(crate) fn is_all(&self) -> bool {
        matches!(self, Access::Open | Access::Operator)
    }

    /// What the store records as the maker of a session this request makes (a fork, a new
    /// session), so the key reaches it too; `None` for the operator.
    pub(crate) fn owner(&self) -> Option<String> {
        match self {
            Access::Issued(k) => Some(format!("key:{}", k.id)),
            Access::Session { session, .. } => Some(format!("session:{session}")),
            Access::Open | Access::Operator | Access::Player { .. } => None,
        }
    }

    /// The packs this request sees (`GET /v1/packs`, reload events): every one for the operator
    /// and an issued key without a limit (`None`), an issued key's own, a session's or player's
    /// key its session's.
    pub(crate) async fn packs_shown(&self, s: &Shared) -> ApiResult<Option<Vec<String>>> {
        Ok(match self {
            Access::Open | Access::Operator | Access::Issued(IssuedKey { packs: None, .. }) => None,
            Access::Issued(IssuedKey { packs: Some(packs), .. }) => Some(packs.clone()),
            Access::Session { session: id, .. } | Access::Player { session: id, .. } => {
                Some(vec![s.engine.info(id).await?.pack])
            }
        })
    }

    /// Whether this request may play `pack`: an issued key only its packs.
    pub(crate) fn may_play(&self, pack: &str) -> ApiResult<()> {
        match self {
            Access::Issued(IssuedKey { packs: Some(packs), label, .. }) if !packs.iter().any(|p| p == pack) => {
                Err(ApiError::new(
                    Code::Forbidden,
                    format!("the key `{label}` may play {}, not `{pack}`", packs.join(", ")),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether this request reaches session `id`: a session that is not its key's answers as one
    /// that does not exist. One lookup of where the session comes from (its `Lineage`, kept
    /// with it), whether it exists or not, whatever became of its parents: an issued key reaches
    /// the sessions it goes back to, a session's key its own and the forks made down its line.
    pub(crate) async fn reach(&self, s: &Shared, id: &str) -> ApiResult<()> {
        let reaches = match self {
            Access::Open | Access::Operator => true,
            Access::Player { session, .. } => session == id,
            Access::Session { session: own, .. } if own == id => true,
            Access::Session { .. } | Access::Issued(_) => self.reaches(s.keys().await?, id).await?,
        };
        if reaches { Ok(()) } else { Err(no_session(id)) }
    }

    /// Whether a session or issued key reaches `id` by where it comes from: one lookup, the same
    /// for a session that is someone else's and for one that does not exist.
    async fn reaches(&self, keys: &dyn Keys, id: &str) -> ruleweave::Result<bool> {
        let lineage = keys.lineage(id).await?;
        Ok(match self {
            Access::Session { session: own, .. } => lineage.is_some_and(|l| l.sessions.contains(own)),
            Access::Issued(k) => lineage.is_some_and(|l| l.issuer.as_deref() == Some(&k.id)),
            Access::Open | Access::Operator | Access::Player { .. } => false,
        })
    }
}

/// The right to debug: edit state, hold and resume turns, fork with a patch, replay.
pub(crate) const DEBUG: &str = "debug";

/// The right to start jobs on real models, which cost money.
pub(crate) const SPEND: &str = "spend";

/// What a session that does not exist answers: the engine's own error.
pub(crate) fn no_session(id: &str) -> ApiError {
    Error::new(ErrorKind::NotFound, format!("there is no session {id}")).into()
}

/// A new secret: 32 random bytes as hex after a prefix naming its kind (`rw_session_`), so a
/// leaked one is recognised for what it is.
pub(crate) fn secret(kind: &str) -> ruleweave::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("no randomness for a key: {e}")))?;
    Ok(format!("rw_{kind}_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// Makes a key for `grant` and keeps its hash in `keys`; the secret, to answer once.
pub(crate) async fn issue(keys: &dyn Keys, kind: &str, grant: &Grant) -> ruleweave::Result<String> {
    let secret = secret(kind)?;
    keys.add_key(&crate::tables::key_hash(&secret), grant).await?;
    Ok(secret)
}

/// What the guard reads of a request, taken before it awaits anything (a request's body is not
/// shared across threads).
struct Asked {
    method: Method,
    /// The route as the router matched it (`/v1/sessions/{id}`), and who may call it.
    route: Option<String>,
    table: Option<Arc<[Route]>>,
    /// The path's parameters by name, percent-decoded (none when one is no UTF-8: the handler
    /// refuses the path).
    params: Vec<(String, String)>,
    /// The bearer credential, if the request carries one.
    bearer: String,
}

impl Asked {
    async fn of(req: &mut Request) -> Self {
        let params = match req.extract_parts::<RawPathParams>().await {
            Ok(params) => params.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
            Err(_) => Vec::new(),
        };
        Asked {
            method: req.method().clone(),
            route: req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()),
            table: req.extensions().get::<Arc<[Route]>>().cloned(),
            params,
            bearer: bearer(req),
        }
    }
}

/// Who a request is, by its key: 401 when it carries none the server knows.
async fn access_of(s: &Shared, token: &str, given: &str) -> ApiResult<Access> {
    if super::same(given.as_bytes(), token.as_bytes()) {
        return Ok(Access::Operator);
    }
    if given.is_empty() {
        return Err(ApiError::unauthorized());
    }
    let found = s.keys().await?.find_key(&crate::tables::key_hash(given)).await.map_err(|e| {
        // Who asked has no key yet: the store's words are the operator's, in the log.
        tracing::error!("cannot look a key up: {e}");
        ApiError::new(Code::Engine(ErrorKind::Store), "the server cannot check keys now: try again later")
    })?;
    match found {
        Some(Grant::Issued(k)) => Ok(Access::Issued(k)),
        Some(Grant::Session { session, debug }) => Ok(Access::Session { session, debug }),
        Some(Grant::Player { session, player }) => Ok(Access::Player { session, player }),
        None => Err(ApiError::unauthorized()),
    }
}

/// Who a request with a body is, from its headers alone, before its body is read: the guard
/// takes it from the request's extensions rather than asking the store again.
#[derive(Debug, Clone)]
pub(crate) struct Identified(Access);

/// The bearer credential `req` carries (empty when none).
pub(crate) fn bearer(req: &Request) -> String {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, t)| t.trim())
        .to_owned()
}

/// Who the key `bearer` is (with `token` configured): 401 when it is none the server knows.
pub(crate) async fn identify(s: &Shared, token: &str, bearer: &str) -> ApiResult<Identified> {
    access_of(s, token, bearer).await.map(Identified)
}

/// The guard of every route of the API: who the request is (kept in its extensions for the
/// handlers), whether its kind of key may call the route, and whether the session or pack in the
/// path is one it reaches.
pub(crate) async fn guard(State(s): State<Shared>, mut req: Request, next: Next) -> Response {
    // Without a token nothing is asked: the request is read no further.
    if s.settings.token.is_none() {
        req.extensions_mut().insert(Access::Open);
        req.extensions_mut().insert(Presented(None));
        return next.run(req).await;
    }
    let asked = Asked::of(&mut req).await;
    let early = req.extensions_mut().remove::<Identified>().map(|i| i.0);
    let presented = (s.settings.token.as_deref().is_some_and(|t| !super::same(asked.bearer.as_bytes(), t.as_bytes()))
        && !asked.bearer.is_empty())
    .then(|| crate::tables::key_hash(&asked.bearer));
    match admitted(&s, asked, early).await {
        Ok(access) => {
            req.extensions_mut().insert(access);
            req.extensions_mut().insert(Presented(presented));
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

async fn admitted(s: &Shared, asked: Asked, early: Option<Access>) -> ApiResult<Access> {
    let Some(token) = &s.settings.token else { return Ok(Access::Open) };
    let access = match early {
        Some(access) => access,
        None => access_of(s, token, &asked.bearer).await?,
    };
    let Some(who) = access.who().filter(|w| *w != Who::Operator) else { return Ok(access) };
    let Some(route) = asked.route else { return Ok(access) };
    let found = asked.table.as_deref().and_then(|t| routes::find(t, &asked.method, &route));
    if !found.is_some_and(|r| r.facts.who.contains(&who)) {
        return Err(ApiError::new(
            Code::Forbidden,
            format!("a {} may not call {} {route}", who.in_words(), asked.method),
        ));
    }
    let param = |name: &str| asked.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if let Some(id) = param("id")
        && route.starts_with("/v1/sessions/")
    {
        access.reach(s, id).await?;
    }
    if let Some(pack) = param("pack") {
        access.may_play(pack)?;
    }
    Ok(access)
}

impl Who {
    fn in_words(self) -> &'static str {
        match self {
            Who::Operator => "the operator's token",
            Who::Issued => "key the operator issued",
            Who::Session => "session key",
            Who::Player => "player key",
        }
    }
}

/// The table of who may call what, as docs/security.md shows it.
#[cfg(test)]
fn table_in_markdown() -> String {
    let mut out = String::from("| route | operator | issued key | session key | player key | what it reaches |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- |\n");
    for r in super::routes().table.iter().filter(|r| r.guarded) {
        let mark = |w: Who| if w == Who::Operator || r.facts.who.contains(&w) { "yes" } else { "—" };
        out.push_str(&format!(
            "| `{} {}` | {} | {} | {} | {} | {} |\n",
            r.method,
            r.path,
            mark(Who::Operator),
            mark(Who::Issued),
            mark(Who::Session),
            mark(Who::Player),
            r.facts.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys beside a memory store, counting the lookups of where sessions come from.
    struct Counted(std::sync::Arc<dyn Keys>, std::sync::atomic::AtomicUsize);

    impl Keys for Counted {
        fn add_key<'a>(
            &'a self,
            hash: &'a str,
            grant: &'a Grant,
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<()>> {
            self.0.add_key(hash, grant)
        }
        fn find_key<'a>(&'a self, hash: &'a str) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<Option<Grant>>> {
            self.0.find_key(hash)
        }
        fn issued_keys(&self) -> ruleweave::llm::BoxFuture<'_, ruleweave::Result<Vec<IssuedKey>>> {
            self.0.issued_keys()
        }
        fn revoke_key<'a>(&'a self, id: &'a str) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<bool>> {
            self.0.revoke_key(id)
        }
        fn drop_player_key<'a>(
            &'a self,
            s: &'a str,
            p: &'a str,
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<()>> {
            self.0.drop_player_key(s, p)
        }
        fn keep_player_keys<'a>(
            &'a self,
            s: &'a str,
            p: &'a [String],
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<()>> {
            self.0.keep_player_keys(s, p)
        }
        fn set_owner<'a>(&'a self, s: &'a str, o: &'a str) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<()>> {
            self.0.set_owner(s, o)
        }
        fn owner<'a>(&'a self, s: &'a str) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<Option<String>>> {
            self.0.owner(s)
        }
        fn lineage<'a>(
            &'a self,
            s: &'a str,
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<Option<crate::tables::Lineage>>> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.lineage(s)
        }
        fn sessions_of<'a>(
            &'a self,
            issuer: &'a str,
            since: i64,
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<(u64, u64)>> {
            self.0.sessions_of(issuer, since)
        }
        fn issued_sessions<'a>(
            &'a self,
            issuer: &'a str,
        ) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<Vec<String>>> {
            self.0.issued_sessions(issuer)
        }
        fn owned<'a>(&'a self, o: &'a str) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<Vec<String>>> {
            self.0.owned(o)
        }
        fn hold_spend<'a>(&'a self, id: &'a str, usd: f64) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<bool>> {
            self.0.hold_spend(id, usd)
        }
        fn release_spend<'a>(&'a self, id: &'a str, usd: f64) -> ruleweave::llm::BoxFuture<'a, ruleweave::Result<()>> {
            self.0.release_spend(id, usd)
        }
    }

    /// "Not yours" and "absent" cost the same store lookups, so neither the answer nor the work
    /// behind it tells whether a session exists; a deep fork is one lookup too.
    #[tokio::test]
    async fn a_session_not_yours_costs_what_an_absent_one_does() {
        use ruleweave::Store;
        let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(ruleweave::store::MemoryStore::new());
        for id in ["mine", "fork", "deep", "theirs"] {
            store.create(&crate::tables::tests::session(id), &crate::tables::tests::start()).await.unwrap();
        }
        let tables = crate::tables::Tables::open(&store).await.unwrap().expect("a memory store's tables");
        let keys = Counted(tables.keys, Default::default());
        keys.set_owner("mine", "key:k").await.unwrap();
        keys.set_owner("fork", "session:mine").await.unwrap();
        keys.set_owner("deep", "session:fork").await.unwrap();
        keys.set_owner("theirs", "key:other").await.unwrap();
        let lookups = |access: &Access, id: &'static str| {
            let (access, keys) = (access.clone(), &keys);
            async move {
                let before = keys.1.load(std::sync::atomic::Ordering::Relaxed);
                let reached = access.reaches(keys, id).await.unwrap();
                (reached, keys.1.load(std::sync::atomic::Ordering::Relaxed) - before)
            }
        };
        let issued = Access::Issued(IssuedKey {
            id: "k".into(),
            label: "k".into(),
            packs: None,
            rights: Vec::new(),
            expires_at: None,
            created_at: 0,
            spend_limit_usd: None,
            spent_usd: 0.0,
        });
        let session = Access::Session { session: "mine".into(), debug: false };
        for access in [&issued, &session] {
            assert_eq!(lookups(access, "deep").await, (true, 1), "{access:?} reaches down its line in one lookup");
            assert_eq!(lookups(access, "theirs").await, (false, 1), "{access:?}: not yours");
            assert_eq!(lookups(access, "absent").await, (false, 1), "{access:?}: absent, the same");
        }
    }

    #[test]
    fn every_guarded_route_names_its_keys_and_the_operator_calls_each() {
        let routes = super::super::routes();
        for r in &routes.table {
            assert_eq!(r.guarded, !r.facts.who.is_empty(), "{} {}: guarded with keys, open without", r.method, r.path);
            assert!(!r.guarded || r.facts.who.contains(&Who::Operator), "the operator calls {} {}", r.method, r.path);
            let same = routes.table.iter().filter(|o| o.method == r.method && o.path == r.path).count();
            assert_eq!(same, 1, "{} {} is declared once", r.method, r.path);
        }
    }

    #[test]
    fn the_documented_table_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/security.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = ("<!-- keys (generated) -->\n", "<!-- end of keys -->");
        let from = doc.find(start).expect("docs/security.md marks where the table of keys goes") + start.len();
        let to = doc.find(end).expect("and where it ends");
        let wanted = format!("{}{}{}", &doc[..from], table_in_markdown(), &doc[to..]);
        if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, &wanted).unwrap();
        }
        assert!(
            doc == wanted,
            "docs/security.md's table of keys is not the server's: `UPDATE_DOCS=1 cargo test -p ruleweave-server access` rewrites it"
        );
    }

    #[test]
    fn secrets_are_long_random_and_named() {
        let (a, b) = (secret("session").unwrap(), secret("session").unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("rw_session_") && a.len() == "rw_session_".len() + 64, "{a}");
    }
}
