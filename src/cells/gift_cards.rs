//! Gift cards in a cell: the record declaration (the code claim, list orders, filters with the
//! status read at the list's moment, search by the code's last characters or the whole code) and
//! the rules of their writes; [`redeem_gift_card`] is the one place a balance goes down, inside the
//! order-creating write job.
//!
//! The code is never stored: `gift_card_codes` maps `sha256(store ‖ normalised code)` to the card,
//! and the card keeps only the digest and its last four characters. Cards are never deleted: a
//! merchant disables them.

use std::fmt::Write as _;

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::stores;
use crate::domain::gift_card::{
    GiftCard, GiftCardStatus, IssueGiftCard, UpdateGiftCard, code_hash, generate_code, normalise_code, normalise_search,
    status_at,
};
use crate::domain::money::Money;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, Claim, Enumerated, Filter, FilterValue, List, Record, Search, Sort};
use crate::storage::tables::{GIFT_CARD_CODES, GIFT_CARD_ORDER, GIFT_CARDS, STORES, StoreTable};
use crate::storage::tx::Tx;

/// Attempts at a generated code before giving up: two random 80-bit codes colliding is already
/// beyond belief, so a second collision means something else is wrong.
const GENERATE_ATTEMPTS: usize = 3;

impl Record for GiftCard {
    const TABLE: StoreTable = GIFT_CARDS;
    const NAME: &'static str = "gift_cards";
    const LIST: List<Self> = List {
        order: Some(GIFT_CARD_ORDER),
        sorts: &[
            Sort { name: "created_at", tag: 0, key: |g, k| k.i64(g.created_at) },
            Sort { name: "updated_at", tag: 1, key: |g, k| k.i64(g.updated_at) },
            Sort { name: "balance", tag: 2, key: |g, k| k.i64(g.balance) },
            Sort { name: "initial_value", tag: 3, key: |g, k| k.i64(g.initial_value.amount) },
        ],
        default_sort: "created_at",
        summaries: "updated_at",
        own_order: false,
        filters: &[
            Filter::timed(
                "status",
                GiftCardStatus::NAMES,
                |g: &GiftCard| {
                    let expires = g.expiry.as_ref().map_or(i64::MAX, |e| e.at);
                    Some(FilterValue::Times(vec![i64::from(g.disabled_at.is_some()), expires, g.balance]))
                },
                |t, now| {
                    let at = |i: usize| t.get(i).copied().unwrap_or_default();
                    status_at(at(0) != 0, Some(at(1)).filter(|e| *e != i64::MAX), at(2), now).name()
                },
                // It expires at its expiry.
                |t, now| t.get(1).copied().filter(|e| *e > now && *e != i64::MAX),
                "status at the time of the request",
            ),
            Filter::reference("customerId", |g: &GiftCard| g.customer_id.map(FilterValue::Reference), "cards of these customers"),
        ],
        ranges: &[],
        search: Some(
            Search::new(
                |g: &GiftCard| format!("{}\n{}", g.last_characters, hex(&g.code_hash)),
                search_matches,
                "the last characters of the code (up to 4), or a whole code",
            )
            .normalised(
                normalise_search,
                "must be 1 to 20 letters or digits (spaces and dashes are ignored)",
                "^[ -]*([A-Za-z0-9][ -]*){1,20}$",
            ),
        ),
    };

    fn id(&self) -> Uuid {
        self.id
    }

