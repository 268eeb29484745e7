//! Transcript links: which session and checkpoint a conversation reached, by the hash of its
//! transcript, so that the chat face finds a stateless client's session whichever replica linked
//! it. Deleting a session drops its links (in the store's own delete).

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

/// A store that links transcripts to sessions (see [`Store::transcripts`](super::Store::transcripts)).
pub trait Transcripts: Send + Sync {
    /// Remembers that the conversation whose transcript hashes to `key` stands at checkpoint `seq`
    /// of session `id`. A key links once: the same conversation played again elsewhere (two
    /// clients opening alike, a regenerated reply that came out the same) leaves the first link
    /// and marks it `shared`, so that no one continues in a session another was handed; deleting
    /// the session drops its links.
    fn link_transcript<'a>(&'a self, key: &'a str, id: &'a str, seq: u64) -> BoxFuture<'a, Result<()>>;

    /// The links of those of `keys` that have one, in no particular order.
    fn find_transcripts<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<Vec<TranscriptLink>>>;
}

/// Where a conversation stands: the session and checkpoint a transcript's key was linked to
/// (see [`Transcripts::link_transcript`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLink {
    /// The transcript's key.
    pub key: String,
    /// The session.
    pub session: String,
    /// The checkpoint the conversation reached.
    pub seq: u64,
    /// Whether the same conversation was linked again to another session or checkpoint (two
    /// clients whose conversations are word for word the same): it is continued in a fork, never
    /// in the session itself.
    pub shared: bool,
}

impl Transcripts for MemoryStore {
    fn link_transcript<'a>(&'a self, key: &'a str, id: &'a str, seq: u64) -> BoxFuture<'a, Result<()>> {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if !self.with(|m| m.contains_key(id)) {
            return Box::pin(std::future::ready(Err(Error::new(ErrorKind::NotFound, format!("no session {id}")))));
        }
        let link = links.entry(key.to_owned()).or_insert_with(|| (id.to_owned(), seq, false));
        if link.0 != id || link.1 != seq {
            link.2 = true;
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn find_transcripts<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<Vec<TranscriptLink>>> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let found = keys
            .iter()
            .filter_map(|k| {
                let (session, seq, shared) = links.get(k)?;
                Some(TranscriptLink { key: k.clone(), session: session.clone(), seq: *seq, shared: *shared })
            })
            .collect();
        Box::pin(std::future::ready(Ok(found)))
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
on_sql_stores!(Transcripts {
    fn link_transcript<'a>(&'a self, key: &'a str, id: &'a str, seq: u64) -> BoxFuture<'a, Result<()>> => link;
    fn find_transcripts<'a>(&'a self, keys: &'a [String]) -> BoxFuture<'a, Result<Vec<TranscriptLink>>> => find;
});

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn link(sql: Sql<'_>, key: &str, id: &str, seq: u64) -> Result<()> {
    on_pool!(sql, pool => sqlx::query(
            "INSERT INTO transcript_links (key, session_id, seq, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (key) DO UPDATE SET shared = TRUE \
             WHERE transcript_links.session_id <> excluded.session_id OR transcript_links.seq <> excluded.seq",
        )
        .bind(key)
        .bind(id)
        .bind(seq as i64)
        .bind(crate::vocab::now_ms())
        .execute(pool)
        .await
        .map(|_| ()))
    .map_err(|e| store_error("cannot link a transcript", e))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn find(sql: Sql<'_>, keys: &[String]) -> Result<Vec<TranscriptLink>> {
    let mut found = Vec::new();
    // A bounded number of placeholders per statement, whatever the conversation's length.
    for chunk in keys.chunks(100) {
        let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql_text =
            format!("SELECT key, session_id, seq, shared FROM transcript_links WHERE key IN ({})", marks.join(", "));
        let rows: Vec<(String, String, i64, bool)> = on_pool!(sql, pool => {
            // Built from a fixed text and a count of placeholders: no data is spliced in.
            let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql_text.clone()));
            for k in chunk {
                q = q.bind(k);
            }
            q.fetch_all(pool).await
        })
        .map_err(|e| store_error("cannot find transcripts", e))?;
        found.extend(rows.into_iter().map(|(key, session, seq, shared)| TranscriptLink {
            key,
            session,
            seq: seq as u64,
            shared,
        }));
    }
    Ok(found)
}
