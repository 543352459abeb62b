//! Delivery without an SMTP server: each message becomes `<dir>/<message-id>.eml`, readable by
//! the service's user only. The file is written aside and renamed into place, so a reader never
//! sees half a message and a second delivery of the same Message-ID replaces the first.
//!
//! Deliveries that arrive together are made durable together, as the writer commits its jobs:
//! the first to arrive writes, on a blocking thread, every message waiting (each aside), syncs
//! them at once, renames them into place and syncs the directory once, then takes whatever
//! arrived meanwhile. A delivery is answered once its message is durable, so a batch of any size
//! costs two syncs where each message alone would cost two of its own: under a stream of orders,
//! mail no longer competes with the database for the disk's flushes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use super::{Composed, MailError};
use crate::private_files::{create_private_file, private_dir, sync_dir};

/// Makes temporary names unique within the process (the pid makes them unique across).
static TEMP: AtomicU64 = AtomicU64::new(0);

/// The `.eml` directory and the messages waiting to be written to it.
pub(super) struct Mailbox {
    dir: PathBuf,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// A blocking thread is writing: what arrives joins its next batch.
    writing: bool,
}

struct Waiting {
    name: String,
    bytes: Vec<u8>,
    done: oneshot::Sender<std::io::Result<()>>,
}

impl Mailbox {
    pub(super) fn new(dir: PathBuf) -> Arc<Mailbox> {
        Arc::new(Mailbox { dir, queue: Mutex::new(Queue::default()) })
    }

    /// Writes `mail` as `<dir>/<message-id>.eml`; answers once the file is durable.
    pub(super) async fn write(self: &Arc<Self>, mail: &Composed) -> Result<(), MailError> {
        let (done, written) = oneshot::channel();
        let lead = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.waiting.push(Waiting { name: file_name(&mail.message_id), bytes: mail.bytes.clone(), done });
            !std::mem::replace(&mut queue.writing, true)
        };
        if lead {
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.drain());
        }
        written
            .await
            .map_err(|_| MailError::Retry("writing the mail file was interrupted".into()))?
            .map_err(|e| MailError::Retry(format!("cannot write the mail file: {}", e.kind())))
    }

    /// Writes batch after batch until none waits.
    fn drain(&self) {
        // Should this thread end early (a panic), the next delivery starts another.
        let _writing = Writing(self);
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.waiting.is_empty() {
                    queue.writing = false;
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            let results = write_batch(&self.dir, &batch);
            for (w, result) in batch.into_iter().zip(results) {
                let _ = w.done.send(result);
            }
        }
    }
}

/// Clears [`Queue::writing`] when the draining thread ends, however it ends.
struct Writing<'a>(&'a Mailbox);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.queue.lock().unwrap_or_else(PoisonError::into_inner).writing = false;
    }
}

/// Writes each message aside, makes them durable, renames them into place and makes the names
/// durable: one result per message, in order. A message whose own file failed fails alone; a
/// failed sync fails every message it covered.
fn write_batch(dir: &Path, batch: &[Waiting]) -> Vec<std::io::Result<()>> {
    // Mail holds reset links: the directory is private even if it was made by hand before.
    if let Err(e) = private_dir(dir) {
        return batch.iter().map(|_| Err(again(&e))).collect();
    }
    let aside: Vec<std::io::Result<(PathBuf, std::fs::File)>> = batch
        .iter()
        .map(|w| {
            let temp = dir.join(format!(".{}.{}-{}.tmp", w.name, std::process::id(), TEMP.fetch_add(1, Ordering::Relaxed)));
            let mut file = create_private_file(&temp)?;
            if let Err(e) = std::io::Write::write_all(&mut file, &w.bytes) {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
            Ok((temp, file))
        })
        .collect();
    let synced = sync_files(aside.iter().filter_map(|a| a.as_ref().ok()).map(|(_, f)| f));
    let mut results: Vec<std::io::Result<()>> = batch
        .iter()
        .zip(aside)
        .map(|(w, a)| {
            let (temp, _) = a?;
            let placed = match &synced {
                Ok(()) => std::fs::rename(&temp, dir.join(&w.name)),
                Err(e) => Err(again(e)),
            };
            if placed.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            placed
        })
        .collect();
    // The renames themselves are durable once the directory is synced.
    if results.iter().any(Result::is_ok)
        && let Err(e) = sync_dir(dir)
    {
        for r in results.iter_mut().filter(|r| r.is_ok()) {
            *r = Err(again(&e));
        }
    }
    results
}

/// The error `e` once more, for each message it failed (`io::Error` is not `Clone`).
fn again(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

/// Makes the contents of `files` durable: on Linux one `syncfs` of their file system (one
/// flush of the disk and the journal for the whole batch), elsewhere a sync of each.
fn sync_files<'a>(mut files: impl Iterator<Item = &'a std::fs::File>) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let Some(first) = files.next() else { return Ok(()) };
        // SAFETY: `first` is an open file for the whole call; syncfs reads nothing else.
        if unsafe { libc::syncfs(first.as_raw_fd()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    files.try_for_each(std::fs::File::sync_all)
}

/// `<id@host>` → `id@host.eml`: letters, digits, `.`, `@` and `-` kept, any other byte as `_xx`
/// (so two ids never share a file), a leading `.` escaped too (no hidden files). An id whose
/// name would be empty or too long for a file system is named by its SHA-256 instead.
pub(super) fn file_name(message_id: &str) -> String {
    let id = message_id.trim_start_matches('<').trim_end_matches('>');
    let mut name = String::with_capacity(id.len() + 4);
    for (i, b) in id.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'@' || b == b'-' || (b == b'.' && i > 0) {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("_{b:02x}"));
        }
    }
    if name.is_empty() || name.len() > 200 {
        let digest = ring::digest::digest(&ring::digest::SHA256, message_id.as_bytes());
        name = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    }
    name.push_str(".eml");
    name
}
