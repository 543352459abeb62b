//! The one thread of a process that reads backups: a chunk's rows copied out of redb's pages,
//! laid out in a block and compressed (milliseconds of one core per 4 MiB), at a low CPU
//! priority ([`NICE`]). The writers and requests sharing the machine's cores run first and the
//! backup fills their gaps: a backup trades its own duration (seconds, against a limit of ten
//! and a minute before it lapses) for the writers' rate.
//!
//! It is started by the first snapshot a process opens while none is open and ends when the
//! last snapshot holding it is dropped (its backup ended, failed or lapsed): no thread idles
//! between backups, none is started per chunk. The directory's snapshot and those of the cells
//! in the same process share it, so a backup reads one chunk at a time whatever the roles.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError, Weak, mpsc};

use crate::error::{ApiError, ApiResult};

/// The reader's niceness. Not the lowest (19): at 19 the writers' p99 during a backup rose to
/// 260–580 ms, most likely waiting for the reader's next slice on a redb page-cache lock it
/// held (it came behind every other thread); at 10 it stayed near their p99 alone
/// (benches/README.md "On a thread of its own, at low priority").
pub const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// A handle on the reader thread; the thread ends when the last handle is dropped.
pub struct Reader {
    jobs: mpsc::Sender<Job>,
    #[cfg(test)]
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The reader of this process while any snapshot holds it.
static SHARED: Mutex<Weak<Reader>> = Mutex::new(Weak::new());

impl Reader {
    /// The process's reader, started when none runs.
    pub fn shared() -> ApiResult<Arc<Reader>> {
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reader) = shared.upgrade() {
            return Ok(reader);
        }
        let reader = Arc::new(Reader::start()?);
        *shared = Arc::downgrade(&reader);
        Ok(reader)
    }

    fn start() -> ApiResult<Reader> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let _thread = std::thread::Builder::new()
            .name("backup-reader".into())
            .spawn(move || {
                lower_priority();
                // Until every handle has gone: nothing can send it work any more.
                for job in queue {
                    job();
                }
            })
            .map_err(|e| ApiError::internal(format!("cannot start the backup reader thread: {e}")))?;
        Ok(Reader {
            jobs,
            #[cfg(test)]
            thread: Mutex::new(Some(_thread)),
        })
    }

    /// Runs `work` on the reader thread, after the work handed to it before; its answer, or an
    /// error when it panicked (the thread goes on with the next work).
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> ApiResult<T> + Send + 'static) -> ApiResult<T> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let done = std::panic::catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
                let why = panic.downcast_ref::<&str>().copied().or(panic.downcast_ref::<String>().map(String::as_str));
                Err(ApiError::internal(format!("a backup read failed: {}", why.unwrap_or("panicked"))))
            });
            // A caller that went away (its request dropped) needs no answer.
            let _ = answer.send(done);
        });
        self.jobs.send(job).map_err(|_| ApiError::internal("the backup reader thread has ended"))?;
        answered.await.map_err(|_| ApiError::internal("the backup reader thread ended before answering"))?
    }

    /// The thread itself, to see it end.
    #[cfg(test)]
    pub(crate) fn take_thread(&self) -> Option<std::thread::JoinHandle<()>> {
        self.thread.lock().unwrap().take()
    }
}

/// Lowers the calling thread (alone: Linux keeps a niceness per thread) to [`NICE`]. Raising
/// it needs no privilege; should it fail all the same (a sandbox refusing the call), the
/// backup runs at the process's priority, as it did before, and says so once.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE) != 0
        };
        if failed {
            tracing::warn!(error = %std::io::Error::last_os_error(), "the backup reader could not lower its priority; it runs at the process's");
        }
    }
}

/// Unwinds as a panic would, without the panic hook's report (a backtrace takes seconds).
#[cfg(test)]
pub(crate) fn die(why: &'static str) -> ! {
    std::panic::resume_unwind(Box::new(why))
}

/// Waits for `thread` to end: false when it has not within ten seconds (a thread left
/// running), rather than hanging the test.
#[cfg(test)]
pub(crate) fn ends(thread: std::thread::JoinHandle<()>) -> bool {
    let (ended, ending) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = thread.join();
        let _ = ended.send(());
    });
    ending.recv_timeout(std::time::Duration::from_secs(10)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    /// The niceness of the calling thread.
    fn niceness() -> i32 {
        // SAFETY: as in `lower_priority`.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[tokio::test]
    async fn work_runs_at_low_priority_in_order_and_a_failure_answers_an_error() {
        let reader = Reader::start().unwrap();
        let (caller, before) = (std::thread::current().id(), niceness());
        let (nice, on) = reader.run(move || Ok((niceness(), std::thread::current().id()))).await.unwrap();
        assert_eq!(nice, NICE);
        assert_ne!(on, caller);
        assert_eq!(niceness(), before, "the caller's own thread keeps its priority");

        let refused = reader.run(|| Err::<(), _>(ApiError::msg(Code::BAD_GATEWAY, "cell 2 gone"))).await.unwrap_err();
        assert_eq!((refused.code, refused.message.as_str()), (Code::BAD_GATEWAY, "cell 2 gone"));
        // A read that dies answers (a 500 whose cause is logged) rather than leaving its caller waiting.
        let panicked = reader.run(|| -> ApiResult<()> { die("page 7 unreadable") }).await.unwrap_err();
        assert_eq!(panicked.code, Code::INTERNAL);
        // The same thread goes on.
        assert_eq!(reader.run(|| Ok(std::thread::current().id())).await.unwrap(), on);

        let thread = reader.take_thread().unwrap();
        drop(reader);
        assert!(ends(thread), "the reader ends with its last handle");
    }
}
