//! One lifecycle for quietwatt's measuring threads: spawn a named thread whose
//! setup (pinning, SCHED_FIFO, a timer) reports ready-or-error through a handshake
//! before its loop runs, then join it, with a panic of either part raised again
//! at the join. Stopping stays the body's own: each loop waits on something else
//! (a timerfd, a condvar), which only its owner knows how to wake.

use std::any::Any;
use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{JoinHandle, Scope, ScopedJoinHandle, Thread};

/// What a worker's setup reports through: its value `R` once it is ready to run,
/// or the error `E` that keeps it from running. Dropped unreported (a panic in
/// setup), the waiting side sees [`NotReady::Ended`].
#[must_use = "the spawner waits until the worker reports"]
pub struct Ready<R, E>(SyncSender<Result<R, E>>);

impl<R, E> std::fmt::Debug for Ready<R, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready").finish_non_exhaustive()
    }
}

impl<R, E> Ready<R, E> {
    /// Reports that setup went well: the spawner's wait returns `value`.
    pub fn ok(self, value: R) {
        self.report(Ok(value));
    }

    /// Reports that setup failed: the body should return without running.
    pub fn fail(self, error: E) {
        self.report(Err(error));
    }

    /// Reports `result` (a spawner that stopped waiting is no error here).
    pub fn report(self, result: Result<R, E>) {
        let _ = self.0.send(result);
    }
}

/// Why a worker did not become ready.
#[derive(Debug)]
pub enum NotReady<E> {
    /// Its setup reported this error.
    Failed(E),
    /// It ended without reporting (a panic in setup: its join raises it again).
    Ended,
}

/// The spawner's side of the handshake.
#[must_use = "the body runs before its setup is known to have succeeded otherwise"]
pub struct Handshake<R, E>(Receiver<Result<R, E>>);

impl<R, E> std::fmt::Debug for Handshake<R, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake").finish_non_exhaustive()
    }
}

impl<R, E> Handshake<R, E> {
    /// Waits until the worker's setup reports.
    pub fn wait(self) -> Result<R, NotReady<E>> {
        match self.0.recv() {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(NotReady::Failed(e)),
            Err(_) => Err(NotReady::Ended),
        }
    }
}

fn handshake<R, E>() -> (Ready<R, E>, Handshake<R, E>) {
    let (tx, rx) = sync_channel(1);
    (Ready(tx), Handshake(rx))
}

fn reraise<T>(r: Result<T, Box<dyn Any + Send>>) -> T {
    r.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// A thread's join handle, scoped or not: what [`Joining`] needs of it.
trait Handle {
    type Output;
    fn thread(&self) -> &Thread;
    fn join(self) -> std::thread::Result<Self::Output>;
}

impl<T> Handle for JoinHandle<T> {
    type Output = T;
    fn thread(&self) -> &Thread {
        JoinHandle::thread(self)
    }
    fn join(self) -> std::thread::Result<T> {
        JoinHandle::join(self)
    }
}

impl<T> Handle for ScopedJoinHandle<'_, T> {
    type Output = T;
    fn thread(&self) -> &Thread {
        ScopedJoinHandle::thread(self)
    }
    fn join(self) -> std::thread::Result<T> {
        ScopedJoinHandle::join(self)
    }
}

/// A handle joined once: by `try_join`, or on drop (a panic is then dropped).
/// What [`Worker`] and [`ScopedWorker`] share.
struct Joining<H: Handle>(Option<H>);

impl<H: Handle> Joining<H> {
    fn thread(&self) -> &Thread {
        self.0
            .as_ref()
            .expect("joined only by join or drop")
            .thread()
    }

    fn name(&self) -> Option<&str> {
        self.0.as_ref().and_then(|h| h.thread().name())
    }

    fn try_join(mut self) -> std::thread::Result<H::Output> {
        self.0.take().expect("joined once").join()
    }
}

impl<H: Handle> Drop for Joining<H> {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// A named thread that outlives its spawner's stack frame. Dropping it joins the
/// thread (a panic in it is then dropped, not raised: [`Worker::join`] raises it).
pub struct Worker<T> {
    handle: Joining<JoinHandle<T>>,
}

impl<T> std::fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.handle.name())
            .finish_non_exhaustive()
    }
}

/// Why [`Worker::start`] returned no running worker.
#[derive(Debug)]
pub enum StartError<E> {
    /// The thread could not be created.
    Spawn(io::Error),
    /// Its setup reported this error; the thread has been joined.
    Setup(E),
}

impl<T: Send + 'static> Worker<T> {
    /// Spawns `body` on a thread named `name`. The body runs its setup first and
    /// reports through its [`Ready`]; the spawner waits on the [`Handshake`].
    pub fn spawn<R, E, F>(name: &str, body: F) -> io::Result<(Worker<T>, Handshake<R, E>)>
    where
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Ready<R, E>) -> T + Send + 'static,
    {
        let (ready, hs) = handshake();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(ready))?;
        Ok((
            Worker {
                handle: Joining(Some(handle)),
            },
            hs,
        ))
    }

    /// [`Worker::spawn`], then waits until the body is ready: its report, or the
    /// setup's error once the thread is joined. A panic in setup is raised here.
    pub fn start<R, E, F>(name: &str, body: F) -> Result<(Worker<T>, R), StartError<E>>
    where
        R: Send + 'static,
        E: Send + 'static,
        F: FnOnce(Ready<R, E>) -> T + Send + 'static,
    {
        let (w, hs) = Worker::spawn(name, body).map_err(StartError::Spawn)?;
        match hs.wait() {
            Ok(v) => Ok((w, v)),
            Err(NotReady::Failed(e)) => {
                w.join();
                Err(StartError::Setup(e))
            }
            Err(NotReady::Ended) => {
                w.join();
                unreachable!("a worker that ended without reporting panicked")
            }
        }
    }
}

