//! The writer thread: holds, batches, fsyncs, counters and the numbering of batches.

use super::*;
use crate::storage::tables::COUNTERS;

use crate::storage::open;
use redb::ReadableDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_waits_for_earlier_writes_queues_later_ones_and_lapses_when_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(&dir.path().join("cell.redb"), crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap());
    let (writer, thread) = Writer::start(db.clone(), "test", 1 << 20, 1 << 20).unwrap();
    let key = |n: u8| Key::store(Uuid::from_u128(1)).str(&format!("k{n}")).into_vec();
    let put = |n: u8| {
        let (w, k) = (writer.clone(), key(n));
        async move { w.write(None, move |tx| tx.put(COUNTERS, &k, &1u64.to_le_bytes())).await }
    };
    let seen = |n: u8| crate::storage::read::counter(&db.begin_read().unwrap(), COUNTERS, &key(n)).unwrap();
    // Polled in order: the first write is queued before the hold, so it has committed once
    // the hold is taken.
    let (first, hold) = tokio::join!(put(1), writer.hold());
    first.unwrap();
    let hold = hold.unwrap();
    assert_eq!(seen(1), 1);
    // A write sent while held waits, unrefused, and commits once released.
    let later = tokio::spawn(put(2));
    let waited = tokio::time::timeout(std::time::Duration::from_millis(100), async {
        while !later.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(waited.is_err(), "nothing commits while the writer is held");
    assert_eq!(seen(2), 0);
    assert!(hold.release(), "released in time");
    later.await.unwrap().unwrap();
    assert_eq!(seen(2), 1);
    // A dropped hold releases too.
    drop(writer.hold().await.unwrap());
    put(3).await.unwrap();
    // A hold its holder forgets ends by itself: the queued write commits, and the late
    // release says the cut may no longer hold.
    // The limit runs from when the writer thread takes the hold, which is after this
    // stopwatch starts and before the test learns of the hold.
    let started = std::time::Instant::now();
    let forgotten = writer.hold_at_most(std::time::Duration::from_millis(50)).await.unwrap();
    put(4).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(50), "the write waited for the limit");
    assert_eq!(seen(4), 1);
    assert!(!forgotten.release(), "released after the hold had lapsed");
    writer.stop();
    thread.join();
}

#[tokio::test]
async fn unsynced_writes_commit_visibly_without_an_fsync_unless_a_synced_one_shares_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cell.redb");
    let db = Arc::new(open(&path, crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap());
    let (writer, thread) = Writer::start(db.clone(), "test", 1 << 20, 1 << 20).unwrap();
    let key = |n: u8| Key::store(Uuid::from_u128(1)).str(&format!("k{n}")).into_vec();
    let put = |n: u8, synced: bool| {
        let (w, k) = (writer.clone(), key(n));
        async move {
            let job = move |tx: &mut Tx| tx.put(COUNTERS, &k, &u64::from(n).to_le_bytes());
            if synced { w.write(None, job).await } else { w.write_unsynced(None, job).await }
        }
    };
    let seen = |db: &Database, n: u8| crate::storage::read::counter(&db.begin_read().unwrap(), COUNTERS, &key(n)).unwrap();
    let unsynced = || writer.stats.unsynced.load(Ordering::Relaxed);
    put(1, false).await.unwrap();
    assert_eq!(seen(&db, 1), 1, "read at once");
    assert_eq!(unsynced(), 1);
    put(2, true).await.unwrap();
    assert_eq!(unsynced(), 1, "a synced write commits with its fsync");
    // Sent together, they share a batch (or not); a batch holding a synced job syncs.
    let (a, b) = tokio::join!(put(3, false), put(4, true));
    a.unwrap();
    b.unwrap();
    let batches = writer.stats.batch.count();
    assert!(unsynced() == 1 && batches == 3 || unsynced() == 2 && batches == 4, "{} unsynced of {batches}", unsynced());
    writer.stop();
    thread.join();
    drop(writer);
    let db = Arc::into_inner(db).expect("the writer let go of the database");
    drop(db);
    let db = open(&path, crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap();
    assert_eq!((1..=4).map(|n| seen(&db, n)).collect::<Vec<_>>(), [1, 2, 3, 4], "the synced commits carried the rest");
}

#[tokio::test]
async fn counters_of_a_batch_are_read_back_written_once_and_dropped_with_a_failed_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(&dir.path().join("cell.redb"), crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap());
    let (writer, thread) = Writer::start(db.clone(), "test", 1 << 20, 1 << 20).unwrap();
    let key = Key::store(Uuid::from_u128(1)).str("things").into_vec();
    // Many concurrent jobs land in few batches; each sees the counts of the jobs before it.
    let jobs: Vec<_> = (0..50)
        .map(|_| {
            let (w, k) = (writer.clone(), key.clone());
            tokio::spawn(async move {
                w.write(None, move |tx| {
                    let before = tx.counter(COUNTERS, &k)?;
                    tx.bump(COUNTERS, &k, 1)?;
                    assert_eq!(tx.counter(COUNTERS, &k)?, before + 1);
                    Ok(before)
                })
                .await
                .unwrap()
            })
        })
        .collect();
    let mut seen = Vec::new();
    for j in jobs {
        seen.push(j.await.unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..50).collect::<Vec<u64>>(), "every job saw a distinct count");
    // A failed job's bump is gone with its transaction.
    let k = key.clone();
    let failed = writer
        .write(None, move |tx| {
            tx.bump(COUNTERS, &k, 10)?;
            Err::<(), _>(ApiError::msg(crate::error::Code::CONFLICT, "no"))
        })
        .await;
    assert!(failed.is_err());
    let txn = db.begin_read().unwrap();
    assert_eq!(crate::storage::read::counter(&txn, COUNTERS, &key).unwrap(), 50);
    writer.stop();
    thread.join();
}

#[tokio::test]
async fn every_batch_is_numbered_in_its_commit_and_applied_before_its_answer() {
    use crate::storage::applied;
    use crate::storage::list_orders::ListName;
    use crate::storage::tables::META;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(&dir.path().join("cell.redb"), crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap());
    let (writer, thread) = Writer::start(db.clone(), "test", 1 << 20, 1 << 20).unwrap();
    let numbered = || {
        let txn = db.begin_read().unwrap();
        let row = txn.open_table(META).unwrap().get(applied::ROW).unwrap().map(|v| v.value().to_vec());
        row.map(|v| u64::from_le_bytes(v.try_into().unwrap()))
    };
    // Caught up at once, or given up after the patience: nothing would apply a batch left behind.
    let ready = || writer.applied.caught_up();
    let store = Uuid::from_u128(1);
    let listed = move |tx: &mut Tx| {
        tx.order_insert(store, ListName::Product(1), Box::new([1]));
        Ok(())
    };
    writer.write(Some(store), listed).await.unwrap();
    assert_eq!(numbered(), Some(1));
    let k = Key::store(store).str("plain").into_vec();
    writer.write(None, move |tx| tx.put(COUNTERS, &k, &1u64.to_le_bytes())).await.unwrap();
    assert_eq!(numbered(), Some(2), "each batch took the next number");
    // Answered: lists, caches and generations hold the batch, so a read waits for nothing.
    assert!(ready());
    // A failed batch commits nothing, its number included.
    let failed = writer.write(Some(store), |_| Err::<(), _>(ApiError::msg(Code::CONFLICT, "no"))).await;
    assert!(failed.is_err());
    assert_eq!(numbered(), Some(2));
    assert!(ready());
    writer.stop();
    thread.join();
}
