//! Delivery without an SMTP server: each message becomes `<dir>/<message-id>.eml`, readable by
//! the service's user only. The file is written aside and renamed into place, so a reader never
//! sees half a message and a second delivery of the same Message-ID replaces the first.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Composed, MailError};
use crate::private_files::{create_private, private_dir, sync_dir};

/// Makes temporary names unique within the process (the pid makes them unique across).
static TEMP: AtomicU64 = AtomicU64::new(0);

pub(super) async fn write(dir: &Path, mail: &Composed) -> Result<(), MailError> {
    let dir = dir.to_path_buf();
    let name = file_name(&mail.message_id);
    let bytes = mail.bytes.clone();
    tokio::task::spawn_blocking(move || write_blocking(&dir, &name, &bytes))
        .await
        .map_err(|_| MailError::Retry("writing the mail file was interrupted".into()))?
        .map_err(|e| MailError::Retry(format!("cannot write the mail file: {}", e.kind())))
}

fn write_blocking(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    // Mail holds reset links: the directory is private even if it was made by hand before.
    private_dir(dir)?;
    let temp = dir.join(format!(".{name}.{}-{}.tmp", std::process::id(), TEMP.fetch_add(1, Ordering::Relaxed)));
    let written = create_private(&temp, bytes).and_then(|()| {
        std::fs::rename(&temp, dir.join(name))?;
        // The rename itself is durable once the directory is synced.
        sync_dir(dir)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
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
