//! The session index: sessions listed newest first, what they take on disk, and the deletion of
//! those past their retention (finished ones some time after they finished, abandoned ones after
//! some idle time).

use super::memory::MemoryStore;
#[cfg(feature = "postgres")]
use super::postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::shared::{self as sql, Sql, on_pool, on_sql_stores};
#[cfg(feature = "sqlite")]
use super::sqlite::SqliteStore;
use super::{SessionInfo, store_error};
use crate::error::Result;
use crate::llm::BoxFuture;

/// A store that lists and expires sessions (see [`Store::index`](super::Store::index)).
pub trait SessionIndex: Send + Sync {
    /// Sessions newest first (by when they opened, then id), as `query` says.
    fn list<'a>(&'a self, query: SessionQuery<'a>) -> BoxFuture<'a, Result<Vec<SessionInfo>>>;

    /// Deletes the sessions `which` names that finished before `finished_before` (unix ms);
    /// returns how many.
    fn expire<'a>(&'a self, finished_before: i64, which: Expiry<'a>) -> BoxFuture<'a, Result<u64>>;

    /// Deletes the unfinished sessions whose newest checkpoint was written before `idle_before`
    /// (unix ms), their checkpoints and links with them; returns how many.
    fn expire_idle(&self, idle_before: i64) -> BoxFuture<'_, Result<u64>>;

    /// The bytes the checkpoints of `sessions` take, as the store keeps them (compressed where
    /// it compresses; a memory store counts their JSON): what they cost the disk. A read of
    /// every such checkpoint, for an operator's listing, not for each request.
    fn bytes<'a>(&'a self, sessions: &'a [String]) -> BoxFuture<'a, Result<u64>>;

    /// The sessions opened for the player whose hash is `player` (see
    /// [`player_hash`](crate::player_hash)), forks of them with them.
    fn of_player<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;
}

/// Which sessions [`SessionIndex::list`] lists: newest first, `limit` of them, of one pack or
/// all, of a given few or all, after a cursor (the `created_at` and id of the last one of the
/// page before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionQuery<'a> {
    /// Only this pack's sessions.
    pub pack: Option<&'a str>,
    /// The most sessions to list.
    pub limit: u32,
    /// Only sessions older than this one (`created_at`, id).
    pub before: Option<(i64, &'a str)>,
    /// Only these sessions (those a key made, say).
    pub only: Option<&'a [String]>,
}

/// Which finished sessions an expiry deletes.
#[derive(Debug, Clone, Copy)]
pub enum Expiry<'a> {
    /// Those of this pack.
    Pack(&'a str),
    /// Those of every pack but these (which keep their own retention).
    AllBut(&'a [String]),
}

impl Expiry<'_> {
    fn names(&self, pack: &str) -> bool {
        match self {
            Expiry::Pack(p) => *p == pack,
            Expiry::AllBut(but) => !but.iter().any(|b| b == pack),
        }
    }
}

impl SessionIndex for MemoryStore {
    fn list<'a>(&'a self, q: SessionQuery<'a>) -> BoxFuture<'a, Result<Vec<SessionInfo>>> {
        let mut all: Vec<SessionInfo> = self.with(|m| {
            m.values()
                .filter(|e| q.pack.is_none_or(|p| e.info.pack == p))
                .filter(|e| q.only.is_none_or(|only| only.contains(&e.info.id)))
                .filter(|e| q.before.is_none_or(|(at, id)| (e.info.created_at, e.info.id.as_str()) < (at, id)))
                .map(|e| e.info.clone())
                .collect()
        });
        all.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        all.truncate(q.limit as usize);
        Box::pin(std::future::ready(Ok(all)))
    }

    fn expire<'a>(&'a self, finished_before: i64, which: Expiry<'a>) -> BoxFuture<'a, Result<u64>> {
        let expired = self.remove_where(|e| {
            which.names(&e.info.pack) && e.info.finished && e.info.finished_at.is_some_and(|t| t < finished_before)
        });
        Box::pin(std::future::ready(Ok(expired)))
    }

