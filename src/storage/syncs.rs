//! Group commit across batches: the writer's commit hands its fsync to a thread of its own and
//! runs the next batch while the disk works; the first batch's answers wait for that fsync.
//!
//! A database file is opened through [`SyncedFile`], redb's file backend with one change: on
//! the writer thread, inside [`Syncs::deferring`], a sync is only requested (the sync thread
//! makes it) and the commit returns at once. Everything else keeps redb's order of work on the
//! file: a write or a change of length waits until every requested sync has finished, so the
//! disk receives exactly what it would with inline syncs (batch N's pages and header, their
//! fsync, then batch N+1's), and crash recovery sees nothing new. What moves is the CPU: the next
//! batch's jobs run during the fsync instead of after it.
//!
//! What this changes for readers: a batch's rows are readable from its commit, a fraction of a
//! millisecond before they are on disk; its callers are answered only after. A power cut in that
//! window (not a killed process: the kernel holds the pages) can take back a write another
//! request has read, never one that was answered. A sync that fails leaves the file refusing
//! every later write (redb's view of what is durable is no longer true): the waiting batches are
//! answered with the error and the process needs a restart, which recovers the last durable
//! commit. Retrying an fsync after a failure is not safe (the kernel may have dropped the pages).

use std::fs::File;
use std::io;
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

use crate::metrics::Histogram;
use crate::storage::mapped::MappedReads;

/// Called once the syncs it waited for have finished, with the error if one failed.
pub type Waiter = Box<dyn FnOnce(Result<(), String>) + Send>;

/// The syncs of one database file: requested by its writer's commits, made by one thread.
pub struct Syncs {
    state: Mutex<State>,
    changed: Condvar,
    /// How long each fsync took, in microseconds.
    pub durations: Histogram,
    /// The sync thread, joined when the file closes: it holds a handle of the file, and with it
    /// the file's lock, which a reopening in this process must find released.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    /// Syncs requested so far; each commit's is its number.
    requested: u64,
    /// Every sync up to this number has finished.
    done: u64,
    /// Set by a failed sync, for good.
    failed: Option<String>,
    /// The thread whose syncs are deferred (the writer, inside [`Syncs::deferring`]).
    deferring: Option<ThreadId>,
    /// Waiters by the sync they wait for, in request order.
    waiting: Vec<(u64, Waiter)>,
    /// The file is closing: the thread ends once nothing is requested.
    closing: bool,
}

impl Syncs {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `commit` with this thread's syncs deferred; answers its result and the number of
    /// the last sync it requested, to hand to [`Syncs::after`].
    pub fn deferring<T>(&self, commit: impl FnOnce() -> T) -> (T, u64) {
        self.lock().deferring = Some(std::thread::current().id());
        let out = commit();
        let mut state = self.lock();
        state.deferring = None;
        (out, state.requested)
    }

    /// Calls `waiter` once sync `ticket` has finished: at once, on this thread, if it has.
    pub fn after(&self, ticket: u64, waiter: Waiter) {
        let mut state = self.lock();
        if let Some(e) = &state.failed {
            let e = e.clone();
            drop(state);
            return waiter(Err(e));
        }
        if state.done >= ticket {
            drop(state);
            return waiter(Ok(()));
        }
        state.waiting.push((ticket, waiter));
    }

    /// A sync of the file: on the deferring thread only requested; on any other thread made by
    /// `inline` (its own fsync covers every earlier write) once the requested ones have finished.
    fn sync(&self, inline: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut state = self.lock();
        if let Some(e) = &state.failed {
            return Err(io::Error::other(format!("an earlier fsync failed: {e}")));
        }
        if state.deferring == Some(std::thread::current().id()) {
            state.requested += 1;
            self.changed.notify_all();
            return Ok(());
        }
        drop(state);
        self.settle()?;
        inline()
    }

