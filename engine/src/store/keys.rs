//! Keys: who may reach a session besides the operator, kept in the store so that every process
//! sharing it honours the same ones. A key is kept as the SHA-256 of its secret ([`key_hash`]),
//! never the secret: a session's key and its players' keys go with the session; a key the
//! operator issued stays until it is revoked. The store also keeps which key made each session
//! (its owner), which reaches it too. What each key may do is the server's to say.

use sha2::{Digest, Sha256};

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{Sql, on_pool, on_sql_stores};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
use super::store_error;
use crate::error::{Error, ErrorKind, Result};
use crate::llm::BoxFuture;

/// What a key opens.
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A store that keeps keys (see [`Store::keys`](super::Store::keys)).
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

    /// The bytes the checkpoints of the sessions that go back to `issuer` take, as the store
    /// keeps them (compressed where it compresses): what one key costs the disk. A read of
    /// every such checkpoint, for the operator's listing, not for each request.
    fn bytes_of<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<u64>>;

    /// Who made `session`, when a key did.
    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>>;
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

fn no_session(session: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("there is no session {session}"))
}

impl MemoryStore {
    /// The sessions that go back to the issued key `issuer`.
    fn issued_by(&self, issuer: &str) -> Vec<String> {
        let keys = self.keys();
        keys.lineage.iter().filter(|(_, l)| l.issuer.as_deref() == Some(issuer)).map(|(s, _)| s.clone()).collect()
    }
}

impl Keys for MemoryStore {
    fn add_key<'a>(&'a self, hash: &'a str, grant: &'a Grant) -> BoxFuture<'a, Result<()>> {
        let exists = |s: &str| self.with(|m| m.contains_key(s));
        let mut keys = self.keys();
        let done = match grant {
            Grant::Issued(key) => {
                keys.issued.insert(key.id.clone(), (hash.to_owned(), key.clone()));
                Ok(())
            }
            Grant::Session { session, debug } if exists(session) => {
                keys.sessions.insert(hash.to_owned(), (session.clone(), None));
                if *debug {
                    keys.debug.insert(hash.to_owned());
                }
                Ok(())
            }
            Grant::Player { session, player } if exists(session) => {
                keys.sessions.retain(|_, (s, p)| !(s == session && p.as_deref() == Some(player)));
                keys.sessions.insert(hash.to_owned(), (session.clone(), Some(player.clone())));
                Ok(())
            }
            Grant::Session { session, .. } | Grant::Player { session, .. } => Err(no_session(session)),
        };
        ready(done)
    }

    fn find_key<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<Grant>>> {
        let keys = self.keys();
        let now = crate::vocab::now_ms();
        let found = match keys.sessions.get(hash) {
            Some((session, None)) => {
                Some(Grant::Session { session: session.clone(), debug: keys.debug.contains(hash) })
            }
            Some((session, Some(player))) => Some(Grant::Player { session: session.clone(), player: player.clone() }),
            None => {
                keys.issued.values().find(|(h, k)| h == hash && !k.expired(now)).map(|(_, k)| Grant::Issued(k.clone()))
            }
        };
        ready(Ok(found))
    }

    fn issued_keys(&self) -> BoxFuture<'_, Result<Vec<IssuedKey>>> {
        let mut all: Vec<IssuedKey> = self.keys().issued.values().map(|(_, k)| k.clone()).collect();
        all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        ready(Ok(all))
    }

    fn revoke_key<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let mut keys = self.keys();
        let revoked = keys.issued.remove(id).is_some();
        // Every session that goes back to the key, whichever of its parents are gone.
        let reached: std::collections::HashSet<String> =
            keys.lineage.iter().filter(|(_, l)| l.issuer.as_deref() == Some(id)).map(|(s, _)| s.clone()).collect();
        keys.sessions.retain(|_, (s, _)| !reached.contains(s));
        ready(Ok(revoked))
    }

    fn keep_player_keys<'a>(&'a self, session: &'a str, players: &'a [String]) -> BoxFuture<'a, Result<()>> {
        self.keys().sessions.retain(|_, (s, p)| s != session || p.as_ref().is_none_or(|p| players.contains(p)));
        ready(Ok(()))
    }

    fn drop_player_key<'a>(&'a self, session: &'a str, player: &'a str) -> BoxFuture<'a, Result<()>> {
        self.keys().sessions.retain(|_, (s, p)| !(s == session && p.as_deref() == Some(player)));
        ready(Ok(()))
    }

    fn set_owner<'a>(&'a self, session: &'a str, owner: &'a str) -> BoxFuture<'a, Result<()>> {
        if !self.with(|m| m.contains_key(session)) {
            return ready(Err(no_session(session)));
        }
        let mut keys = self.keys();
        let parent = owner.strip_prefix("session:").and_then(|p| keys.lineage.get(p));
        let lineage = Lineage::made_by(owner, parent);
        keys.lineage.insert(session.to_owned(), lineage);
        keys.owners.insert(session.to_owned(), owner.to_owned());
        ready(Ok(()))
    }

    fn lineage<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Lineage>>> {
        ready(Ok(self.keys().lineage.get(session).cloned()))
    }

    fn sessions_of<'a>(&'a self, issuer: &'a str, since: i64) -> BoxFuture<'a, Result<(u64, u64)>> {
        let mine = self.issued_by(issuer);
        let made = self.with(|m| mine.iter().filter_map(|s| m.get(s)).map(|e| e.info.created_at).collect::<Vec<_>>());
        let recent = made.iter().filter(|at| **at >= since).count() as u64;
        ready(Ok((recent, made.len() as u64)))
    }

    fn bytes_of<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<u64>> {
        let mine = self.issued_by(issuer);
        // This store keeps values, not bytes: each checkpoint's parts as JSON, uncompressed.
        let size = |c: &super::Checkpoint| {
            let json = |v: &Option<serde_json::Value>| v.as_ref().map_or(0, |v| v.to_string().len());
            let updates: usize = c.updates.iter().map(|(n, u)| n.len() + u.to_json().to_string().len()).sum();
            let exchanges = serde_json::to_vec(&*c.exchanges).map_or(0, |v| v.len());
            json(&c.snapshot) + json(&c.input) + updates + exchanges
        };
        let bytes: usize = self.with(|m| mine.iter().filter_map(|s| m.get(s)).flat_map(|e| &e.rows).map(size).sum());
        ready(Ok(bytes as u64))
    }

    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>> {
        ready(Ok(self.keys().owners.get(session).cloned()))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(Keys {
    fn add_key<'a>(&'a self, hash: &'a str, grant: &'a Grant) -> BoxFuture<'a, Result<()>> => add;
    fn find_key<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<Grant>>> => find;
    fn issued_keys(&self) -> BoxFuture<'_, Result<Vec<IssuedKey>>> => issued;
    fn revoke_key<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool>> => revoke;
    fn keep_player_keys<'a>(&'a self, session: &'a str, players: &'a [String]) -> BoxFuture<'a, Result<()>> => keep_players;
    fn drop_player_key<'a>(&'a self, session: &'a str, player: &'a str) -> BoxFuture<'a, Result<()>> => drop_player;
    fn set_owner<'a>(&'a self, session: &'a str, owner: &'a str) -> BoxFuture<'a, Result<()>> => set_owner;
    fn owner<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<String>>> => owner;
    fn lineage<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Option<Lineage>>> => lineage;
    fn sessions_of<'a>(&'a self, issuer: &'a str, since: i64) -> BoxFuture<'a, Result<(u64, u64)>> => sessions_of;
    fn bytes_of<'a>(&'a self, issuer: &'a str) -> BoxFuture<'a, Result<u64>> => bytes_of;
});