    fn expire_idle(&self, idle_before: i64) -> BoxFuture<'_, Result<u64>> {
        let expired = self.remove_where(|e| !e.info.finished && e.info.updated_at < idle_before);
        Box::pin(std::future::ready(Ok(expired)))
    }

    fn bytes<'a>(&'a self, sessions: &'a [String]) -> BoxFuture<'a, Result<u64>> {
        // This store keeps values, not bytes: each checkpoint's parts as JSON, uncompressed.
        let size = |c: &super::Checkpoint| {
            let json = |v: &Option<serde_json::Value>| v.as_ref().map_or(0, |v| v.to_string().len());
            let updates: usize = c.updates.iter().map(|(n, u)| n.len() + u.to_json().to_string().len()).sum();
            let exchanges = serde_json::to_vec(&*c.exchanges).map_or(0, |v| v.len());
            json(&c.snapshot) + json(&c.input) + updates + exchanges
        };
        let bytes: usize =
            self.with(|m| sessions.iter().filter_map(|s| m.get(s)).flat_map(|e| &e.rows).map(size).sum());
        Box::pin(std::future::ready(Ok(bytes as u64)))
    }

    fn of_player<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        let found = self.with(|m| {
            m.values().filter(|e| e.info.player.as_deref() == Some(player)).map(|e| e.info.id.clone()).collect()
        });
        Box::pin(std::future::ready(Ok(found)))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(SessionIndex {
    fn list<'a>(&'a self, query: SessionQuery<'a>) -> BoxFuture<'a, Result<Vec<SessionInfo>>> => list;
    fn expire<'a>(&'a self, finished_before: i64, which: Expiry<'a>) -> BoxFuture<'a, Result<u64>> => expire;
    fn expire_idle(&self, idle_before: i64) -> BoxFuture<'_, Result<u64>> => expire_idle;
    fn bytes<'a>(&'a self, sessions: &'a [String]) -> BoxFuture<'a, Result<u64>> => bytes;
    fn of_player<'a>(&'a self, player: &'a str) -> BoxFuture<'a, Result<Vec<String>>> => of_player;
});

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn of_player(sql: Sql<'_>, player: &str) -> Result<Vec<String>> {
    on_pool!(sql, pool => sqlx::query_scalar("SELECT id FROM sessions WHERE player = $1").bind(player).fetch_all(pool).await)
        .map_err(|e| store_error("cannot find a player's sessions", e))
}

/// Session ids as a JSON list, which both databases read themselves (`json_each`,
/// `jsonb_array_elements_text`): one statement, whatever their number.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn id_list(ids: &[String]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".into())
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn list(sql: Sql<'_>, q: SessionQuery<'_>) -> Result<Vec<SessionInfo>> {
    let only_these = if sql.is_postgres() {
        "SELECT jsonb_array_elements_text($5::jsonb)"
    } else {
        "SELECT value FROM json_each($5)"
    };
    let text = format!(
        "SELECT * FROM sessions WHERE ($1 IS NULL OR pack = $1) \
         AND ($2 IS NULL OR created_at < $2 OR (created_at = $2 AND id < $3)) \
         AND ($5 IS NULL OR id IN ({only_these})) \
         ORDER BY created_at DESC, id DESC LIMIT $4"
    );
    let only = q.only.map(id_list);
    on_pool!(sql, pool => {
        // Built from fixed texts: no data is spliced in.
        let rows = sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(q.pack)
        .bind(q.before.map(|b| b.0))
        .bind(q.before.map_or("", |b| b.1))
        .bind(i64::from(q.limit))
        .bind(only.as_deref())
        .fetch_all(pool)
        .await
        .map_err(|e| store_error("cannot list sessions", e))?;
        rows.iter().map(sql::session).collect()
    })
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn expire(sql: Sql<'_>, finished_before: i64, which: Expiry<'_>) -> Result<u64> {
    let base = "DELETE FROM sessions WHERE finished AND finished_at < $1".to_owned();
    let (text, packs) = match which {
        Expiry::Pack(p) => (base + " AND pack = $2", vec![p]),
        Expiry::AllBut([]) => (base, Vec::new()),
        Expiry::AllBut(but) => {
            let marks: Vec<String> = (2..but.len() + 2).map(|i| format!("${i}")).collect();
            (format!("{base} AND pack NOT IN ({})", marks.join(", ")), but.iter().map(String::as_str).collect())
        }
    };
    on_pool!(sql, pool => {
        // Built from a fixed text and a count of placeholders: no data is spliced in.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(text)).bind(finished_before);
        for p in packs {
            q = q.bind(p);
        }
        q.execute(pool).await.map(|r| r.rows_affected())
    })
    .map_err(|e| store_error("cannot expire sessions", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn bytes(sql: Sql<'_>, sessions: &[String]) -> Result<u64> {
    let (text, ids) = (sql::keyed_bytes(sql), id_list(sessions));
    let bytes: i64 = on_pool!(sql, pool => sqlx::query_scalar(text).bind(&ids).fetch_one(pool).await)
        .map_err(|e| store_error("cannot sum what sessions take", e))?;
    Ok(bytes.max(0) as u64)
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn expire_idle(sql: Sql<'_>, idle_before: i64) -> Result<u64> {
    on_pool!(sql, pool => sqlx::query("DELETE FROM sessions WHERE NOT finished AND updated_at < $1")
        .bind(idle_before)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))
    .map_err(|e| store_error("cannot expire idle sessions", e))
}
