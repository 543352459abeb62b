//! Format 9: a session keeps its last rotation (`Session::rotated`), so tabs refreshing one token
//! together get one pair. Every `sessions` row is rewritten with none: a token spent before the
//! upgrade gets no grace, and presenting it again still ends its session.

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::model::Session;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::SESSIONS;

/// A `sessions` row as formats 1 to 8 wrote it.
#[derive(Serialize, Deserialize)]
struct SessionV8 {
    id: Uuid,
    user_id: Uuid,
    device: String,
    created_at: i64,
    last_active: i64,
    refresh_jti: Uuid,
    revoked_at: Option<i64>,
}

pub(super) fn sessions_keep_their_last_rotation(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let corrupt = |e: crate::error::ApiError| redb::Error::Corrupted(format!("sessions: {e}"));
    let mut sessions = txn.open_table(SESSIONS)?;
    let mut rows = Vec::new();
    for item in sessions.iter()? {
        let (k, v) = item?;
        let old: SessionV8 = decode(v.value()).map_err(corrupt)?;
        let new = Session {
            id: old.id,
            user_id: old.user_id,
            device: old.device,
            created_at: old.created_at,
            last_active: old.last_active,
            refresh_jti: old.refresh_jti,
            revoked_at: old.revoked_at,
            rotated: None,
        };
        rows.push((k.value(), encode(&new).map_err(corrupt)?));
    }
    for (k, v) in rows {
        sessions.insert(k, v.as_slice())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;

    use super::*;
    use crate::storage::tables::META;
    use crate::storage::{ONE_OFF_CACHE, open};

    fn old(n: u128, revoked_at: Option<i64>) -> SessionV8 {
        SessionV8 {
            id: Uuid::from_u128(n),
            user_id: Uuid::from_u128(7),
            device: format!("tab {n}"),
            created_at: 10,
            last_active: 20 + n as i64,
            refresh_jti: Uuid::from_u128(100 + n),
            revoked_at,
        }
    }

    /// A directory written at `version` holding the sessions, then opened: every step runs.
    fn migrated(version: u32) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("account.redb");
        {
            let db = open(&path, crate::account::DATABASE, ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            let mut t = txn.open_table(SESSIONS).unwrap();
            for s in [old(1, None), old(2, Some(30))] {
                t.insert(s.id.as_u128(), encode(&s).unwrap().as_slice()).unwrap();
            }
            drop(t);
            txn.open_table(META).unwrap().insert("format_version", version.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        let db = open(&path, crate::account::DATABASE, ONE_OFF_CACHE).unwrap();
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(SESSIONS).unwrap();
        let read = |n: u128| -> Session { decode(t.get(n).unwrap().unwrap().value()).unwrap() };
        let (live, ended) = (read(1), read(2));
        assert_eq!((live.device.as_str(), live.last_active, live.refresh_jti), ("tab 1", 21, Uuid::from_u128(101)));
        assert_eq!((live.user_id, live.created_at, live.revoked_at, live.rotated), (Uuid::from_u128(7), 10, None, None));
        assert_eq!((ended.device.as_str(), ended.revoked_at, ended.rotated), ("tab 2", Some(30), None));
        let v = txn.open_table(META).unwrap().get("format_version").unwrap().unwrap().value().to_vec();
        assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), crate::storage::FORMAT_VERSION);
    }

    #[test]
    fn sessions_of_format_8_gain_no_rotation() {
        migrated(8);
    }

    #[test]
    fn sessions_of_an_older_directory_take_the_same_step() {
        // No account step before 9: a format-1 directory's rows are as format 8 left them.
        migrated(1);
    }
}
