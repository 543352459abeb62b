use super::*;

const ONE: ListName = ListName::Product(1);

fn key(n: u8) -> Box<[u8]> {
    vec![n].into_boxed_slice()
}

fn keys_of(ns: &[u8]) -> Keys {
    let mut keys = Keys::default();
    for n in ns {
        keys.push(&[*n]);
    }
    keys
}

/// What a list of `ns`, freshly built, costs.
fn cost(ns: &[u8]) -> u64 {
    HeldList::build(vec![keys_of(ns)]).bytes as u64
}

/// What the held list of `store` costs now.
async fn held(orders: &Arc<ListOrders>, store: Uuid) -> u64 {
    orders.read((store, ONE), 0, || Ok(vec![Keys::default()]), |l| l.bytes as u64).await.unwrap()
}

fn change(store: Uuid, n: u8, insert: bool) -> Change {
    Change { store, list: ONE, key: key(n), insert }
}

fn orders(budget: u64) -> Arc<ListOrders> {
    Arc::new(ListOrders::new(budget))
}

/// List `id`, built from `ns` with `meanwhile` run while its rows are read: the keys it answers.
async fn built_while(orders: &Arc<ListOrders>, id: ListId, ns: Vec<u8>, meanwhile: impl FnOnce() + Send + 'static) -> Vec<u8> {
    let build = move || {
        meanwhile();
        Ok(vec![keys_of(&ns)])
    };
    orders.read(id, 0, build, |l| l.page(false, 0, 100).0.concat()).await.unwrap()
}

async fn keys(orders: &Arc<ListOrders>, store: Uuid, build: Vec<u8>) -> Vec<u8> {
    orders.read((store, ONE), 0, move || Ok(vec![keys_of(&build)]), |l| l.page(false, 0, 100).0.concat()).await.unwrap()
}

#[tokio::test]
async fn changes_reach_loaded_lists_and_skip_others() {
    let orders = orders(1 << 20);
    let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
    assert_eq!(keys(&orders, a, vec![3, 1]).await, vec![1, 3]);
    orders.apply(&mut vec![change(a, 2, true), change(a, 3, false), change(b, 9, true)]);
    assert_eq!(keys(&orders, a, vec![]).await, vec![1, 2], "held lists are not built again");
    assert_eq!(keys(&orders, b, vec![5]).await, vec![5], "a list not held is built from its rows");
    let stats = orders.meter.stats();
    assert_eq!((stats.hits, stats.misses), (1, 2));
    let (ca, cb) = (held(&orders, a).await, held(&orders, b).await);
    assert_eq!((stats.entries, stats.bytes), (2, ca + cb), "the meter holds what the two lists hold");
    assert_eq!(cb, cost(&[5]));
}

#[tokio::test]
async fn changes_committed_during_a_build_are_replayed_over_it() {
    let orders = orders(1 << 20);
    let a = Uuid::from_u128(1);
    let during = orders.clone();
    // Committed while the snapshot is read: one change it holds, one it misses.
    let committed = move || during.apply(&mut vec![change(a, 1, false), change(a, 2, true), change(a, 4, true)]);
    assert_eq!(built_while(&orders, (a, ONE), vec![2, 3], committed).await, vec![2, 3, 4]);
}

#[tokio::test]
async fn a_store_forgotten_during_its_build_is_not_kept() {
    let orders = orders(1 << 20);
    let a = Uuid::from_u128(1);
    let during = orders.clone();
    assert_eq!(built_while(&orders, (a, ONE), vec![7], move || during.forget(a)).await, vec![7]);
    assert_eq!(keys(&orders, a, vec![8]).await, vec![8]);
}

