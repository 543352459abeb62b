//! Warming after a restart: the stores whose product lists were held when the cell closed are
//! built again in the background, the most recently read first, so their first list after the
//! restart is answered from memory. Readiness does not wait for it.
//!
//! The list is `<cell dir>/hot-stores`: store ids, 16 bytes each. It is a hint, not data: a
//! missing or damaged file warms nothing, a store since moved away is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;

/// Stores warmed at most: beyond these, the budget would be spent on stores nobody asked for yet.
const WARM_MAX: usize = 100;

fn hint_path(dir: &Path) -> PathBuf {
    dir.join("hot-stores")
}

/// The stores the hint names, in its order.
pub(super) fn read_hint(dir: &Path) -> Vec<Uuid> {
    let bytes = std::fs::read(hint_path(dir)).unwrap_or_default();
    bytes.chunks_exact(16).filter_map(|c| Uuid::from_slice(c).ok()).take(WARM_MAX).collect()
}

impl Cell {
    /// Writes the hint: the stores whose lists are held, the most recently read first.
    pub(super) fn save_hottest(&self) {
        let hot = self.writer.orders.hottest(WARM_MAX);
        let bytes: Vec<u8> = hot.iter().flat_map(|id| *id.as_bytes()).collect();
        let path = hint_path(&self.dir);
        let tmp = path.with_extension("tmp");
        // Written aside and renamed, so a crash leaves the old hint or the new one.
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path)) {
            tracing::warn!(cell = %self.name, error = %e, "could not save the stores to warm after a restart");
        }
    }

    /// Builds, one at a time in the background, the lists of the stores held when the cell last
    /// closed; stops early when the lists' share is mostly used.
    pub fn warm(self: &Arc<Self>) {
        let stores = std::mem::take(&mut *self.warm_hint.lock().unwrap_or_else(|e| e.into_inner()));
        // Outside a runtime (a tool opening the cell) there is nobody to serve: nothing to warm.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if stores.is_empty() {
            return;
        }
        let cell = self.clone();
        runtime.spawn(async move {
            let started = std::time::Instant::now();
            let mut warmed = 0;
            for store in stores {
                let lists = cell.writer.orders.meter.stats();
                if lists.bytes >= lists.budget / 10 * 8 {
                    break;
                }
                if !cell.holds(store) {
                    continue;
                }
                match cell.warm_product_lists(store).await {
                    Ok(()) => warmed += 1,
                    Err(e) => tracing::warn!(cell = %cell.name, %store, error = %e, "warming a store's lists failed"),
                }
            }
            tracing::info!(cell = %cell.name, stores = warmed, ms = started.elapsed().as_millis() as u64, "lists warmed");
        });
    }
}