    /// Waits until no requested sync is outstanding; the failure, if one failed.
    fn settle(&self) -> io::Result<()> {
        let mut state = self.lock();
        while state.done < state.requested && state.failed.is_none() {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        match &state.failed {
            Some(e) => Err(io::Error::other(format!("an earlier fsync failed: {e}"))),
            None => Ok(()),
        }
    }

    /// Starts the sync thread (named after `name`), which calls `sync` for each request.
    fn start(name: &str, sync: impl FnMut() -> io::Result<()> + Send + 'static) -> io::Result<Arc<Syncs>> {
        let syncs = Arc::new(Syncs {
            state: Mutex::default(),
            changed: Condvar::new(),
            durations: Histogram::seconds(),
            thread: Mutex::default(),
        });
        let theirs = syncs.clone();
        let thread = std::thread::Builder::new().name(format!("fsync-{name}")).spawn(move || theirs.run(sync))?;
        *syncs.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        Ok(syncs)
    }

    /// Ends the sync thread once the requested syncs are made; the failure, if one failed.
    fn close(&self) -> io::Result<()> {
        let settled = self.settle();
        self.lock().closing = true;
        self.changed.notify_all();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
        settled
    }

    /// The sync thread's body: makes each requested sync, then answers its waiters.
    fn run(&self, mut sync: impl FnMut() -> io::Result<()>) {
        let mut state = self.lock();
        loop {
            while state.done == state.requested && !state.closing {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.done == state.requested {
                return; // closing, nothing left to sync
            }
            let target = state.requested;
            drop(state);
            let started = std::time::Instant::now();
            let result = sync();
            self.durations.observe(started.elapsed().as_micros() as u64);
            state = self.lock();
            let ready: Vec<Waiter> = match result {
                Ok(()) => {
                    state.done = target;
                    let (ready, later) = std::mem::take(&mut state.waiting).into_iter().partition(|(t, _)| *t <= target);
                    state.waiting = later;
                    ready.into_iter().map(|(_, w)| w).collect()
                }
                Err(e) => {
                    tracing::error!(error = %e, "fsync of a database failed: it refuses writes until the process restarts");
                    state.failed = Some(e.to_string());
                    std::mem::take(&mut state.waiting).into_iter().map(|(_, w)| w).collect()
                }
            };
            let failed = state.failed.clone();
            self.changed.notify_all();
            drop(state);
            for w in ready {
                w(failed.clone().map_or(Ok(()), Err));
            }
            if failed.is_some() {
                return; // the file takes no more syncs
            }
            state = self.lock();
        }
    }
}

/// redb's file backend whose syncs the writer may defer (see the module's comment).
#[derive(Debug)]
pub struct SyncedFile {
    inner: FileBackend,
    syncs: Arc<Syncs>,
    /// Reads served from a mapping of the file, not `pread` (see `storage::mapped`).
    mapped: MappedReads,
}

impl std::fmt::Debug for Syncs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncs").finish_non_exhaustive()
    }
}

impl SyncedFile {
    /// Wraps `file`, starting its sync thread (named after `name`).
    pub fn new(file: File, name: &str) -> io::Result<(SyncedFile, Arc<Syncs>)> {
        let syncer = file.try_clone()?;
        let mapped = MappedReads::new(&file, file.metadata()?.len());
        let inner = FileBackend::new(file).map_err(io::Error::other)?;
        let syncs = Syncs::start(name, move || syncer.sync_data())?;
        Ok((SyncedFile { inner, syncs: syncs.clone(), mapped }, syncs))
    }
}

impl StorageBackend for SyncedFile {
    fn len(&self) -> Result<u64, io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        if self.mapped.read(offset, out) {
            return Ok(());
        }
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.syncs.settle()?;
        self.mapped.set_len(len, || self.inner.set_len(len))
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.syncs.sync(|| self.inner.sync_data())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.syncs.settle()?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        let closed = self.syncs.close();
        self.inner.close()?;
        closed
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::storage::tables::COUNTERS;
    use crate::storage::writer::{Budgets, Writer};
    use redb::ReadableDatabase;
    use uuid::Uuid;

    /// A sync thread whose syncs each wait for a go from the test and answer what it sends.
    fn gated() -> (Arc<Syncs>, mpsc::Receiver<()>, mpsc::Sender<io::Result<()>>) {
        let (started, starts) = mpsc::channel();
        let (go, gate) = mpsc::channel::<io::Result<()>>();
        let gate = Mutex::new(gate);
        let syncs = Syncs::start("test", move || {
            let _ = started.send(());
            gate.lock().unwrap().recv().unwrap_or(Ok(()))
        })
        .unwrap();
        (syncs, starts, go)
    }