#[tokio::test]
async fn the_budget_drops_the_least_recently_read_lists_and_keeps_none_larger_than_itself() {
    // Room for two lists of two keys.
    let orders = orders(2 * cost(&[1, 2]));
    let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    keys(&orders, a, vec![1, 2]).await;
    keys(&orders, b, vec![3, 4]).await;
    keys(&orders, a, vec![]).await;
    // c needs room: b, read longest ago, goes.
    keys(&orders, c, vec![5, 6]).await;
    assert_eq!(keys(&orders, a, vec![]).await, vec![1, 2], "a is still held");
    assert_eq!(keys(&orders, b, vec![9]).await, vec![9], "b was dropped and is built again");
    assert!(orders.meter.stats().bytes <= orders.meter.budget());
    // Writes that grow a held list past the budget drop another list.
    orders.apply(&mut vec![change(b, 10, true), change(b, 11, true), change(b, 12, true)]);
    let stats = orders.meter.stats();
    assert!(stats.bytes <= stats.budget, "{stats:?}");
    // A list larger than the whole budget is answered, never kept.
    let big = Uuid::from_u128(4);
    let many: Vec<u8> = (1..=60).collect();
    assert!(cost(&many) > orders.meter.budget());
    assert_eq!(keys(&orders, big, many.clone()).await, many);
    assert_eq!(keys(&orders, big, vec![7]).await, vec![7], "built again: nothing was kept");
}

#[tokio::test]
async fn the_hottest_lists_are_the_most_recently_read() {
    let orders = orders(1 << 20);
    let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    for s in [a, b, c] {
        keys(&orders, s, vec![1]).await;
    }
    keys(&orders, a, vec![]).await;
    assert_eq!(orders.hottest(2), vec![(a, ONE), (c, ONE)]);
}

/// A saved form that loads `ns`, and counts its loads in `loads`.
fn saved(ns: &[u8], loads: &Arc<AtomicU64>) -> SavedList {
    let (keys, loads) = (keys_of(ns), loads.clone());
    Box::new(move || {
        loads.fetch_add(1, Ordering::Relaxed);
        Some(Ranked::from_keys(keys))
    })
}

#[tokio::test]
async fn a_restored_list_is_loaded_by_its_first_reader_with_the_changes_committed_since() {
    let orders = orders(1 << 20);
    let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    let loads = Arc::new(AtomicU64::new(0));
    let damaged: SavedList = Box::new(|| None);
    let marked = orders.restore(vec![((a, ONE), saved(&[1, 3], &loads)), ((b, ONE), damaged), ((c, ONE), saved(&[5], &loads))]);
    assert_eq!(marked.len(), 3);
    assert!(orders.holds(&(a, ONE)) && orders.hottest(5).is_empty(), "marked, not yet held");
    // Committed after the restore, before anyone read the lists.
    orders.apply(&mut vec![change(a, 2, true), change(a, 3, false), change(b, 8, true)]);
    assert_eq!(keys(&orders, a, vec![9]).await, vec![1, 2], "loaded, not built, and the changes replayed");
    assert_eq!(keys(&orders, b, vec![7]).await, vec![7, 8], "a damaged list is built from its rows");
    assert_eq!(keys(&orders, a, vec![9]).await, vec![1, 2], "held");
    // The loader finds a and b taken and loads c alone.
    orders.load_restored(marked, &AtomicBool::new(false));
    assert_eq!(loads.load(Ordering::Relaxed), 2);
    assert_eq!(keys(&orders, c, vec![9]).await, vec![5]);
    let stats = orders.meter.stats();
    assert_eq!((stats.entries, stats.hits, stats.misses), (3, 2, 3));
}

