//! Keys: who may reach a session besides the operator, kept in the store so that every process
//! sharing it honours the same ones. A key is kept as the SHA-256 of its secret ([`key_hash`]),
//! never the secret: a session's key and its players' keys go with the session; a key the
//! operator issued stays until it is revoked. The store also keeps which key made each session
//! (its owner), which reaches it too. What each key may do is the server's to say.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ruleweave::llm::BoxFuture;
use ruleweave::store::Store;
use ruleweave::{Error, ErrorKind, Result};
use sha2::{Digest, Sha256};

use super::{Db, now_ms, on_pool, store_error};

/// What a key opens.
#[derive(Debug, Clone, PartialEq)]
pub enum Grant {
    /// A key the operator issued: it makes sessions (of `packs`, or of every pack) and reaches
    /// the sessions it made.
    Issued(IssuedKey),
    /// A session's own key: that session, and the forks made with it.
    Session {
        /// The session.
        session: String,
        /// Whether it may debug its session (edit its state, hold and resume its turns, fork
        /// with a patch, replay): a session made with `"debug": true` by a key that may (a
        /// designer's playtest), or forked with such a session's key.
        debug: bool,
    },
    /// A player's key in a session's lobby: that player's own answers.
    Player {
        /// The session.
        session: String,
        /// The player.
        player: String,
    },
}

/// A key the operator issued, as the store keeps it (no secret).
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedKey {
    /// Its id (how it is revoked).
    pub id: String,
    /// What the operator called it.
    pub label: String,
    /// The packs it may play; `None` for every pack.
    pub packs: Option<Vec<String>>,
    /// What it may do beyond playing: `debug` (edit state, hold and resume turns, fork with a
    /// patch, replay, and make sessions whose keys may).
    pub rights: Vec<String>,
    /// When it stops opening anything, unix milliseconds; never when `None`.
    pub expires_at: Option<i64>,
    /// When it was issued, unix milliseconds.
    pub created_at: i64,
    /// The most its jobs on real models may spend in all (the currency of `[prices]`); no cap
    /// when `None`.
    pub spend_limit_usd: Option<f64>,
    /// What its jobs have spent, and hold while they run.
    pub spent_usd: f64,
}

impl IssuedKey {
    /// Whether it has expired at `now` (unix milliseconds).
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
}

/// Where a session comes from, kept with it when it is made (so a deleted parent cuts nothing):
/// the issued key it goes back to, and the sessions whose keys made it, up its chain of forks
/// (the nearest last). A session's own key reaches the forks whose lineage names it; an issued
/// key, the sessions whose issuer it is; revoking an issued key ends every key of those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lineage {
    /// The issued key it goes back to, if one made it or the session it was forked from.
    pub issuer: Option<String>,
    /// The sessions whose keys made it, oldest first.
    pub sessions: Vec<String>,
}

impl Lineage {
    /// What a session made by `owner` (`key:<id>`, `session:<id>`) comes from, given the owning
    /// session's own lineage.
    pub fn made_by(owner: &str, parent: Option<&Lineage>) -> Lineage {
        match (owner.strip_prefix("key:"), owner.strip_prefix("session:")) {
            (Some(key), _) => Lineage { issuer: Some(key.to_owned()), sessions: Vec::new() },
            (_, Some(session)) => {
                let mut l = parent.cloned().unwrap_or_default();
                l.sessions.push(session.to_owned());
                l
            }
            _ => Lineage::default(),
        }
    }
}