impl<T> Worker<T> {
    /// The thread, to unpark it.
    pub fn thread(&self) -> &Thread {
        self.handle.thread()
    }

    /// Waits for the body's end: its result, or its panic as the error, for a
    /// caller that must not raise it (a `Drop`) or must join others first.
    pub fn try_join(self) -> std::thread::Result<T> {
        self.handle.try_join()
    }

    /// Waits for the body's end and returns its result; a panic in it (in setup
    /// or after) is raised again here.
    pub fn join(self) -> T {
        reraise(self.try_join())
    }
}

/// A named thread of a [`std::thread::scope`]: it may borrow from the spawner's
/// frame. Dropping it joins the thread, as [`Worker`] does.
pub struct ScopedWorker<'scope, T> {
    handle: Joining<ScopedJoinHandle<'scope, T>>,
}

impl<T> std::fmt::Debug for ScopedWorker<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedWorker")
            .field("name", &self.handle.name())
            .finish_non_exhaustive()
    }
}

impl<'scope, T: Send + 'scope> ScopedWorker<'scope, T> {
    /// [`Worker::spawn`] in `scope`.
    pub fn spawn<'env, R, E, F>(
        scope: &'scope Scope<'scope, 'env>,
        name: &str,
        body: F,
    ) -> io::Result<(ScopedWorker<'scope, T>, Handshake<R, E>)>
    where
        R: Send + 'scope,
        E: Send + 'scope,
        F: FnOnce(Ready<R, E>) -> T + Send + 'scope,
    {
        let (ready, hs) = handshake();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, move || body(ready))?;
        Ok((
            ScopedWorker {
                handle: Joining(Some(handle)),
            },
            hs,
        ))
    }

    /// The thread, to unpark it.
    pub fn thread(&self) -> &Thread {
        self.handle.thread()
    }

    /// Waits for the body's end: its result, or its panic as the error, for a
    /// caller that must join other threads before raising it.
    pub fn try_join(self) -> std::thread::Result<T> {
        self.handle.try_join()
    }

    /// Waits for the body's end and returns its result; a panic in it is raised
    /// again here.
    pub fn join(self) -> T {
        reraise(self.try_join())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn panic_message(p: Box<dyn Any + Send>) -> String {
        p.downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    }

    #[test]
    fn a_setup_error_is_reported_after_the_thread_is_joined() {
        let e = Worker::start("qw-test", |ready: Ready<(), &str>| ready.fail("no timer"))
            .expect_err("the setup failed");
        assert!(matches!(e, StartError::Setup("no timer")));
    }

    #[test]
    fn a_ready_worker_runs_until_stopped_and_returns_its_result() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let (w, name) = Worker::start("qw-test-ready", move |ready: Ready<String, ()>| {
            ready.ok(std::thread::current().name().unwrap_or("").to_string());
            // At least one turn, however early the stop comes: it runs until stopped.
            let mut turns = 0u64;
            loop {
                turns += 1;
                if s.load(Ordering::Acquire) {
                    break turns;
                }
                std::thread::park();
            }
        })
        .unwrap_or_else(|_| panic!("started"));
        assert_eq!(name, "qw-test-ready");
        stop.store(true, Ordering::Release);
        w.thread().unpark();
        assert!(w.join() >= 1);
    }

    #[test]
    fn a_panic_in_setup_surfaces_at_join() {
        let (w, hs) = Worker::spawn("qw-test", |_ready: Ready<(), ()>| -> u32 {
            panic!("setup broke")
        })
        .expect("spawned");
        assert!(matches!(hs.wait(), Err(NotReady::Ended)));
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.join()))
            .expect_err("the join raises the panic");
        assert_eq!(panic_message(p), "setup broke");
    }

    #[test]
    fn a_panic_in_the_body_surfaces_at_join() {
        std::thread::scope(|s| {
            let (w, hs) = ScopedWorker::spawn(s, "qw-test", |ready: Ready<(), ()>| -> u32 {
                ready.ok(());
                panic!("body broke")
            })
            .expect("spawned");
            assert!(hs.wait().is_ok());
            let p = w.try_join().expect_err("the body panicked");
            assert_eq!(panic_message(p), "body broke");
        });
    }

    #[test]
    fn dropping_a_worker_joins_it() {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let (w, ()) = Worker::start("qw-test", move |ready: Ready<(), ()>| {
            ready.ok(());
            std::thread::sleep(std::time::Duration::from_millis(20));
            d.store(true, Ordering::SeqCst);
        })
        .unwrap_or_else(|_| panic!("started"));
        drop(w);
        assert!(done.load(Ordering::SeqCst), "the drop waited for the body");
    }
}