#[tokio::test]
async fn the_loader_goes_hottest_first_and_stops_at_four_fifths_of_the_share_or_when_told() {
    let lists: Vec<Uuid> = (1..=4).map(Uuid::from_u128).collect();
    let loads = Arc::new(AtomicU64::new(0));
    let ten: Vec<u8> = (0..10).collect();
    // Room for the first three lists' four fifths: the fourth is left to its build.
    let orders = orders(cost(&ten) * 3 * 10 / 8 + 1);
    let saved_all = |loads: &Arc<AtomicU64>| lists.iter().map(|s| ((*s, ONE), saved(&ten, loads))).collect();
    let marked = orders.restore(saved_all(&loads));
    orders.load_restored(marked, &AtomicBool::new(false));
    assert_eq!(loads.load(Ordering::Relaxed), 3);
    assert_eq!(orders.hottest(5), lists[..3].iter().map(|s| (*s, ONE)).collect::<Vec<_>>(), "the hottest first");
    assert!(!orders.holds(&(lists[3], ONE)), "unmarked: built when read");
    assert_eq!(keys(&orders, lists[3], vec![42]).await, vec![42]);
    // Told to stop: nothing more is loaded, and every list stays marked, answered in order
    // for the stop to load once nothing writes.
    let fresh = Arc::new(ListOrders::new(1 << 20));
    let marked = fresh.restore(saved_all(&loads));
    let left = fresh.load_restored(marked.clone(), &AtomicBool::new(true));
    assert_eq!((loads.load(Ordering::Relaxed), fresh.meter.stats().entries), (3, 0));
    assert_eq!(left, marked);
    assert!(lists.iter().all(|s| fresh.holds(&(*s, ONE))));
    fresh.apply(&mut vec![change(lists[1], 42, true)]);
    assert_eq!(fresh.load_restored(left, &AtomicBool::new(false)), Vec::<ListId>::new());
    assert_eq!(loads.load(Ordering::Relaxed), 7);
    assert_eq!(fresh.hottest(5), lists.iter().map(|s| (*s, ONE)).collect::<Vec<_>>(), "in their order");
    assert_eq!(keys(&fresh, lists[1], vec![]).await, [ten.clone(), vec![42]].concat(), "with the change queued");
    // Unmarked instead: each is built from its rows when read.
    let unmarked = Arc::new(ListOrders::new(1 << 20));
    let marked = unmarked.restore(saved_all(&loads));
    unmarked.unmark(marked);
    assert!(lists.iter().all(|s| !unmarked.holds(&(*s, ONE))));
    assert_eq!(keys(&unmarked, lists[0], vec![7]).await, vec![7]);
    assert_eq!(loads.load(Ordering::Relaxed), 7);
}

#[tokio::test]
async fn a_failed_build_leaves_nothing_behind() {
    let orders = orders(1 << 20);
    let a = Uuid::from_u128(1);
    let failed = orders.read((a, ONE), 0, || Err::<Vec<Keys>, _>(ApiError::internal("disk")), |l| l.len()).await;
    assert!(failed.is_err());
    assert_eq!(keys(&orders, a, vec![1]).await, vec![1], "the next read builds again");
}

mod records {
    use super::*;
    use crate::storage::list_names::tests::expiring;
    use crate::storage::list_names::{Keeps, KindTests, Side, Summary, View, name};

    const KIND: [u8; 3] = [0, 7, 0];

    fn list(keeps: Keeps) -> ListName {
        ListName::Record(name(&KIND, 0, &keeps).unwrap())
    }

    fn paid() -> ListName {
        list(Keeps::Summaries(0, b"PAID".to_vec()))
    }

    /// Orders of status PAID whose customer is 7 (a view of two filters).
    fn view() -> ListName {
        list(Keeps::View(View { filters: vec![(0, vec![b"PAID".to_vec()]), (1, vec![vec![7]])], ..View::default() }))
    }

    fn side(status: &str, customer: u8, key: u8) -> Side {
        let summary = Summary { filters: vec![Some(status.into()), Some(vec![customer])], ..Summary::default() };
        Side { summary, keys: vec![(0, key_of(key))] }
    }

    fn key_of(n: u8) -> Box<[u8]> {
        vec![n].into_boxed_slice()
    }

    fn write(store: Uuid, old: Option<Side>, new: Option<Side>) -> RecordChange {
        RecordChange { store, kind: KIND.to_vec().into(), old, new, tests: KindTests { search: None, timed: |_, _, _| None } }
    }

    /// The cards active at the view's moment (timed filter 0 keeps when each expires).
    fn active() -> ListName {
        list(Keeps::View(View { filters: vec![(0, vec![b"ACTIVE".to_vec()])], timed: true, ..View::default() }))
    }

    /// A card expiring at `ends`, at `key`, written.
    fn card(store: Uuid, ends: i64, key: u8) -> RecordChange {
        let summary = Summary { filters: vec![Some(ends.to_be_bytes().to_vec())], ..Summary::default() };
        let new = Some(Side { summary, keys: vec![(0, key_of(key))] });
        RecordChange { store, kind: KIND.to_vec().into(), old: None, new, tests: expiring() }
    }

