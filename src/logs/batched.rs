//! The log's writer: lines are appended to a buffer in memory, and a thread of its own writes the
//! buffer out every few milliseconds, whatever gathered since, in one write.
//!
//! A request never waits on the log and never wakes another thread: the line is copied under a
//! lock held for that copy alone (a queue whose reader sleeps until a line arrives costs every
//! request a wake-up of that thread, a system call and a context switch on a small machine).
//! When the destination falls behind, lines past the buffer's bound are dropped and counted,
//! never waited for. Dropping the [`Flusher`] writes out what is left and waits for it.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the gathered lines are written out: what a line may wait to appear.
const EVERY: Duration = Duration::from_millis(20);

struct Shared {
    lines: Mutex<Gathered>,
    /// Wakes the writer thread early: at the end.
    stop: Condvar,
    dropped: AtomicU64,
    /// Bytes the buffer holds at most.
    bound: usize,
}

#[derive(Default)]
struct Gathered {
    bytes: Vec<u8>,
    stopping: bool,
}

/// What the logger writes through: cheap to clone, one per event.
#[derive(Clone)]
pub struct Batched(Arc<Shared>);

/// The writer thread; dropping it writes out what is left.
pub struct Flusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A writer to `out` gathering at most `bound` bytes between writes, and its thread.
pub fn batched<W: Write + Send + 'static>(mut out: W, bound: usize) -> (Batched, Flusher) {
    let shared = Arc::new(Shared {
        lines: Mutex::new(Gathered { bytes: Vec::with_capacity(bound.min(1 << 20)), stopping: false }),
        stop: Condvar::new(),
        dropped: AtomicU64::new(0),
        bound,
    });
    let writer = shared.clone();
    let thread = std::thread::Builder::new().name("log-writer".into()).spawn(move || {
        let mut spare = Vec::new();
        loop {
            let stopping = {
                let Ok(gathered) = writer.lines.lock() else { return };
                let Ok((mut gathered, _)) = writer.stop.wait_timeout_while(gathered, EVERY, |g| !g.stopping) else { return };
                std::mem::swap(&mut gathered.bytes, &mut spare);
                gathered.stopping
            };
            if !spare.is_empty() {
                // A destination that fails (a closed pipe) loses these lines; the next try may work.
                let _ = out.write_all(&spare).and_then(|()| out.flush());
            }
            settle(&mut spare);
            if stopping {
                return;
            }
        }
    });
    (Batched(shared.clone()), Flusher { shared, thread: thread.ok() })
}

/// Room a buffer keeps when little was written: a few milliseconds of a quiet server's lines.
const KEPT: usize = 64 << 10;

/// Empties a buffer just written out, keeping room for about as much as it held (the two
/// buffers take turns, so under steady load neither grows again) and giving back what a burst
/// left beyond that once it has passed.
fn settle(buffer: &mut Vec<u8>) {
    let used = buffer.len();
    buffer.clear();
    buffer.shrink_to(used.saturating_mul(2).max(KEPT));
}

impl Batched {
    /// Takes one whole line, or drops and counts it when the buffer is full.
    pub fn push(&self, line: &[u8]) {
        let Ok(mut gathered) = self.0.lines.lock() else { return };
        if gathered.bytes.len() + line.len() > self.0.bound {
            self.0.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            gathered.bytes.extend_from_slice(line);
        }
    }

    /// Lines dropped because the destination was behind.
    pub fn dropped(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }
}

impl Write for Batched {
    /// Takes one line (the logger writes each event whole), or drops it when the buffer is full.
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        self.push(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Batched {
    type Writer = Batched;

    fn make_writer(&'a self) -> Batched {
        self.clone()
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if let Ok(mut gathered) = self.shared.lines.lock() {
            gathered.stopping = true;
        }
        self.shared.stop.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn a_buffer_keeps_room_for_steady_load_and_gives_back_a_burst() {
        let mut b = Vec::new();
        b.resize(3 << 20, b'x');
        let burst = b.capacity();
        settle(&mut b);
        assert!(b.is_empty());
        assert_eq!(b.capacity(), burst, "room for as much again is kept while the load lasts");
        // The next turn wrote little: the burst's room goes back.
        b.extend_from_slice(b"one line\n");
        settle(&mut b);
        assert!(b.is_empty() && b.capacity() <= KEPT, "capacity {}", b.capacity());
        assert!(b.capacity() > 0);
    }

    /// A log destination that takes nothing until told to: a stalled disk or pipe.
    struct Stalled(mpsc::Receiver<()>, mpsc::Sender<Vec<u8>>);

    impl Write for Stalled {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.recv();
            let _ = self.1.send(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_destination_drops_and_counts_lines_and_never_blocks_the_caller() {
        let (release, released) = mpsc::channel();
        let (written, writes) = mpsc::channel();
        // Room for four lines of eight bytes.
        let (mut log, flusher) = batched(Stalled(released, written), 32);
        log.write_all(b"line 00\n").unwrap();
        // The writer thread takes that line and stalls writing it out.
        while log.0.lines.lock().unwrap().bytes.len() == 8 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Four more fill the buffer; the rest are dropped at once (were they waited for, this
        // would never return).
        for i in 1..50 {
            log.write_all(format!("line {i:02}\n").as_bytes()).unwrap();
        }
        assert_eq!(log.dropped(), 45);
        for _ in 0..10 {
            let _ = release.send(());
        }
        drop(flusher);
        let kept: String = writes.try_iter().map(|w| String::from_utf8(w).unwrap()).collect();
        assert_eq!(kept, "line 00\nline 01\nline 02\nline 03\nline 04\n", "the oldest lines are kept, the newest dropped");
    }

    #[test]
    fn lines_are_written_in_order_and_the_last_ones_when_the_flusher_goes() {
        #[derive(Clone, Default)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let out = Shared::default();
        let (mut log, flusher) = batched(out.clone(), 1 << 20);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let mut log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        log.write_all(format!("{t} {i}\n").as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        log.write_all(b"last\n").unwrap();
        drop(flusher);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 4001);
        assert_eq!(text.lines().last(), Some("last"), "written out when the flusher goes");
        for t in 0..4 {
            let mine: Vec<usize> = text.lines().filter_map(|l| l.strip_prefix(&format!("{t} "))?.parse().ok()).collect();
            assert_eq!(mine, (0..1000).collect::<Vec<_>>(), "each writer's lines in its order");
        }
        assert_eq!(log.dropped(), 0);
    }
}
