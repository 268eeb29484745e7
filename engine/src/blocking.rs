//! Threads for blocking work (turns, scripts that wait for models), the most recently idle one
//! first.
//!
//! Tokio's blocking pool wakes the thread that has waited longest, so under a steady load every
//! job lands on a different thread from the one before it, round the whole pool: each job finds
//! its thread's allocator heap and the CPU's caches cold (a server under load spread its turns
//! evenly over ~40 threads, and a twelfth of its CPU was cache misses in `malloc`). Here a job
//! goes to the thread that finished last, so a steady load keeps as many threads busy as it has
//! jobs at once, warm, and the rest sleep until they retire.
//!
//! Like tokio's pool, this one starts a thread for a job when none is idle, up to
//! [`MAX_THREADS`]; beyond that jobs wait in line for the next thread to finish. A thread idle for
//! [`KEEP_ALIVE`] ends. The threads are the engine's own, named `ruleweave-blocking`: a tokio
//! runtime's settings (stack size, thread hooks) do not apply to them, though each job runs in
//! its caller's runtime. [`settled`] waits for the jobs under way, for a graceful shutdown.
//! Hand-written: the pools on crates.io either wake their threads in the same order as tokio's or
//! have a fixed size.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;

/// Why a job handed to the pool gave back no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PoolError {
    /// The job panicked: the panic's message.
    Panicked(String),
    /// No thread could take it: none is alive and the system refused a new one.
    NoThread(String),
    /// Its thread ended before the job did.
    Lost,
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Panicked(message) => write!(f, "panicked: {message}"),
            PoolError::NoThread(why) => write!(f, "cannot start a thread: {why}"),
            PoolError::Lost => f.write_str("the thread ended before its job did"),
        }
    }
}

impl std::error::Error for PoolError {}

impl From<PoolError> for crate::Error {
    fn from(e: PoolError) -> Self {
        crate::Error::new(crate::ErrorKind::Internal, format!("a blocking thread failed: {e}"))
    }
}

/// How long a thread waits for work before it ends.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The most threads at once (tokio's default for its blocking pool).
pub(crate) const MAX_THREADS: usize = 512;

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
struct Threads {
    /// Idle threads, the most recently idle last.
    idle: Vec<Idle>,
    /// Jobs waiting for a thread, when [`Pool::max`] are busy.
    waiting: VecDeque<Job>,
    /// Threads alive, busy or idle.
    alive: usize,
}

struct Pool {
    threads: Mutex<Threads>,
    max: usize,
    keep_alive: Duration,
    next_id: AtomicU64,
    /// Jobs handed out and not yet answered.
    running: AtomicUsize,
    /// Told when `running` falls to 0.
    none_running: Notify,
    /// Told when a thread ends.
    retired: Notify,
}

static POOL: LazyLock<Arc<Pool>> = LazyLock::new(|| Pool::new(MAX_THREADS, KEEP_ALIVE));

/// Runs `f` on a pool thread, in the caller's tokio runtime (if any), and waits for it without
/// blocking the caller's task. A panic in `f` comes back as [`PoolError::Panicked`].
///
/// The job is handed out when the future is first polled. Dropping the future afterwards does
/// not stop `f`: it runs to its end, and its result is dropped on its thread, in the runtime.
pub(crate) async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, PoolError> {
    let traced = Traced::here();
    POOL.run(move || traced.within(f)).await
}