/// The hash a key is kept and found by: SHA-256 of its secret, in hex. Secrets are random and
/// long, so a plain hash keeps a stolen store from opening anything.
pub fn key_hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Where keys are kept (see [`Tables::keys`](super::Tables::keys)).
pub trait Keys: Send + Sync {
    /// Keeps a key by the hash of its secret. A session or player key needs its session to
    /// exist; a player's new key replaces their old one.
    fn add_key<'a>(&'a self, hash: &'a str, grant: &'a Grant) -> BoxFuture<'a, Result<()>>;

    /// What the key whose secret hashes to `hash` opens, if it is one (and not revoked, nor
    /// expired).
    fn find_key<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<Grant>>>;

    /// The keys the operator issued, oldest first.
    fn issued_keys(&self) -> BoxFuture<'_, Result<Vec<IssuedKey>>>;

    /// Revokes the issued key `id`, and with it every key it handed out: the keys of the
    /// sessions it made, of their forks (and theirs), and of their players. None of them opens
    /// anything from now on; whether there was such a key.
    fn revoke_key<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// Drops the key of `player` in `session` (they left the lobby).
    fn drop_player_key<'a>(&'a self, session: &'a str, player: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Drops the player keys of `session` whose player is not one of `players` (a turn took them
    /// off the table).
    fn keep_player_keys<'a>(&'a self, session: &'a str, players: &'a [String]) -> BoxFuture<'a, Result<()>>;

    /// Records that `owner` made `session` (`key:<id>`, `session:<id>`), and with it the
    /// session's [`Lineage`], from its owner's as it stands now.
    fn set_owner<'a>(&'a self, session: &'a str, owner: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Where `session` comes from, when a key made it: one lookup, whatever became of the
    /// sessions it was forked from.
    fn lineage<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Lineage>>>;

    /// The sessions that go back to the issued key `issuer`: how many were made at or after
    /// `since` (unix milliseconds), and how many are kept.
    fn sessions_of<'a>(&'a self, issuer: &'a str, since: i64) -> BoxFuture<'a, Result<(u64, u64)>>;

    /// The sessions that go back to the issued key `issuer` (what it costs the disk is theirs:
    /// see [`SessionIndex::bytes`](ruleweave::store::SessionIndex::bytes)).
    fn issued_sessions<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;

    /// Who made `session`, when a key did.
    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>>;

    /// Holds `usd` of what the issued key `id` may spend, for a job about to run: false (and
    /// nothing held) when its `spend_limit_usd` leaves less. One statement, so two replicas
    /// starting jobs of one key at once cannot both pass its cap.
    fn hold_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<bool>>;

    /// Gives back `usd` of what was held for a job that spent less.
    fn release_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<()>>;

    /// The sessions `owner` made (`key:<id>`, `session:<id>`).
    fn owned<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

fn no_session(session: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("there is no session {session}"))
}

/// Keys kept in this process, beside a memory store: what belonged to a session that is gone
/// opens nothing and reads as nothing, and is forgotten as the tables grow.
pub(super) struct InMemory {
    store: Arc<dyn Store>,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// hash → (session, player).
    sessions: HashMap<String, (String, Option<String>)>,
    /// The session keys (by hash) that may debug their session.
    debug: HashSet<String>,
    /// id → (hash, key).
    issued: HashMap<String, (String, IssuedKey)>,
    /// session → owner.
    owners: HashMap<String, String>,
    /// session → where it comes from (kept with it, not with its parent).
    lineage: HashMap<String, Lineage>,
    /// How many sessions' entries were kept after the last sweep of those that are gone.
    swept: usize,
}

