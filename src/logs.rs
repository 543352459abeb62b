//! The process's log: JSON lines or text (`--log-format`, JSON by default when stderr is not a
//! terminal, so files and journald get no colour codes), written by a thread of its own. A
//! request never waits on the log: when the writer falls behind, lines past its queue are dropped
//! and counted, and the count is a metric.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::metrics::{Exposition, Source};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line: for files, journald and log collectors.
    Json,
    /// Lines for people; coloured only on a terminal.
    Text,
}

/// The target of the access lines: `SHOPCELL_LOG=info,access=off` silences them alone.
pub const ACCESS: &str = "access";

/// Lines the queue holds before new ones are dropped: a few seconds of a busy server's access
/// lines, a few MiB at most.
const QUEUE_LINES: usize = 16_384;

/// Bytes the log thread gathers before a write to stderr: about a hundred access lines.
const WRITE_BYTES: usize = 32 * 1024;

/// The writer's count of dropped lines, once [`init`] has run.
static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Installs the process's logger: `format`, or JSON unless stderr is a terminal; the level from
/// `SHOPCELL_LOG` (default `info`). Keep the guard until exit: dropping it flushes the queue.
pub fn init(format: Option<LogFormat>) -> WorkerGuard {
    let terminal = std::io::stderr().is_terminal();
    let format = format.unwrap_or(if terminal { LogFormat::Text } else { LogFormat::Json });
    // Buffered: the log thread writes what it drained from the queue in one `write(2)` (it
    // flushes whenever the queue is empty), not one per line; a line waits for nothing but that.
    let (writer, guard) = queue(std::io::BufWriter::with_capacity(WRITE_BYTES, std::io::stderr()), QUEUE_LINES);
    let _ = DROPPED.set(writer.error_counter());
    let filter = EnvFilter::try_from_env("SHOPCELL_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).with_ansi(false).try_init(),
        LogFormat::Text => builder.with_ansi(terminal).try_init(),
    };
    guard
}

/// A writer to `out` through a queue of `lines` lines, written out by a thread of its own; past
/// the queue, lines are dropped and counted (`lossy`), never waited for.
fn queue<W: std::io::Write + Send + 'static>(out: W, lines: usize) -> (NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default().lossy(true).buffered_lines_limit(lines).finish(out)
}

/// Log lines dropped because the writer was behind.
pub fn dropped() -> u64 {
    DROPPED.get().map(|c| c.dropped_lines() as u64).unwrap_or(0)
}

/// The dropped-lines counter, in `/metrics`.
pub struct DroppedLines;

impl Source for DroppedLines {
    fn collect(&self, out: &mut Exposition) {
        out.counter(
            "shopcell_log_lines_dropped_total",
            "Log lines dropped because the log writer was behind (no request waits for it).",
            &[],
            dropped(),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::mpsc;

    use super::*;

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
        let (written, lines) = mpsc::channel();
        let (mut log, guard) = queue(Stalled(released, written), 4);
        // The writer thread takes one line and stalls on it; four more fill the queue; the
        // rest are dropped at once (were they waited for, this would never return).
        for i in 0..50 {
            log.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        let dropped = log.error_counter().dropped_lines();
        assert!((45..=46).contains(&dropped), "{dropped} dropped");
        for _ in 0..50 {
            let _ = release.send(());
        }
        drop(guard);
        let kept: Vec<String> = lines.try_iter().map(|l| String::from_utf8(l).unwrap()).collect();
        assert_eq!(kept.len() + dropped, 50, "{kept:?}");
        assert_eq!(kept[0], "line 0\n", "the oldest lines are kept, the newest dropped");
    }
}