/// Runs the future `make` returns on a pool thread, blocked on in the caller's tokio runtime (a
/// turn: scripts and templates are synchronous work between its awaits), and waits for it as
/// [`run`] does. Called from within a tokio runtime; outside one it returns an error.
pub(crate) async fn run_async<F: Future>(make: impl FnOnce() -> F + Send + 'static) -> Result<F::Output, PoolError>
where
    F::Output: Send + 'static,
{
    // The pool runs the job in the caller's runtime, so the job finds it as its current one.
    let traced = Traced::here();
    POOL.run(move || traced.within(|| Handle::current().block_on(make()))).await
}

/// [`run_async`], cancelled when dropped, as an awaited future is: the job's future is dropped
/// on its thread, and the drop waits for that, so whatever the job changed and undoes when
/// dropped (a turn's state) is settled when the caller goes on. A job not started yet never
/// runs. (The wait is as long as the job's synchronous step under way: a script, bounded by its
/// limits.)
pub(crate) async fn run_cancellable<F: Future>(
    make: impl FnOnce() -> F + Send + 'static,
) -> Result<F::Output, PoolError>
where
    F::Output: Send + 'static,
{
    let cancel = Arc::new(Cancel::default());
    let job = cancel.clone();
    let _on_drop = CancelOnDrop(cancel);
    let out = run_async(move || async move {
        if !job.start() {
            return None;
        }
        let _finished = Finished(&job);
        tokio::select! {
            biased;
            () = job.asked.notified() => None,
            out = make() => Some(out),
        }
    })
    .await?;
    // Only a dropped caller cancels, and then nobody reads this.
    out.ok_or(PoolError::Lost)
}

/// Where a cancellable job stands.
#[derive(Default, PartialEq)]
enum Phase {
    #[default]
    Waiting,
    Running,
    Done,
    Cancelled,
}

#[derive(Default)]
struct Cancel {
    phase: Mutex<Phase>,
    changed: std::sync::Condvar,
    /// Told when the caller drops the job while it runs.
    asked: Notify,
}

impl Cancel {
    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the job may start: not when its caller is gone already.
    fn start(&self) -> bool {
        let mut phase = self.phase();
        if *phase == Phase::Cancelled {
            return false;
        }
        *phase = Phase::Running;
        true
    }
}

/// Marks the job done (its future dropped), however it ended.
struct Finished<'a>(&'a Cancel);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        *self.0.phase() = Phase::Done;
        self.0.changed.notify_all();
    }
}

/// Cancels the job when its caller drops it before it is done, and waits until it is.
struct CancelOnDrop(Arc<Cancel>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let mut phase = self.0.phase();
        match *phase {
            Phase::Waiting => *phase = Phase::Cancelled,
            Phase::Running => {
                self.0.asked.notify_one();
                while *phase == Phase::Running {
                    phase = self.0.changed.wait(phase).unwrap_or_else(|p| p.into_inner());
                }
            }
            Phase::Done | Phase::Cancelled => {}
        }
    }
}

/// The caller's trace span and the subscriber it reports to, carried to the pool's thread: a
/// turn run there stays its request's child, a script's model calls their node's, for the
/// process's subscriber and an embedder's scoped one alike.
struct Traced {
    span: tracing::Span,
    dispatch: tracing::Dispatch,
}

impl Traced {
    fn here() -> Self {
        Traced { span: tracing::Span::current(), dispatch: tracing::dispatcher::get_default(Clone::clone) }
    }

    fn within<T>(self, f: impl FnOnce() -> T) -> T {
        tracing::dispatcher::with_default(&self.dispatch, || self.span.in_scope(f))
    }
}

/// Waits until no job handed to [`run`] is still running, those handed out meanwhile included:
/// what a graceful shutdown waits for, since the runtime's own shutdown does not.
pub(crate) async fn settled() {
    POOL.settled().await
}

fn panicked(p: Box<dyn Any + Send>) -> PoolError {
    PoolError::Panicked(crate::error::panic_text(&*p).map_or_else(|| "(no message)".to_owned(), ToOwned::to_owned))
}

/// Drops `v` in the caller's runtime (a drop may spawn, as a store's lock guard does), a panic in
/// its drop going no further: a result whose caller has gone.
fn dispose<T>(runtime: Option<&Handle>, v: T) {
    let _runtime = runtime.map(Handle::enter);
    let _ = catch_unwind(AssertUnwindSafe(move || drop(v)));
}

impl Pool {
    fn new(max: usize, keep_alive: Duration) -> Arc<Self> {
        Arc::new(Pool {
            threads: Mutex::default(),
            max: max.max(1),
            keep_alive,
            next_id: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            none_running: Notify::new(),
            retired: Notify::new(),
        })
    }

    fn threads(&self) -> MutexGuard<'_, Threads> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run<T: Send + 'static>(self: &Arc<Self>, f: impl FnOnce() -> T + Send + 'static) -> Result<T, PoolError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let runtime = Handle::try_current().ok();
        self.running.fetch_add(1, Ordering::SeqCst);
        let dispatched = self.dispatch(Box::new(move || {
            let result = {
                // In the caller's runtime, as on tokio's own threads: `f` and what it drops may
                // reach for it (a store's lock spawns its release when dropped).
                let _runtime = runtime.as_ref().map(Handle::enter);
                catch_unwind(AssertUnwindSafe(f)).map_err(panicked)
            };
            // When the caller has gone, the result is dropped here, before the thread takes other
            // work.
            Box::new(move || {
                if let Err(unsent) = tx.send(result) {
                    dispose(runtime.as_ref(), unsent);
                }
            })
        }));
        if let Err(e) = dispatched {
            self.finished();
            return Err(e);
        }
        rx.await.map_err(|_| PoolError::Lost)?
    }

