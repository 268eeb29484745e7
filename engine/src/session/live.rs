//! A session kept live in the engine, shared by whoever plays it: one at a time, by its lock.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::Session;

/// A session kept live in the engine ([`crate::Engine::session`]), shared by whoever runs its
/// turns: each locks it, so turns on it run one at a time. Cloning it shares the same session.
#[derive(Clone)]
pub struct LiveSession(Arc<tokio::sync::Mutex<Session>>);

/// A [`LiveSession`] locked: the session, for as long as the guard is held.
pub struct SessionGuard<'a>(tokio::sync::MutexGuard<'a, Session>);

/// A [`LiveSession`] locked by a guard that owns its share of it (to hold across a task).
pub struct OwnedSessionGuard(tokio::sync::OwnedMutexGuard<Session>);

impl LiveSession {
    pub(crate) fn new(session: Session) -> Self {
        LiveSession(Arc::new(tokio::sync::Mutex::new(session)))
    }

    /// Waits until no one else holds the session, and holds it.
    pub async fn lock(&self) -> SessionGuard<'_> {
        SessionGuard(self.0.lock().await)
    }

    /// [`LiveSession::lock`] with a guard that owns its share of the session.
    pub async fn lock_owned(self) -> OwnedSessionGuard {
        OwnedSessionGuard(self.0.lock_owned().await)
    }

    /// The session now, when no one else holds it.
    pub fn try_lock(&self) -> Option<SessionGuard<'_>> {
        self.0.try_lock().ok().map(SessionGuard)
    }

    /// [`LiveSession::lock`] from a thread that may block (not an async task).
    ///
    /// # Panics
    ///
    /// When called from within an asynchronous task, as tokio's `blocking_lock` does.
    pub fn blocking_lock(&self) -> SessionGuard<'_> {
        SessionGuard(self.0.blocking_lock())
    }

    /// Whether the engine may let it go: no one but the engine shares it, and no one holds it.
    pub(crate) fn is_idle(&self) -> bool {
        Arc::strong_count(&self.0) == 1 && self.0.try_lock().is_ok()
    }
}

impl std::fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.try_lock() {
            Ok(s) => f.debug_tuple("LiveSession").field(&s.id()).finish(),
            Err(_) => f.write_str("LiveSession(<locked>)"),
        }
    }
}

impl Deref for SessionGuard<'_> {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl DerefMut for SessionGuard<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.0
    }
}

impl Deref for OwnedSessionGuard {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.0
    }
}

impl DerefMut for OwnedSessionGuard {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.0
    }
}