    #[test]
    fn a_deferred_sync_answers_its_waiters_once_made_and_holds_the_next_write_until_then() {
        let (syncs, starts, go) = gated();
        let (done, ticket) = syncs.deferring(|| syncs.sync(|| panic!("deferred on this thread: never made inline")));
        done.unwrap();
        assert_eq!(ticket, 1);
        let (answered, answers) = mpsc::channel();
        syncs.after(ticket, Box::new(move |r| answered.send(r).unwrap()));
        starts.recv().unwrap();
        // The fsync is under way and not finished: nothing is answered yet.
        assert!(answers.try_recv().is_err(), "answered before its fsync finished");
        // A write (here: its settle) from another thread waits for the fsync.
        let writer = {
            let syncs = syncs.clone();
            std::thread::spawn(move || syncs.settle())
        };
        go.send(Ok(())).unwrap();
        assert_eq!(answers.recv().unwrap(), Ok(()));
        writer.join().unwrap().unwrap();
        // A waiter for a sync already made is answered at once.
        let (answered, answers) = mpsc::channel();
        syncs.after(ticket, Box::new(move |r| answered.send(r).unwrap()));
        assert_eq!(answers.try_recv().unwrap(), Ok(()));
        // Outside `deferring`, a sync is made inline, by the caller.
        let mut inline = false;
        syncs
            .sync(|| {
                inline = true;
                Ok(())
            })
            .unwrap();
        assert!(inline);
        syncs.close().unwrap();
    }

    #[test]
    fn a_failed_sync_fails_its_waiters_and_every_later_write() {
        let (syncs, starts, go) = gated();
        let ((), ticket) = syncs.deferring(|| syncs.sync(|| Ok(())).unwrap());
        let (answered, answers) = mpsc::channel();
        syncs.after(ticket, Box::new(move |r| answered.send(r).unwrap()));
        starts.recv().unwrap();
        go.send(Err(io::Error::other("disk gone"))).unwrap();
        assert_eq!(answers.recv().unwrap(), Err("disk gone".to_string()));
        let later = syncs.settle().unwrap_err();
        assert!(later.to_string().contains("disk gone"), "{later}");
        assert!(syncs.sync(|| Ok(())).is_err(), "a failed file takes no more syncs");
        let (answered, answers) = mpsc::channel();
        syncs.after(ticket + 1, Box::new(move |r| answered.send(r).unwrap()));
        assert!(answers.try_recv().unwrap().is_err());
        assert!(syncs.close().is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_answered_through_deferred_syncs_are_on_disk_and_the_file_reopens_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let key = |n: u64| crate::storage::keys::Key::store(Uuid::from_u128(1)).u64(n).into_vec();
        for round in 0..3u64 {
            let opened = crate::storage::open_with(&path, crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap();
            let db = Arc::new(opened.db);
            let budgets = Budgets::default();
            let (writer, thread) = Writer::start_after(db.clone(), Some(opened.syncs.clone()), "test", budgets, None).unwrap();
            // Concurrent writes: batches whose fsyncs overlap the next batch's work.
            let writes = (0..64u64).map(|i| {
                let (w, k) = (writer.clone(), key(round * 64 + i));
                tokio::spawn(async move { w.write(None, move |tx| tx.put(COUNTERS, &k, &i.to_le_bytes())).await })
            });
            for w in writes.collect::<Vec<_>>() {
                w.await.unwrap().unwrap();
            }
            assert!(opened.syncs.durations.count() >= 1, "the writer's fsyncs went through the sync thread");
            writer.stop();
            thread.join();
            drop(writer);
            drop(db);
            // Reopened in this process straight away: the file's lock went with the sync thread.
            let db = redb::Database::create(&path).unwrap();
            let t = db.begin_read().unwrap().open_table(COUNTERS.def).unwrap();
            for n in 0..(round + 1) * 64 {
                assert!(redb::ReadableTable::get(&t, key(n).as_slice()).unwrap().is_some(), "write {n} lost");
            }
        }
    }
}
