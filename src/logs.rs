//! The process's log: JSON lines or text (`--log-format`, JSON by default when stderr is not a
//! terminal, so files and journald get no colour codes), gathered in memory and written out by a
//! thread of its own every few milliseconds ([`batched`]). A request never waits on the log:
//! when the destination falls behind, lines past the buffer are dropped and counted, and the
//! count is a metric.

pub mod access;
mod batched;

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

pub use batched::Flusher;
use batched::{Batched, batched};

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

/// Bytes of lines gathered between two writes before new ones are dropped: seconds of a busy
/// server's access lines.
const BUFFER_BYTES: usize = 8 << 20;

/// The writer, once [`init`] has run: its count of dropped lines, and the access lines written
/// to it directly ([`access`]).
static WRITER: OnceLock<Batched> = OnceLock::new();

/// The format chosen at [`init`].
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Installs the process's logger: `format`, or JSON unless stderr is a terminal; the level from
/// `SHOPCELL_LOG` (default `info`). Keep the flusher until exit: dropping it writes out the
/// lines still gathered.
pub fn init(format: Option<LogFormat>) -> Flusher {
    let terminal = std::io::stderr().is_terminal();
    let format = format.unwrap_or(if terminal { LogFormat::Text } else { LogFormat::Json });
    let (writer, flusher) = batched(std::io::stderr(), BUFFER_BYTES);
    let _ = WRITER.set(writer.clone());
    let _ = FORMAT.set(format);
    let filter = EnvFilter::try_from_env("SHOPCELL_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).with_ansi(false).try_init(),
        LogFormat::Text => builder.with_ansi(terminal).try_init(),
    };
    flusher
}

/// Log lines dropped because the writer was behind.
pub fn dropped() -> u64 {
    WRITER.get().map(Batched::dropped).unwrap_or(0)
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