    /// One job less running.
    fn finished(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.none_running.notify_waiters();
        }
    }

    async fn settled(&self) {
        loop {
            let told = self.none_running.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            told.await;
        }
    }

    /// Hands `job` to the most recently idle thread, or to a new one, or puts it in line when
    /// [`Pool::max`] threads are busy (or no new thread can start while others run).
    fn dispatch(self: &Arc<Self>, mut job: Job) -> Result<(), PoolError> {
        loop {
            let mut threads = self.threads();
            match threads.idle.pop() {
                // Popped, so no other job goes to it; it has ended only if it is gone.
                Some(thread) => {
                    drop(threads);
                    match thread.jobs.send(job) {
                        Ok(()) => return Ok(()),
                        Err(mpsc::SendError(back)) => job = back,
                    }
                }
                None if threads.alive >= self.max => {
                    threads.waiting.push_back(job);
                    return Ok(());
                }
                None => {
                    threads.alive += 1;
                    drop(threads);
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    // Kept outside the thread's closure, which a failed start drops.
                    let first = Arc::new(Mutex::new(Some(job)));
                    let (pool, handed) = (self.clone(), first.clone());
                    let started = std::thread::Builder::new()
                        .name("ruleweave-blocking".to_owned())
                        .stack_size(STACK)
                        .spawn(move || {
                            let job = handed.lock().unwrap_or_else(|p| p.into_inner()).take();
                            match job {
                                Some(job) => pool.work(id, job),
                                // Never: only a thread that failed to start gives its job back.
                                None => pool.retire(),
                            }
                        });
                    let Err(e) = started else { return Ok(()) };
                    job = first.lock().unwrap_or_else(|p| p.into_inner()).take().expect("the thread never started");
                    let mut threads = self.threads();
                    threads.alive -= 1;
                    match (threads.idle.is_empty(), threads.alive) {
                        // No thread to take it, now or later.
                        (true, 0) => return Err(PoolError::NoThread(e.to_string())),
                        // The busy threads take it when they are done.
                        (true, _) => {
                            threads.waiting.push_back(job);
                            return Ok(());
                        }
                        // One went idle meanwhile.
                        (false, _) => continue,
                    }
                }
            }
        }
    }

    /// A thread's life: jobs, the one it was started for first, taken from the line or handed
    /// to it while it is idle, until it has waited [`Pool::keep_alive`] for nothing.
    fn work(&self, id: u64, first: Job) {
        let (tx, jobs) = mpsc::sync_channel::<Job>(1);
        let mut job = first;
        loop {
            // Jobs from `run` catch their own panics.
            let answer = job();
            let next = {
                let mut threads = self.threads();
                let next = threads.waiting.pop_front();
                if next.is_none() {
                    threads.idle.push(Idle { id, jobs: tx.clone() });
                }
                next
            };
            answer();
            self.finished();
            job = match next {
                Some(next) => next,
                None => match jobs.recv_timeout(self.keep_alive) {
                    Ok(next) => next,
                    Err(RecvTimeoutError::Timeout) => {
                        let mut threads = self.threads();
                        match threads.idle.iter().position(|t| t.id == id) {
                            Some(at) => {
                                threads.idle.remove(at);
                                drop(threads);
                                return self.retire();
                            }
                            // A caller took this thread just now: its job is on the way.
                            None => {
                                drop(threads);
                                match jobs.recv() {
                                    Ok(next) => next,
                                    // Never: this thread holds a sender.
                                    Err(_) => return self.retire(),
                                }
                            }
                        }
                    }
                    // Never: this thread holds a sender.
                    Err(RecvTimeoutError::Disconnected) => return self.retire(),
                },
            };
        }
    }

    fn retire(&self) {
        self.threads().alive -= 1;
        self.retired.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> std::thread::ThreadId {
        std::thread::current().id()
    }

    /// Lets the test's other tasks run until `done` holds (they need a few polls, not time).
    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never happened: {what}");
    }

    /// Runs `n` jobs at once on `pool`, each waiting for all of them: `n` threads, then idle.
    async fn all_at_once(pool: &Arc<Pool>, n: usize) {
        let all = Arc::new(std::sync::Barrier::new(n));
        let busy: Vec<_> = (0..n)
            .map(|_| {
                let (pool, all) = (pool.clone(), all.clone());
                tokio::spawn(async move { pool.run(move || all.wait()).await })
            })
            .collect();
        for b in busy {
            b.await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn a_job_runs_on_the_thread_that_was_idle_last() {
        // Three threads, busy at once; then jobs one at a time go to the one that finished last
        // (tokio's pool would hand the second to another of the three).
        let pool = Pool::new(8, KEEP_ALIVE);
        all_at_once(&pool, 3).await;
        assert_eq!(pool.threads().idle.len(), 3);
        let first = pool.run(thread).await.unwrap();
        let second = pool.run(thread).await.unwrap();
        let third = pool.run(thread).await.unwrap();
        assert_eq!((first, first), (second, third));
        let threads = pool.threads();
        assert_eq!((threads.idle.len(), threads.alive), (3, 3));
    }

    #[tokio::test]
    async fn beyond_the_most_threads_jobs_wait_in_line() {
        // One thread at most: the second job waits for the first to finish, on the same thread.
        let pool = Pool::new(1, KEEP_ALIVE);
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let a = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(move || (hold.recv().unwrap(), thread()).1).await }
        });
        let b = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(thread).await }
        });
        until("the second job waits in line", || !pool.threads().waiting.is_empty()).await;
        release.send(()).unwrap();
        assert_eq!(a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
        assert_eq!(pool.threads().alive, 1);
    }

    #[tokio::test]
    async fn an_idle_thread_ends_after_its_keep_alive_and_a_new_one_takes_the_next_job() {
        let pool = Pool::new(8, Duration::from_millis(1));
        let first = pool.run(thread).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), pool.retired.notified()).await.expect("the thread ended");
        {
            let threads = pool.threads();
            assert_eq!((threads.idle.len(), threads.alive), (0, 0));
        }
        assert_ne!(pool.run(thread).await.unwrap(), first);
    }

    #[tokio::test]
    async fn a_panic_comes_back_as_an_error_and_the_pool_goes_on() {
        let pool = Pool::new(8, KEEP_ALIVE);
        let e = pool.run(|| -> u32 { panic!("the script broke") }).await.unwrap_err();
        assert_eq!(e, super::PoolError::Panicked("the script broke".into()));
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        assert_eq!(pool.threads().idle.len(), 1);
    }

    #[tokio::test]
    async fn a_job_runs_in_its_callers_runtime() {
        let pool = Pool::new(8, KEEP_ALIVE);
        let spawned = pool.run(|| Handle::current().block_on(tokio::spawn(async { 5 })));
        assert_eq!(spawned.await.unwrap().unwrap(), 5);
    }

    #[tokio::test]
    async fn a_future_is_blocked_on_in_its_callers_runtime() {
        let spawned = run_async(|| async { tokio::spawn(async { 5 }).await.unwrap() });
        assert_eq!(spawned.await.unwrap(), 5);
    }

    /// Spawns on the runtime when dropped, as a store's lock guard does.
    struct SpawnsOnDrop(tokio::sync::mpsc::UnboundedSender<()>);

    impl Drop for SpawnsOnDrop {
        fn drop(&mut self) {
            let told = self.0.clone();
            tokio::spawn(async move { told.send(()).unwrap() });
        }
    }

    #[tokio::test]
    async fn the_result_of_a_caller_that_left_is_dropped_in_the_runtime() {
        let pool = Pool::new(8, KEEP_ALIVE);
        let (told, mut dropped) = tokio::sync::mpsc::unbounded_channel();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let job = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(move || (hold.recv().unwrap(), SpawnsOnDrop(told)).1).await.map(drop) }
        });
        until("the job is handed out", || pool.running.load(Ordering::SeqCst) == 1).await;
        job.abort();
        assert!(job.await.unwrap_err().is_cancelled());
        release.send(()).unwrap();
        dropped.recv().await.expect("the drop spawned its task");
        // And the thread goes on.
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn settled_waits_for_the_jobs_under_way() {
        let pool = Pool::new(8, KEEP_ALIVE);
        pool.settled().await;
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let job = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(move || hold.recv().unwrap()).await }
        });
        until("the job is handed out", || pool.running.load(Ordering::SeqCst) == 1).await;
        let settled = tokio::spawn({
            let pool = pool.clone();
            async move { pool.settled().await }
        });
        tokio::task::yield_now().await;
        assert!(!settled.is_finished());
        release.send(()).unwrap();
        settled.await.unwrap();
        job.await.unwrap().unwrap();
    }
}