    /// `store ‖ sha256(store ‖ code) → id`: claims the code and finds the card by it.
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        Ok(vec![(GIFT_CARD_CODES, code_key(store, &self.code_hash), self.id.as_bytes().to_vec())])
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Up to four characters are looked for in the code's last characters; a whole code (more)
/// finds its card by digest, which is the store's.
fn search_matches(text: &str, query: &str, store: Uuid) -> bool {
    let (last, digest) = text.split_once('\n').unwrap_or((text, ""));
    match query.len() {
        0..=4 => last.contains(query),
        _ => normalise_code(query).is_some_and(|code| hex(&code_hash(store, &code)) == digest),
    }
}

fn code_key(store: Uuid, hash: &[u8; 32]) -> Vec<u8> {
    let mut k = Key::store(store).into_vec();
    k.extend_from_slice(hash);
    k
}

/// Writes `new` in place of `old` (absent: a new card) through the record layer; a new card's
/// code must be free (409 `GIFT_CARD_CODE_TAKEN` naming `code` when another card of the store has
/// it). A card's code never changes.
pub fn write_gift_card(tx: &mut Tx, store: Uuid, old: Option<&GiftCard>, new: &GiftCard) -> ApiResult<()> {
    if old.is_none() && tx.get(GIFT_CARD_CODES, &code_key(store, &new.code_hash))?.is_some_and(|owner| owner != new.id.as_bytes())
    {
        return Err(ApiError::field("code", "another gift card of this store already has this code")
            .with_code(Code::GIFT_CARD_CODE_TAKEN));
    }
    record::write(tx, store, old, Some(new))
}

/// The card a code names (normalised, hashed lookup), or None. Read-only.
pub fn find_gift_card(txn: &ReadTransaction, store: Uuid, code: &str) -> ApiResult<Option<GiftCard>> {
    // A code that cannot be normalised names no card: no card was ever issued with it.
    let Some(code) = normalise_code(code) else { return Ok(None) };
    let Some(id) = read::get_raw(txn, GIFT_CARD_CODES, &code_key(store, &code_hash(store, &code)))? else {
        return Ok(None);
    };
    record::get(txn, store, Uuid::from_slice(&id).map_err(ApiError::internal)?)
}

/// Inside the order-creating write job (writer thread; repeatable): re-reads the card, takes
/// min(balance, `wanted.amount`) (partial redemption), records the redemption (order id, amount,
/// time) and writes the new balance with [`write_gift_card`]. Returns the amount taken.
///
/// Refused with 422 `BUSINESS_RULE` when the card no longer exists, is disabled, expired or
/// depleted, or `wanted` is in another currency; the job then fails and nothing is written. An
/// order that already redeemed this card gets back what it took, and nothing more is taken, so a
/// completion that runs again never spends a card twice.
pub fn redeem_gift_card(tx: &mut Tx, store: Uuid, card: Uuid, wanted: Money, order_id: Uuid, now_ms: i64) -> ApiResult<Money> {
    let Some(old) = record::load::<GiftCard>(tx, store, card)? else {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "the gift card no longer exists"));
    };
    if let Some(amount) = old.redeemed_by(order_id) {
        return Ok(Money { amount, currency: old.currency() });
    }
    let (new, taken) = old.redeem(wanted, order_id, now_ms)?;
    if new != old {
        write_gift_card(tx, store, Some(&old), &new)?;
    }
    Ok(taken)
}

/// Issues a card; answers it with its normalised code, which is shown this once.
pub async fn issue(cell: &Cell, store: Uuid, input: IssueGiftCard) -> ApiResult<(GiftCard, String)> {
    let now = cell.clock.now_ms();
    let currency = stores::store_settings(cell, store)?.currency;
    // Validated before queueing so a bad body never costs a place in a batch.
    let new = input.validate(currency, now)?;
    let chosen = new.code.is_some();
    for _ in 0..GENERATE_ATTEMPTS {
        let code = new.code.clone().unwrap_or_else(generate_code);
        let card = GiftCard::issue(store, &new, &code, cell.clock.new_id(), now);
        let written = cell
            .writer
            .write(Some(store), move |tx| {
                // The store's currency again, under the writer: it may have changed since.
                let settings: StoreSettings =
                    decode(&tx.get(STORES, Key::store(store).bytes())?.ok_or_else(ApiError::not_found)?)?;
                if settings.currency != card.currency() {
                    return Err(ApiError::field(
                        "initialValue.currency",
                        format!("must be the store's currency, {}", settings.currency.code()),
                    ));
                }
                write_gift_card(tx, store, None, &card)?;
                Ok(card.clone())
            })
            .await;
        match written {
            Err(e) if e.code == Code::GIFT_CARD_CODE_TAKEN && !chosen => continue,
            other => return other.map(|card| (card, code)),
        }
    }
    Err(ApiError::internal("generated gift card codes kept colliding"))
}

