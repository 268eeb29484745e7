//! Threads for blocking work (turns, scripts that wait for models), the most recently idle one
//! first.
//!
//! Tokio's blocking pool wakes the thread that has waited longest, so under a steady load every
//! job lands on a different thread from the one before it, round the whole pool: each job finds
//! its thread's allocator heap and the CPU's caches cold (a server under load spread its turns
//! evenly over ~40 threads, and a twelfth of its CPU was cache misses in `malloc`). Here a job
//! goes to the thread that finished last, so a steady load keeps a few warm threads busy and
//! the rest sleep until they retire.
//!
//! The pool grows as tokio's does, a thread per job when none is idle: what bounds it is the
//! callers (a server's turn slots). A thread idle for [`KEEP_ALIVE`] ends. Hand-written: the
//! pools on crates.io either wake their threads in the same order as tokio's or have a fixed size.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

/// How long a thread waits for work before it ends.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Each thread's stack: scripts recurse, and the engine's own threads get as much.
const STACK: usize = 16 << 20;

/// A job does its work and gives back how to answer its caller, which its thread does once it
/// is idle again: a caller whose next job follows at once finds the same thread.
type Job = Box<dyn FnOnce() -> Answer + Send>;
type Answer = Box<dyn FnOnce() + Send>;

/// An idle thread, and where to hand it a job.
struct Idle {
    id: u64,
    jobs: SyncSender<Job>,
}

#[derive(Default)]
struct Pool {
    /// Idle threads, the most recently idle last.
    idle: Mutex<Vec<Idle>>,
    next_id: std::sync::atomic::AtomicU64,
}

static POOL: LazyLock<Arc<Pool>> = LazyLock::new(Arc::default);

/// Runs `f` on a pool thread, in the caller's tokio runtime (if any), and waits for it without
/// blocking the caller's task. A panic in `f` comes back as its message.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    POOL.run(f).await
}

fn panic_message(p: Box<dyn Any + Send>) -> String {
    match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => format!("panicked: {s}"),
        (_, Some(s)) => format!("panicked: {s}"),
        _ => "panicked".to_owned(),
    }
}

impl Pool {
    async fn run<T: Send + 'static>(self: &Arc<Self>, f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Handle::try_current().ok();
        self.clone().dispatch(Box::new(move || {
            // In the caller's runtime, as on tokio's own threads: `f` and what it drops may
            // reach for it (a store's lock spawns its release when dropped).
            let _runtime = runtime.as_ref().map(tokio::runtime::Handle::enter);
            let result = catch_unwind(AssertUnwindSafe(f)).map_err(panic_message);
            Box::new(move || {
                let _ = tx.send(result);
            })
        }))?;
        rx.await.map_err(|_| "the thread ended before its job did".to_owned())?
    }

    /// Hands `job` to the most recently idle thread, or to a new one.
    fn dispatch(self: Arc<Self>, mut job: Job) -> Result<(), String> {
        loop {
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match idle {
                // Popped, so no other job goes to it; it has ended only if it is gone.
                Some(thread) => match thread.jobs.send(job) {
                    Ok(()) => return Ok(()),
                    Err(mpsc::SendError(back)) => job = back,
                },
                None => return self.spawn(job),
            }
        }
    }

    fn spawn(self: Arc<Self>, job: Job) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::thread::Builder::new()
            .name("ruleweave-turn".to_owned())
            .stack_size(STACK)
            .spawn(move || self.work(id, job))
            .map(drop)
            .map_err(|e| format!("cannot start a thread: {e}"))
    }

    /// A thread's life: the job it was started for, then whatever it is handed while it is idle,
    /// until it has waited [`KEEP_ALIVE`] for nothing.
    fn work(&self, id: u64, first: Job) {
        let (tx, jobs) = mpsc::sync_channel::<Job>(1);
        let mut job = first;
        loop {
            // Jobs from `run` catch their own panics.
            let answer = job();
            self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(Idle { id, jobs: tx.clone() });
            answer();
            job = match jobs.recv_timeout(KEEP_ALIVE) {
                Ok(next) => next,
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                    match idle.iter().position(|t| t.id == id) {
                        Some(at) => {
                            idle.remove(at);
                            return;
                        }
                        // A caller took this thread just now: its job is on the way.
                        None => {
                            drop(idle);
                            match jobs.recv() {
                                Ok(next) => next,
                                Err(_) => return,
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> std::thread::ThreadId {
        std::thread::current().id()
    }

    #[tokio::test]
    async fn a_job_runs_on_the_thread_that_was_idle_last() {
        // Three threads, busy at once; then jobs one at a time go to the one that finished last
        // (tokio's pool would hand the second to another of the three).
        let pool = Arc::new(Pool::default());
        let all = Arc::new(std::sync::Barrier::new(3));
        let busy: Vec<_> = (0..3)
            .map(|_| {
                let (pool, all) = (pool.clone(), all.clone());
                tokio::spawn(async move { pool.run(move || all.wait()).await })
            })
            .collect();
        for b in busy {
            b.await.unwrap().unwrap();
        }
        assert_eq!(pool.idle.lock().unwrap().len(), 3);
        let first = pool.run(thread).await.unwrap();
        let second = pool.run(thread).await.unwrap();
        let third = pool.run(thread).await.unwrap();
        assert_eq!((first, first), (second, third));
        assert_eq!(pool.idle.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_panic_comes_back_as_an_error_and_the_pool_goes_on() {
        let pool = Arc::new(Pool::default());
        let e = pool.run(|| -> u32 { panic!("the script broke") }).await.unwrap_err();
        assert_eq!(e, "panicked: the script broke");
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        assert_eq!(pool.idle.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_job_runs_in_its_callers_runtime() {
        let pool = Arc::new(Pool::default());
        let spawned = pool.run(|| tokio::runtime::Handle::current().block_on(tokio::spawn(async { 5 })));
        assert_eq!(spawned.await.unwrap().unwrap(), 5);
    }
}