impl InMemory {
    pub(super) fn new(store: Arc<dyn Store>) -> Self {
        InMemory { store, held: Mutex::default() }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn exists(&self, session: &str) -> Result<bool> {
        Ok(self.store.info(session).await?.is_some())
    }

    /// The sessions that go back to the issued key `issuer`.
    fn issued_by(&self, issuer: &str) -> Vec<String> {
        let held = self.held();
        held.lineage.iter().filter(|(_, l)| l.issuer.as_deref() == Some(issuer)).map(|(s, _)| s.clone()).collect()
    }

    /// Forgets what belonged to sessions that are gone, once the entries have doubled since
    /// the last sweep: the store deletes sessions without telling, and a sweep reads each one.
    async fn sweep(&self) -> Result<()> {
        let named: HashSet<String> = {
            let held = self.held();
            let named: HashSet<String> =
                held.sessions.values().map(|(s, _)| s).chain(held.owners.keys()).cloned().collect();
            if named.len() <= 2 * held.swept + 64 {
                return Ok(());
            }
            named
        };
        let mut gone = HashSet::new();
        for s in &named {
            if !self.exists(s).await? {
                gone.insert(s.clone());
            }
        }
        let mut held = self.held();
        held.sessions.retain(|_, (s, _)| !gone.contains(s));
        let Held { sessions, debug, owners, lineage, .. } = &mut *held;
        debug.retain(|h| sessions.contains_key(h));
        owners.retain(|s, _| !gone.contains(s));
        lineage.retain(|s, _| !gone.contains(s));
        held.swept = named.len() - gone.len();
        Ok(())
    }
}

impl Keys for InMemory {
    fn add_key<'a>(&'a self, hash: &'a str, grant: &'a Grant) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match grant {
                Grant::Issued(key) => {
                    self.held().issued.insert(key.id.clone(), (hash.to_owned(), key.clone()));
                    return Ok(());
                }
                Grant::Session { session, .. } | Grant::Player { session, .. } if !self.exists(session).await? => {
                    return Err(no_session(session));
                }
                Grant::Session { session, debug } => {
                    let mut held = self.held();
                    held.sessions.insert(hash.to_owned(), (session.clone(), None));
                    if *debug {
                        held.debug.insert(hash.to_owned());
                    }
                }
                Grant::Player { session, player } => {
                    let mut held = self.held();
                    held.sessions.retain(|_, (s, p)| !(s == session && p.as_deref() == Some(player)));
                    held.sessions.insert(hash.to_owned(), (session.clone(), Some(player.clone())));
                }
            }
            self.sweep().await
        })
    }

    fn find_key<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<Grant>>> {
        Box::pin(async move {
            let found = {
                let held = self.held();
                let now = now_ms();
                match held.sessions.get(hash) {
                    Some((session, None)) => {
                        Some(Grant::Session { session: session.clone(), debug: held.debug.contains(hash) })
                    }
                    Some((session, Some(player))) => {
                        Some(Grant::Player { session: session.clone(), player: player.clone() })
                    }
                    None => held
                        .issued
                        .values()
                        .find(|(h, k)| h == hash && !k.expired(now))
                        .map(|(_, k)| Grant::Issued(k.clone())),
                }
            };
            match &found {
                Some(Grant::Session { session, .. } | Grant::Player { session, .. })
                    if !self.exists(session).await? =>
                {
                    Ok(None)
                }
                _ => Ok(found),
            }
        })
    }

    fn issued_keys(&self) -> BoxFuture<'_, Result<Vec<IssuedKey>>> {
        let mut all: Vec<IssuedKey> = self.held().issued.values().map(|(_, k)| k.clone()).collect();
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        ready(Ok(all))
    }

    fn revoke_key<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let reached: HashSet<String> = self.issued_by(id).into_iter().collect();
        let mut held = self.held();
        let revoked = held.issued.remove(id).is_some();
        // Every session that goes back to the key, whichever of its parents are gone.
        held.sessions.retain(|_, (s, _)| !reached.contains(s));
        ready(Ok(revoked))
    }

    fn keep_player_keys<'a>(&'a self, session: &'a str, players: &'a [String]) -> BoxFuture<'a, Result<()>> {
        self.held().sessions.retain(|_, (s, p)| s != session || p.as_ref().is_none_or(|p| players.contains(p)));
        ready(Ok(()))
    }

    fn drop_player_key<'a>(&'a self, session: &'a str, player: &'a str) -> BoxFuture<'a, Result<()>> {
        self.held().sessions.retain(|_, (s, p)| !(s == session && p.as_deref() == Some(player)));
        ready(Ok(()))
    }

    fn set_owner<'a>(&'a self, session: &'a str, owner: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if !self.exists(session).await? {
                return Err(no_session(session));
            }
            {
                let mut held = self.held();
                let parent = owner.strip_prefix("session:").and_then(|p| held.lineage.get(p));
                let lineage = Lineage::made_by(owner, parent);
                held.lineage.insert(session.to_owned(), lineage);
                held.owners.insert(session.to_owned(), owner.to_owned());
            }
            self.sweep().await
        })
    }

    fn lineage<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Lineage>>> {
        Box::pin(async move {
            let found = self.held().lineage.get(session).cloned();
            Ok(if found.is_some() && self.exists(session).await? { found } else { None })
        })
    }

    fn sessions_of<'a>(&'a self, issuer: &'a str, since: i64) -> BoxFuture<'a, Result<(u64, u64)>> {
        Box::pin(async move {
            let (mut recent, mut kept) = (0, 0);
            for s in self.issued_by(issuer) {
                if let Some(info) = self.store.info(&s).await? {
                    kept += 1;
                    recent += u64::from(info.created_at >= since);
                }
            }
            Ok((recent, kept))
        })
    }

    fn issued_sessions<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        ready(Ok(self.issued_by(issuer)))
    }

    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            let found = self.held().owners.get(session).cloned();
            Ok(if found.is_some() && self.exists(session).await? { found } else { None })
        })
    }

    fn owned<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        let held = self.held();
        ready(Ok(held.owners.iter().filter(|(_, o)| *o == owner).map(|(s, _)| s.clone()).collect()))
    }

    fn hold_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<bool>> {
        let mut held = self.held();
        let held_now = match held.issued.get_mut(id) {
            Some((_, k)) if k.spend_limit_usd.is_none_or(|cap| k.spent_usd + usd <= cap) => {
                k.spent_usd += usd;
                true
            }
            _ => false,
        };
        ready(Ok(held_now))
    }

    fn release_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<()>> {
        if let Some((_, k)) = self.held().issued.get_mut(id) {
            k.spent_usd = (k.spent_usd - usd).max(0.0);
        }
        ready(Ok(()))
    }
}