    /// The active cards of `store` read at `now`; a build (counted in `builds`) finds `keys`,
    /// the first to expire at `until`, while `meanwhile` runs.
    async fn active_at(
        orders: &Arc<ListOrders>,
        store: Uuid,
        now: i64,
        (keys, until): (Vec<u8>, Option<i64>),
        builds: &Arc<AtomicU64>,
        meanwhile: impl FnOnce() + Send + 'static,
    ) -> Vec<u8> {
        let builds = builds.clone();
        let build = move || {
            builds.fetch_add(1, Ordering::Relaxed);
            meanwhile();
            Ok(Built { parts: vec![keys_of(&keys)], until })
        };
        orders.read((store, active()), now, build, |l| l.page(false, 0, 100).0.concat()).await.unwrap()
    }

    async fn read(orders: &Arc<ListOrders>, store: Uuid, list: ListName, build: Vec<u8>) -> Vec<u8> {
        orders.read((store, list), 0, move || Ok(vec![keys_of(&build)]), |l| l.page(false, 0, 100).0.concat()).await.unwrap()
    }

    #[tokio::test]
    async fn a_records_write_moves_its_key_in_every_held_list_of_its_kind_that_keeps_it() {
        let orders = orders(1 << 20);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // Held: every order, the PAID ones, the PAID ones of customer 7; and another store's.
        assert_eq!(read(&orders, a, list(Keeps::All), vec![1, 2]).await, vec![1, 2]);
        assert_eq!(read(&orders, a, paid(), vec![1]).await, vec![1]);
        assert_eq!(read(&orders, a, view(), vec![]).await, Vec::<u8>::new());
        assert_eq!(read(&orders, b, paid(), vec![]).await, Vec::<u8>::new());
        orders.apply_records(&mut vec![
            // 2 is paid by customer 7: it enters both filtered lists.
            write(a, Some(side("OPEN", 7, 2)), Some(side("PAID", 7, 2))),
            // 3 is new, paid by customer 8: the PAID list only.
            write(a, None, Some(side("PAID", 8, 3))),
            // 1 moves (its sort value changed) and stays PAID, of customer 5.
            write(a, Some(side("PAID", 5, 1)), Some(side("PAID", 5, 4))),
        ]);
        assert_eq!(read(&orders, a, list(Keeps::All), vec![]).await, vec![2, 3, 4]);
        assert_eq!(read(&orders, a, paid(), vec![]).await, vec![2, 3, 4]);
        assert_eq!(read(&orders, a, view(), vec![]).await, vec![2]);
        assert_eq!(read(&orders, b, paid(), vec![]).await, Vec::<u8>::new(), "another store's list is untouched");
        // 2 is refunded, then deleted: it leaves the filtered lists, then every list.
        orders.apply_records(&mut vec![write(a, Some(side("PAID", 7, 2)), Some(side("REFUNDED", 7, 2)))]);
        assert_eq!(read(&orders, a, view(), vec![]).await, Vec::<u8>::new());
        orders.apply_records(&mut vec![write(a, Some(side("REFUNDED", 7, 2)), None)]);
        assert_eq!(read(&orders, a, list(Keeps::All), vec![]).await, vec![3, 4]);
        assert_eq!(read(&orders, a, paid(), vec![]).await, vec![3, 4]);
    }

    #[tokio::test]
    async fn a_records_write_committed_during_a_views_build_is_replayed_over_it() {
        let orders = orders(1 << 20);
        let a = Uuid::from_u128(1);
        let during = orders.clone();
        let committed = move || during.apply_records(&mut vec![write(a, None, Some(side("PAID", 7, 9)))]);
        assert_eq!(built_while(&orders, (a, view()), vec![3], committed).await, vec![3, 9]);
    }