/// Disables a card, or changes its note, expiry or customer.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: UpdateGiftCard) -> ApiResult<GiftCard> {
    let now = cell.clock.now_ms();
    let changes = input.validate(now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<GiftCard>(tx, store, id)?;
            let new = old.apply(&changes, now)?;
            if new != old {
                write_gift_card(tx, store, Some(&old), &new)?;
            }
            Ok(new)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::gift_card::NewGiftCard;
    use crate::storage::list::ListQuery;

    fn by_code(cell: &Cell, store: Uuid, code: &str) -> ApiResult<Option<GiftCard>> {
        find_gift_card(&cell.read()?, store, code)
    }
    use crate::domain::money::Currency;

    fn usd(amount: i64) -> Money {
        Money { amount, currency: Currency::parse("USD").unwrap() }
    }

    /// A cell in a temp dir holding one card of `balance`, written straight through the writer.
    async fn cell_with_card(balance: i64) -> (tempfile::TempDir, Cell, Uuid, GiftCard) {
        let dir = tempfile::tempdir().unwrap();
        let cell =
            Cell::open("test", dir.path(), crate::clock::Clock::system(), &crate::memory::Shares::of_one_cell(256 << 20).cell)
                .unwrap();
        let store = cell.clock.new_id();
        let new = NewGiftCard { initial_value: usd(balance), code: None, expiry: None, note: None, customer_id: None };
        let card = GiftCard::issue(store, &new, "GIFT2026ABCD", cell.clock.new_id(), cell.clock.now_ms());
        let written = card.clone();
        cell.writer.write(Some(store), move |tx| write_gift_card(tx, store, None, &written)).await.unwrap();
        (dir, cell, store, card)
    }

    async fn redeem(cell: &Cell, store: Uuid, card: Uuid, wanted: Money, order: Uuid) -> ApiResult<Money> {
        let now = cell.clock.now_ms();
        cell.writer.write(Some(store), move |tx| redeem_gift_card(tx, store, card, wanted, order, now)).await
    }

    #[tokio::test]
    async fn a_redemption_larger_than_the_balance_takes_the_balance_and_depletes_the_card() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        let order = cell.clock.new_id();
        assert_eq!(redeem(&cell, store, card.id, usd(800), order).await.unwrap(), usd(500));
        let after = cell.get::<GiftCard>(store, card.id).unwrap();
        assert_eq!((after.balance, after.status(cell.clock.now_ms())), (0, GiftCardStatus::Depleted));
        assert_eq!((after.redemptions.len(), after.redemptions[0].order_id, after.redemptions[0].amount), (1, order, 500));
        // The same order again takes nothing more; another order is refused.
        assert_eq!(redeem(&cell, store, card.id, usd(800), order).await.unwrap(), usd(500));
        let e = redeem(&cell, store, card.id, usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        assert_eq!(cell.get::<GiftCard>(store, card.id).unwrap().redemptions.len(), 1);
        // The list orders follow the balance.
        let q = ListQuery { sort: "balance", limit: 10, ..Default::default() };
        let listed = cell.list::<GiftCard>(store, &q).await.unwrap();
        assert_eq!((listed.total, listed.items[0].balance), (1, 0));
        cell.close();
    }

    /// The record layer's lists held in memory (`storage::list`), read at every offset, in every
    /// sort, both ways, over every card or a customer's or several customers', with and without
    /// a text query or a status (views; a status changes as the moment read passes a card's
    /// expiry), answer as the order rows do (`page_from_rows`) while writes move cards between
    /// places and lists and the moment moves on, and a second read of a list at a moment no
    /// card changes state is answered from memory.
    #[tokio::test]
    async fn held_lists_answer_as_the_order_rows_do_through_writes_at_any_offset() {
        use crate::storage::list::{page, page_from_rows};
        let (_dir, cell, store, first) = cell_with_card(500).await;
        // The moment lists are read at, moved by the test (cards expire a few moments apart).
        let (start, step) = (cell.clock.now_ms(), 1_000);
        let moment = std::sync::atomic::AtomicI64::new(start);
        let customers: Vec<Uuid> = (0..3).map(|_| cell.clock.new_id()).collect();
        let customer = customers[0].as_bytes().to_vec();
        let mut seed = 0x2545_f491_u64;
        let mut next = move |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let mut cards = vec![first];
        let check = |cards: usize| {
            let (cell, customers, customer, moment) = (&cell, &customers, customer.clone(), &moment);
            async move {
                let active = || (0, vec![b"ACTIVE".to_vec()]);
                let filters: [Vec<(usize, Vec<Vec<u8>>)>; 5] = [
                    vec![],
                    vec![(1, vec![customer.clone()])],
                    vec![(1, vec![customers[1].as_bytes().to_vec(), customer.clone()])],
                    vec![active()],
                    vec![(0, vec![b"EXPIRED".to_vec(), b"DEPLETED".to_vec()]), (1, vec![customer.clone()])],
                ];
                let now = moment.load(std::sync::atomic::Ordering::Relaxed);
                // Codes end in four digits: "1" is in about a third of them, "03" in a few.
                let searches = [None, Some("1"), Some("03")];
                for sort in ["created_at", "updated_at", "balance", "initial_value"] {
                    for desc in [false, true] {
                        // Status views without a query: a store holds 32 views of a kind.
                        let views = filters.iter().enumerate().flat_map(|(i, f)| searches.map(move |s| (i, f, s)));
                        for (_, filters, search) in views.filter(|(i, _, s)| *i < 3 || s.is_none()) {
                            for offset in [0, 7, cards / 2, cards.saturating_sub(3)] {
                                let (filters, search) = (filters.clone(), search.map(String::from));
                                let q = ListQuery { sort, desc, offset, limit: 5, filters, search, ..Default::default() };
                                let held = page::<GiftCard>(&cell.db, &cell.writer.orders, store, &q, now).await.unwrap();
                                let rows = page_from_rows::<GiftCard>(&cell.read().unwrap(), store, &q, now).unwrap();
                                let ids =
                                    |l: &crate::storage::list::Listed<GiftCard>| l.items.iter().map(|c| c.id).collect::<Vec<_>>();
                                assert_eq!((held.total, ids(&held)), (rows.total, ids(&rows)), "{q:?} at {now}");
                            }
                        }
                    }
                }
            }
        };
        for round in 0..4 {
            // New cards, some of a customer; some expire in a few moments.
            for i in 0..40 {
                let mut card = GiftCard::issue(
                    store,
                    &NewGiftCard {
                        initial_value: usd(100 + next(900) as i64),
                        code: None,
                        expiry: None,
                        note: None,
                        customer_id: None,
                    },
                    &format!("GIFTCARD{round}X{i:04}"),
                    cell.clock.new_id(),
                    cell.clock.now_ms(),
                );
                card.customer_id = [None, Some(customers[next(3) as usize]), Some(customers[0])][next(3) as usize];
                let at = start + (round + next(6) as i64) * step + 500;
                card.expiry = (next(3) > 0).then(|| crate::domain::gift_card::Expiry { on: String::new(), at });
                let written = card.clone();
                cell.writer.write(Some(store), move |tx| write_gift_card(tx, store, None, &written)).await.unwrap();
                cards.push(card);
            }
            check(cards.len()).await;
            // Balances and customers change (cards move within and between lists); some go.
            for _ in 0..30 {
                let i = next(cards.len() as u64) as usize;
                let old = cards[i].clone();
                let mut new = old.clone();
                new.balance = next(old.initial_value.amount as u64 + 1) as i64;
                new.customer_id = [None, Some(customers[next(3) as usize])][next(2) as usize];
                new.updated_at = cell.clock.now_ms() + next(1000) as i64;
                let written = new.clone();
                cell.writer
                    .write(Some(store), move |tx| crate::storage::record::write(tx, store, Some(&old), Some(&written)))
                    .await
                    .unwrap();
                cards[i] = new;
            }
            for _ in 0..5 {
                let gone = cards.swap_remove(next(cards.len() as u64) as usize);
                cell.writer
                    .write(Some(store), move |tx| crate::storage::record::write(tx, store, Some(&gone), None))
                    .await
                    .unwrap();
            }
            check(cards.len()).await;
            // A moment on: cards expire (held status views are built again), none is written.
            moment.fetch_add(step, std::sync::atomic::Ordering::Relaxed);
            check(cards.len()).await;
        }
        // Per sort: every card, two customers' and eight views, all held.
        let stats = cell.writer.orders.meter.stats();
        assert!(stats.hits > 5 * stats.misses && stats.entries == 4 * 3 + 32, "{stats:?}");
        cell.close();
    }

    /// A list longer than a build reads alone (`storage::read::scan_split`) is read in parts,
    /// one per core, and answers as its order rows do: every sort over every card, a customer's
    /// partition in the default order, and a customer's cards in another order kept to them by
    /// their summaries.
    #[tokio::test]
    async fn a_large_list_built_in_parts_answers_as_the_order_rows_do() {
        use crate::storage::list::page_from_rows;
        let (_dir, cell, store, first) = cell_with_card(500).await;
        let customers: Vec<Uuid> = (0..2).map(|_| cell.clock.new_id()).collect();
        let (now, ids): (i64, Vec<Uuid>) = (cell.clock.now_ms(), (0..12_000).map(|_| cell.clock.new_id()).collect());
        let written = customers.clone();
        cell.writer
            .write(Some(store), move |tx| {
                for (i, id) in ids.iter().copied().enumerate() {
                    let value = usd(100 + (i as i64 * 7_919) % 100_000);
                    let new = NewGiftCard { initial_value: value, code: None, expiry: None, note: None, customer_id: None };
                    let mut card = GiftCard::issue(store, &new, &format!("GIFTCARDBULK{i:05}"), id, now);
                    // Seven in ten of one customer: that partition too is longer than one read.
                    card.customer_id = Some(written[usize::from(i % 10 >= 7)]);
                    write_gift_card(tx, store, None, &card)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let cards = 12_001;
        let customer = vec![customers[0].as_bytes().to_vec()];
        for (sort, filters) in [
            ("created_at", vec![]),
            ("balance", vec![]),
            ("initial_value", vec![]),
            ("created_at", vec![(1, customer.clone())]),
            ("balance", vec![(1, customer.clone())]),
        ] {
            for desc in [false, true] {
                for offset in [0, 4_000, 8_191, 8_400, cards - 3] {
                    let q = ListQuery { sort, desc, offset, limit: 7, filters: filters.clone(), ..Default::default() };
                    let held = cell.list::<GiftCard>(store, &q).await.unwrap();
                    let rows = page_from_rows::<GiftCard>(&cell.read().unwrap(), store, &q, 0).unwrap();
                    let ids = |l: &crate::storage::list::Listed<GiftCard>| l.items.iter().map(|c| c.id).collect::<Vec<_>>();
                    assert_eq!((held.total, ids(&held)), (rows.total, ids(&rows)), "{sort} desc={desc} {filters:?} at {offset}");
                }
            }
        }
        let all = cell.list::<GiftCard>(store, &ListQuery { sort: "created_at", limit: 1, ..Default::default() }).await.unwrap();
        assert_eq!((all.total, all.items[0].id), (cards as u64, first.id));
        cell.close();
    }

    #[tokio::test]
    async fn a_smaller_redemption_leaves_the_rest_and_is_found_by_code() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        assert_eq!(redeem(&cell, store, card.id, usd(200), cell.clock.new_id()).await.unwrap(), usd(200));
        let found = by_code(&cell, store, "gift 2026 abcd").unwrap().unwrap();
        assert_eq!((found.id, found.balance, found.spendable(cell.clock.now_ms())), (card.id, 300, 300));
        assert!(by_code(&cell, store, "GIFT2026ABCE").unwrap().is_none());
        assert!(by_code(&cell, cell.clock.new_id(), "GIFT2026ABCD").unwrap().is_none(), "codes belong to one store");
        assert!(by_code(&cell, store, "not a code!").unwrap().is_none());
        cell.close();
    }

    #[tokio::test]
    async fn a_disabled_card_or_another_currency_is_refused_and_nothing_is_written() {
        let (_dir, cell, store, card) = cell_with_card(500).await;
        let eur = Money { amount: 100, currency: Currency::parse("EUR").unwrap() };
        let e = redeem(&cell, store, card.id, eur, cell.clock.new_id()).await.unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        let off = UpdateGiftCard { disabled: Some(true), ..Default::default() };
        update(&cell, store, card.id, off).await.unwrap();
        let e = redeem(&cell, store, card.id, usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!((e.code, e.message.contains("disabled")), (Code::BUSINESS_RULE, true));
        let unknown = redeem(&cell, store, cell.clock.new_id(), usd(100), cell.clock.new_id()).await.unwrap_err();
        assert_eq!(unknown.code, Code::BUSINESS_RULE);
        let after = cell.get::<GiftCard>(store, card.id).unwrap();
        assert_eq!((after.balance, after.redemptions.len()), (500, 0));
        cell.close();
    }
}