impl Keys for Db {
    fn add_key<'a>(&'a self, hash: &'a str, grant: &'a Grant) -> BoxFuture<'a, Result<()>> {
        Box::pin(add(self, hash, grant))
    }

    fn find_key<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<Grant>>> {
        Box::pin(find(self, hash))
    }

    fn issued_keys(&self) -> BoxFuture<'_, Result<Vec<IssuedKey>>> {
        Box::pin(issued(self))
    }

    fn revoke_key<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(revoke(self, id))
    }

    fn keep_player_keys<'a>(&'a self, session: &'a str, players: &'a [String]) -> BoxFuture<'a, Result<()>> {
        Box::pin(keep_players(self, session, players))
    }

    fn drop_player_key<'a>(&'a self, session: &'a str, player: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(drop_player(self, session, player))
    }

    fn set_owner<'a>(&'a self, session: &'a str, owner: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(set_owner(self, session, owner))
    }

    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        Box::pin(owner(self, session))
    }

    fn owned<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(owned(self, owner))
    }

    fn lineage<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Lineage>>> {
        Box::pin(lineage(self, session))
    }

    fn sessions_of<'a>(&'a self, issuer: &'a str, since: i64) -> BoxFuture<'a, Result<(u64, u64)>> {
        Box::pin(sessions_of(self, issuer, since))
    }

    fn issued_sessions<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        Box::pin(issued_sessions(self, issuer))
    }

    fn hold_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            on_pool!(self, pool => sqlx::query(
                    "UPDATE issued_keys SET spent_usd = spent_usd + $2 \
                     WHERE id = $1 AND (spend_limit_usd IS NULL OR spent_usd + $2 <= spend_limit_usd)",
                )
                .bind(id)
                .bind(usd)
                .execute(pool)
                .await
                .map(|r| r.rows_affected() > 0))
            .map_err(|e| store_error("cannot hold what a key may spend", e))
        })
    }

    fn release_spend<'a>(&'a self, id: &'a str, usd: f64) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            on_pool!(self, pool => sqlx::query(
                    "UPDATE issued_keys SET spent_usd = CASE WHEN spent_usd > $2 THEN spent_usd - $2 ELSE 0 END \
                     WHERE id = $1",
                )
                .bind(id)
                .bind(usd)
                .execute(pool)
                .await
                .map(|_| ()))
            .map_err(|e| store_error("cannot give back what a job did not spend", e))
        })
    }
}

/// A key for a session that is gone fails its foreign key: say so as the memory store does.
fn gone_or(what: &str, session: &str, e: sqlx::Error) -> Error {
    let foreign = matches!(&e, sqlx::Error::Database(d) if d.is_foreign_key_violation());
    if foreign { no_session(session) } else { store_error(what, e) }
}