    #[tokio::test]
    async fn a_timed_view_answers_until_a_record_may_change_state_and_is_built_again_from_then() {
        let (orders, builds) = (orders(1 << 20), Arc::new(AtomicU64::new(0)));
        let a = Uuid::from_u128(1);
        let built = || builds.load(Ordering::Relaxed);
        // Built at 100: card 1 is active, the first of the store to expire at 500.
        assert_eq!(active_at(&orders, a, 100, (vec![1], Some(500)), &builds, || ()).await, vec![1]);
        assert_eq!((active_at(&orders, a, 499, (vec![], None), &builds, || ()).await, built()), (vec![1], 1));
        // A card written expiring at 400 enters (active at the view's moment) and brings its
        // end forward; one expired at 100 already stays out.
        orders.apply_records(&mut vec![card(a, 400, 2), card(a, 90, 3)]);
        assert_eq!((active_at(&orders, a, 399, (vec![], None), &builds, || ()).await, built()), (vec![1, 2], 1));
        assert_eq!((active_at(&orders, a, 400, (vec![1], Some(500)), &builds, || ()).await, built()), (vec![1], 2));
        // A read at a moment before the view's builds it again too.
        assert_eq!((active_at(&orders, a, 350, (vec![1, 2], Some(400)), &builds, || ()).await, built()), (vec![1, 2], 3));
        // A write committed during a build brings the built view's end forward as well.
        let during = orders.clone();
        let committed = move || during.apply_records(&mut vec![card(a, 360, 4)]);
        orders.forget(a);
        assert_eq!(active_at(&orders, a, 355, (vec![1, 2], Some(400)), &builds, committed).await, vec![1, 2, 4]);
        assert_eq!((active_at(&orders, a, 360, (vec![1, 2], Some(400)), &builds, || ()).await, built()), (vec![1, 2], 5));
        // Its moment gone at a restart, a timed view is never saved.
        assert_eq!(orders.each_held(|_, _| Ok::<(), ()>(())), Ok(0));
    }

    #[tokio::test]
    async fn a_store_and_kind_hold_a_bounded_number_of_views_and_drop_the_one_read_longest_ago() {
        let orders = orders(1 << 20);
        let a = Uuid::from_u128(1);
        let search = |i: usize| list(Keeps::View(View { search: Some(format!("q{i}")), ..View::default() }));
        for i in 0..MAX_VIEWS {
            read(&orders, a, search(i), vec![i as u8]).await;
        }
        read(&orders, a, list(Keeps::All), vec![1]).await;
        // View 0 is read again: view 1 is now the one read longest ago.
        read(&orders, a, search(0), vec![]).await;
        read(&orders, a, search(MAX_VIEWS), vec![]).await;
        assert!(!orders.holds(&(a, search(1))), "the view read longest ago went");
        assert!(orders.holds(&(a, search(0))) && orders.holds(&(a, search(MAX_VIEWS))));
        assert!(orders.holds(&(a, list(Keeps::All))), "lists that are not views do not count");
        assert_eq!(orders.meter.stats().entries as usize, MAX_VIEWS + 1);
        assert_eq!(read(&orders, a, search(1), vec![42]).await, vec![42], "built again when read");
    }
}

#[tokio::test]
async fn a_builds_merge_is_counted_while_it_runs_so_lists_read_longest_ago_give_way_before_it() {
    let ten: Vec<u8> = (0..10).collect();
    // Room for the three lists when built, but not for the third's merge beside the other two.
    let orders = orders(3 * cost(&ten) + 8);
    assert!(Ranked::merge_cost(&[keys_of(&ten)]) as u64 > cost(&ten) + 8);
    let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    keys(&orders, a, ten.clone()).await;
    keys(&orders, b, ten.clone()).await;
    let (during, built) = (orders.clone(), ten.clone());
    let seen = orders
        .read(
            (c, ONE),
            0,
            move || {
                // Before the merge: both lists held, nothing reserved yet.
                assert_eq!(during.meter.bytes(), 2 * cost(&built));
                Ok(vec![keys_of(&built)])
            },
            |l| l.len(),
        )
        .await
        .unwrap();
    assert_eq!(seen, 10);
    assert!(!orders.holds(&(a, ONE)), "the list read longest ago made room for the merge");
    assert!(orders.holds(&(b, ONE)) && orders.holds(&(c, ONE)));
    let stats = orders.meter.stats();
    assert_eq!((stats.entries, stats.bytes), (2, 2 * cost(&ten)), "the merge's reservation is given back");
}