/// A key for a session that is gone fails its foreign key: say so as the memory store does.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn gone_or(what: &str, session: &str, e: sqlx::Error) -> Error {
    let foreign = matches!(&e, sqlx::Error::Database(d) if d.is_foreign_key_violation());
    if foreign { no_session(session) } else { store_error(what, e) }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn add(sql: Sql<'_>, hash: &str, grant: &Grant) -> Result<()> {
    match grant {
        Grant::Issued(k) => {
            let packs = k.packs.as_ref().map(|p| serde_json::to_string(p).unwrap_or_else(|_| "[]".into()));
            let rights = serde_json::to_string(&k.rights).unwrap_or_else(|_| "[]".into());
            on_pool!(sql, pool => sqlx::query(
                    "INSERT INTO issued_keys (id, hash, label, packs, created_at, rights, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&k.id)
                .bind(hash)
                .bind(&k.label)
                .bind(packs)
                .bind(k.created_at)
                .bind(rights)
                .bind(k.expires_at)
                .execute(pool)
                .await
                .map(|_| ()))
            .map_err(|e| store_error("cannot keep a key", e))
        }
        Grant::Session { session, debug } => on_pool!(sql, pool => sqlx::query(
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
        Grant::Player { session, player } => on_pool!(sql, pool => async {
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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn find(sql: Sql<'_>, hash: &str) -> Result<Option<Grant>> {
    let session: Option<(String, Option<String>, bool)> = on_pool!(sql, pool => sqlx::query_as(
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
    let issued: Option<IssuedRow> = on_pool!(sql, pool => sqlx::query_as(
            "SELECT id, label, packs, created_at, rights, expires_at FROM issued_keys WHERE hash = $1",
        )
        .bind(hash)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot look a key up", e))?;
    let now = crate::vocab::now_ms();
    Ok(issued.map(issued_key).transpose()?.filter(|k| !k.expired(now)).map(Grant::Issued))
}

/// An issued key's row: id, label, packs, created_at, rights, expires_at.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
type IssuedRow = (String, String, Option<String>, i64, Option<String>, Option<i64>);

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn issued_key((id, label, packs, created_at, rights, expires_at): IssuedRow) -> Result<IssuedKey> {
    let packs = packs
        .map(|p| serde_json::from_str(&p).map_err(|e| store_error("a key's packs are not a JSON list", e)))
        .transpose()?;
    let rights = rights
        .map(|r| serde_json::from_str(&r).map_err(|e| store_error("a key's rights are not a JSON list", e)))
        .transpose()?
        .unwrap_or_default();
    Ok(IssuedKey { id, label, packs, rights, expires_at, created_at })
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn issued(sql: Sql<'_>) -> Result<Vec<IssuedKey>> {
    let rows: Vec<IssuedRow> = on_pool!(sql, pool => sqlx::query_as(
            "SELECT id, label, packs, created_at, rights, expires_at FROM issued_keys ORDER BY created_at, id",
        )
        .fetch_all(pool)
        .await)
    .map_err(|e| store_error("cannot list the keys", e))?;
    rows.into_iter().map(issued_key).collect()
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn revoke(sql: Sql<'_>, id: &str) -> Result<bool> {
    // The key, and in one transaction every key of the sessions that go back to it (their
    // issuer, kept with each session when it was made, whichever of its parents are gone).
    on_pool!(sql, pool => async {
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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn keep_players(sql: Sql<'_>, session: &str, players: &[String]) -> Result<()> {
    let kept = serde_json::to_string(players).unwrap_or_else(|_| "[]".into());
    // The players as a JSON list the database reads itself: one statement, whatever their number.
    let text = match sql {
        #[cfg(feature = "sqlite")]
        Sql::Sqlite(_) => {
            "DELETE FROM session_keys WHERE session_id = $1 AND player IS NOT NULL \
             AND player NOT IN (SELECT value FROM json_each($2))"
        }
        #[cfg(feature = "postgres")]
        Sql::Postgres(_) => {
            "DELETE FROM session_keys WHERE session_id = $1 AND player IS NOT NULL \
             AND player NOT IN (SELECT jsonb_array_elements_text($2::jsonb))"
        }
    };
    on_pool!(sql, pool => sqlx::query(text).bind(session).bind(&kept).execute(pool).await.map(|_| ()))
        .map_err(|e| store_error("cannot drop the keys of players who left", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn drop_player(sql: Sql<'_>, session: &str, player: &str) -> Result<()> {
    on_pool!(sql, pool => sqlx::query("DELETE FROM session_keys WHERE session_id = $1 AND player = $2")
        .bind(session)
        .bind(player)
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot drop a player's key", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn set_owner(sql: Sql<'_>, session: &str, owner: &str) -> Result<()> {
    // The lineage from the owning session's row as it stands now (see `Lineage::made_by`),
    // written in the same statement.
    let parent = match owner.strip_prefix("session:") {
        Some(p) => lineage(sql, p).await?,
        None => None,
    };
    let made = Lineage::made_by(owner, parent.as_ref());
    on_pool!(sql, pool => sqlx::query(
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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn bytes_of(sql: Sql<'_>, issuer: &str) -> Result<u64> {
    let text = super::shared::keyed_bytes_of(sql);
    let bytes: i64 = on_pool!(sql, pool => sqlx::query_scalar(text).bind(issuer).fetch_one(pool).await)
        .map_err(|e| store_error("cannot sum a key's bytes", e))?;
    Ok(bytes.max(0) as u64)
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn sessions_of(sql: Sql<'_>, issuer: &str, since: i64) -> Result<(u64, u64)> {
    let (recent, kept): (Option<i64>, i64) = on_pool!(sql, pool => sqlx::query_as(
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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn lineage(sql: Sql<'_>, session: &str) -> Result<Option<Lineage>> {
    let row: Option<(Option<String>, String)> = on_pool!(sql, pool => sqlx::query_as(
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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn owner(sql: Sql<'_>, session: &str) -> Result<Option<String>> {
    on_pool!(sql, pool => sqlx::query_scalar("SELECT owner FROM session_owners WHERE session_id = $1")
        .bind(session)
        .fetch_optional(pool)
        .await)
    .map_err(|e| store_error("cannot read who made a session", e))
}