async fn add(db: &Db, hash: &str, grant: &Grant) -> Result<()> {
    match grant {
        Grant::Issued(k) => {
            let packs = k.packs.as_ref().map(|p| serde_json::to_string(p).unwrap_or_else(|_| "[]".into()));
            let rights = serde_json::to_string(&k.rights).unwrap_or_else(|_| "[]".into());
            on_pool!(db, pool => sqlx::query(
                    "INSERT INTO issued_keys (id, hash, label, packs, created_at, rights, expires_at, spend_limit_usd) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&k.id)
                .bind(hash)
                .bind(&k.label)
                .bind(packs)
                .bind(k.created_at)
                .bind(rights)
                .bind(k.expires_at)
                .bind(k.spend_limit_usd)
                .execute(pool)
                .await
                .map(|_| ()))
            .map_err(|e| store_error("cannot keep a key", e))
        }
        Grant::Session { session, debug } => on_pool!(db, pool => sqlx::query(
                "INSERT INTO session_keys (hash, session_id, player, debug) VALUES ($1, $2, NULL, $3)",
            )
            .bind(hash)
            .bind(session)
            .bind(*debug)
            .execute(pool)
            .await
            .map(|_| ()))
        .map_err(|e| gone_or("cannot keep a session's key", session, e)),
        // A player's new key replaces their old one, in one transaction.
        Grant::Player { session, player } => on_pool!(db, pool => async {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM session_keys WHERE session_id = $1 AND player = $2")
                .bind(session)
                .bind(player)
                .execute(&mut *tx)
                .await?;
            sqlx::query("INSERT INTO session_keys (hash, session_id, player) VALUES ($1, $2, $3)")
                .bind(hash)
                .bind(session)
                .bind(player)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        }
        .await)
        .map_err(|e| gone_or("cannot keep a player's key", session, e)),
    }
}

async fn find(db: &Db, hash: &str) -> Result<Option<Grant>> {
    let session: Option<(String, Option<String>, bool)> = on_pool!(db, pool => sqlx::query_as(
            "SELECT session_id, player, debug FROM session_keys WHERE hash = $1",
        )
        .bind(hash)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot look a key up", e))?;
    if let Some((session, player, debug)) = session {
        return Ok(Some(match player {
            None => Grant::Session { session, debug },
            Some(player) => Grant::Player { session, player },
        }));
    }
    let issued: Option<IssuedRow> = on_pool!(db, pool => sqlx::query_as(
            "SELECT id, label, packs, created_at, rights, expires_at, spend_limit_usd, spent_usd FROM issued_keys WHERE hash = $1",
        )
        .bind(hash)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot look a key up", e))?;
    let now = now_ms();
    Ok(issued.map(issued_key).transpose()?.filter(|k| !k.expired(now)).map(Grant::Issued))
}

/// An issued key's row: id, label, packs, created_at, rights, expires_at, spend_limit_usd,
/// spent_usd.
type IssuedRow = (String, String, Option<String>, i64, Option<String>, Option<i64>, Option<f64>, f64);

fn issued_key(
    (id, label, packs, created_at, rights, expires_at, spend_limit_usd, spent_usd): IssuedRow,
) -> Result<IssuedKey> {
    let packs = packs
        .map(|p| serde_json::from_str(&p).map_err(|e| store_error("a key's packs are not a JSON list", e)))
        .transpose()?;
    let rights = rights
        .map(|r| serde_json::from_str(&r).map_err(|e| store_error("a key's rights are not a JSON list", e)))
        .transpose()?
        .unwrap_or_default();
    Ok(IssuedKey { id, label, packs, rights, expires_at, created_at, spend_limit_usd, spent_usd })
}

async fn issued(db: &Db) -> Result<Vec<IssuedKey>> {
    let rows: Vec<IssuedRow> = on_pool!(db, pool => sqlx::query_as(
            "SELECT id, label, packs, created_at, rights, expires_at, spend_limit_usd, spent_usd FROM issued_keys ORDER BY created_at, id",
        )
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot list the keys", e))?;
    rows.into_iter().map(issued_key).collect()
}

async fn revoke(db: &Db, id: &str) -> Result<bool> {
    // The key, and in one transaction every key of the sessions that go back to it (their
    // issuer, kept with each session when it was made, whichever of its parents are gone).
    on_pool!(db, pool => async {
        let mut tx = pool.begin().await?;
        let gone = sqlx::query("DELETE FROM issued_keys WHERE id = $1").bind(id).execute(&mut *tx).await?;
        sqlx::query(
            "DELETE FROM session_keys WHERE session_id IN (SELECT session_id FROM session_owners WHERE issuer = $1)",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(gone.rows_affected() > 0)
    }
    .await)
    .map_err(|e| store_error("cannot revoke a key", e))
}

async fn keep_players(db: &Db, session: &str, players: &[String]) -> Result<()> {
    let kept = serde_json::to_string(players).unwrap_or_else(|_| "[]".into());
    // The players as a JSON list the database reads itself: one statement, whatever their number.
    let text = match db {
        Db::Sqlite(_) => {
            "DELETE FROM session_keys WHERE session_id = $1 AND player IS NOT NULL \
             AND player NOT IN (SELECT value FROM json_each($2))"
        }
        Db::Postgres(_) => {
            "DELETE FROM session_keys WHERE session_id = $1 AND player IS NOT NULL \
             AND player NOT IN (SELECT jsonb_array_elements_text($2::jsonb))"
        }
    };
    on_pool!(db, pool => sqlx::query(text).bind(session).bind(&kept).execute(pool).await.map(|_| ()))
        .map_err(|e| store_error("cannot drop the keys of players who left", e))
}

async fn drop_player(db: &Db, session: &str, player: &str) -> Result<()> {
    on_pool!(db, pool => sqlx::query("DELETE FROM session_keys WHERE session_id = $1 AND player = $2")
        .bind(session)
        .bind(player)
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot drop a player's key", e))
}

async fn set_owner(db: &Db, session: &str, owner: &str) -> Result<()> {
    // The lineage from the owning session's row as it stands now (see `Lineage::made_by`),
    // written in the same statement.
    let parent = match owner.strip_prefix("session:") {
        Some(p) => lineage(db, p).await?,
        None => None,
    };
    let made = Lineage::made_by(owner, parent.as_ref());
    on_pool!(db, pool => sqlx::query(
            "INSERT INTO session_owners (session_id, owner, issuer, lineage) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, issuer = excluded.issuer, lineage = excluded.lineage",
        )
        .bind(session)
        .bind(owner)
        .bind(made.issuer.as_deref())
        .bind(made.sessions.join(" "))
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| gone_or("cannot record who made a session", session, e))
}

async fn issued_sessions(db: &Db, issuer: &str) -> Result<Vec<String>> {
    on_pool!(db, pool => sqlx::query_scalar("SELECT session_id FROM session_owners WHERE issuer = $1")
        .bind(issuer)
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot list a key's sessions", e))
}

async fn owned(db: &Db, owner: &str) -> Result<Vec<String>> {
    on_pool!(db, pool => sqlx::query_scalar("SELECT session_id FROM session_owners WHERE owner = $1")
        .bind(owner)
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot list what a key made", e))
}

async fn sessions_of(db: &Db, issuer: &str, since: i64) -> Result<(u64, u64)> {
    let (recent, kept): (Option<i64>, i64) = on_pool!(db, pool => sqlx::query_as(
            "SELECT SUM(CASE WHEN s.created_at >= $2 THEN 1 ELSE 0 END), COUNT(*) \
             FROM session_owners o JOIN sessions s ON s.id = o.session_id WHERE o.issuer = $1",
        )
        .bind(issuer)
        .bind(since)
        .fetch_one(pool)
        .await)
    .map_err(|e| store_error("cannot count a key's sessions", e))?;
    Ok((recent.unwrap_or(0).max(0) as u64, kept.max(0) as u64))
}

async fn lineage(db: &Db, session: &str) -> Result<Option<Lineage>> {
    let row: Option<(Option<String>, String)> = on_pool!(db, pool => sqlx::query_as(
            "SELECT issuer, lineage FROM session_owners WHERE session_id = $1",
        )
        .bind(session)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot read where a session comes from", e))?;
    Ok(row.map(|(issuer, sessions)| Lineage {
        issuer,
        sessions: sessions.split_whitespace().map(str::to_owned).collect(),
    }))
}

async fn owner(db: &Db, session: &str) -> Result<Option<String>> {
    on_pool!(db, pool => sqlx::query_scalar("SELECT owner FROM session_owners WHERE session_id = $1")
        .bind(session)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot read who made a session", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of sessions a memory store deleted are forgotten as the table grows, and the
    /// keys of live ones kept.
    #[tokio::test]
    async fn a_memory_stores_keys_forget_deleted_sessions_as_they_grow() {
        let store: Arc<dyn Store> = Arc::new(ruleweave::store::MemoryStore::new());
        let keys = InMemory::new(store.clone());
        for n in 0..400 {
            let id = format!("s{n}");
            store.create(&super::super::tests::session(&id), &super::super::tests::start()).await.unwrap();
            keys.add_key(&format!("h{n}"), &Grant::Session { session: id.clone(), debug: false }).await.unwrap();
            keys.set_owner(&id, "key:k").await.unwrap();
            if n < 200 {
                // Half of them end before the next is made, as expired sessions do.
                store.delete(&id).await.unwrap();
            }
        }
        let (kept, of_deleted) = {
            let held = keys.held();
            let of_deleted = held.sessions.values().filter(|(s, _)| s[1..].parse::<usize>().unwrap() < 200).count();
            (held.sessions.len(), of_deleted)
        };
        assert!(
            kept < 300 && of_deleted < 100,
            "{kept} session keys kept of 200 live sessions, {of_deleted} of deleted ones"
        );
        assert_eq!(
            keys.owned("key:k").await.unwrap().iter().filter(|s| s[1..].parse::<usize>().unwrap() >= 200).count(),
            200
        );
        assert_eq!(keys.find_key("h0").await.unwrap(), None, "a deleted session's key opens nothing");
        assert!(keys.find_key("h399").await.unwrap().is_some());
    }
}
