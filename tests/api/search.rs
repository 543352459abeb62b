//! Product search, the outbox that keeps the index in step, restarts and store moves, and the
//! simplified selection list.

use std::collections::HashSet;

use serde_json::{Value, json};
use shopcell::cells::product_search;
use shopcell::domain::product::Product;
use shopcell::domain::time::parse_rfc3339;
use shopcell::search::query::{SearchRequest, Sort};
use shopcell::storage::codec::{decode, encode};
use shopcell::storage::keys::Key;
use shopcell::storage::tables::{OUTBOX, PRODUCTS};
use shopcell::storage::{self};
use uuid::Uuid;

use crate::support::*;

fn usd(amount: i64) -> Value {
    json!({"amount": amount, "currency": "USD"})
}

async fn create(c: &HttpClient, u: &User, store: &str, body: Value) -> Value {
    c.post(&format!("/api/v1/stores/{store}/products"), Some(&u.token), body).await.expect(201).body
}

/// One id, as [`ids`] answers it.
fn one(id: &str) -> Vec<String> {
    vec![id.to_string()]
}

fn ids(body: &Value) -> Vec<String> {
    body["data"].as_array().expect("data").iter().map(|p| p["id"].as_str().expect("id").to_string()).collect()
}

fn search_path(store: &str, query: &str) -> String {
    format!("/api/v1/stores/{store}/products/search?{query}")
}

/// A store with three products: two variants with codes, one with one, one without any.
struct Catalog {
    user: User,
    store: String,
    headphones: String,
    shirt: String,
    mug: String,
}

async fn catalog(c: &HttpClient) -> Catalog {
    let user = create_user(c).await;
    let store = create_store(c, &user).await;
    let headphones = create(
        c,
        &user,
        &store,
        json!({"title": "Wireless Headphones", "status": "ACTIVE", "variants": [
            {"title": "Black", "sku": "WH-100-BLK", "barcode": "0123456789012", "price": usd(9900)},
            {"title": "White", "sku": "WH-100-WHT", "barcode": "0123456789029", "price": usd(9900)}
        ]}),
    )
    .await;
    let shirt = create(
        c,
        &user,
        &store,
        json!({"title": "Linen Shirt", "variants": [{"title": "Large", "sku": "LS-L", "barcode": "9780000000001", "price": usd(4500)}]}),
    )
    .await;
    let mug = create(c, &user, &store, json!({"title": "Ceramic Mug", "price": usd(1200)})).await;
    let id = |v: &Value| v["id"].as_str().expect("id").to_string();
    let cat = Catalog { headphones: id(&headphones), shirt: id(&shirt), mug: id(&mug), user, store };
    get_until(c, &search_path(&cat.store, "q=mug"), Some(&cat.user.token), &[], |b| b["total"] == 1).await;
    cat
}

#[tokio::test]
async fn search_matches_titles_with_typos_and_codes_exactly_or_by_prefix() {
    let app = spawn_app().await;
    let c = &app.client;
    let k = catalog(c).await;
    let find = |query: &str| {
        let path = search_path(&k.store, query);
        let token = k.user.token.clone();
        async move { c.get(&path, Some(&token)).await.expect(200).body }
    };

    // Typos in titles: one edit in a 7-letter word, two in a 9-letter one.
    let b = find("q=wireles%20hedphnes&searchBy=title").await;
    assert_eq!(ids(&b), one(&k.headphones));
    assert_eq!(
        (b["total"].as_u64(), b["page"].as_u64(), b["limit"].as_u64(), b["totalPages"].as_u64()),
        (Some(1), Some(1), Some(20), Some(1))
    );
    assert_eq!(b["nextCursor"], Value::Null);
    // The hit is the full product view.
    assert_eq!(b["data"][0]["title"], "Wireless Headphones");
    assert_eq!(b["data"][0]["variants"].as_array().map(Vec::len), Some(2));
    // Short words are matched exactly (no typo allowed under four letters), and as a prefix.
    assert_eq!(ids(&find("q=mgu&searchBy=title").await), Vec::<String>::new());
    assert_eq!(ids(&find("q=cera&searchBy=title").await), one(&k.mug));
    // Codes are not words of the title.
    assert_eq!(find("q=WH-100-BLK&searchBy=title").await["total"], 0);

    // SKU: exact (any case) and prefix; a product matching by two variants counts once.
    assert_eq!(ids(&find("q=wh-100-blk&searchBy=sku").await), one(&k.headphones));
    assert_eq!(ids(&find("q=WH-100&searchBy=sku").await), one(&k.headphones));
    assert_eq!(ids(&find("q=LS-L&searchBy=sku").await), one(&k.shirt));
    assert_eq!(find("q=WH-1000&searchBy=sku").await["total"], 0);
    // A typo in a code finds nothing: codes are exact.
    assert_eq!(find("q=WH-100-BLC&searchBy=sku").await["total"], 0);

    // Barcode: exact and prefix.
    assert_eq!(ids(&find("q=0123456789029&searchBy=barcode").await), one(&k.headphones));
    assert_eq!(ids(&find("q=978&searchBy=barcode").await), one(&k.shirt));
    assert_eq!(find("q=978&searchBy=sku").await["total"], 0);

    // Variant titles.
    assert_eq!(ids(&find("q=large&searchBy=variantTitle").await), one(&k.shirt));
    assert_eq!(ids(&find("q=white&searchBy=variantTitle").await), one(&k.headphones));
    assert_eq!(find("q=white&searchBy=title").await["total"], 0);

    // `all` (the default) looks everywhere.
    assert_eq!(ids(&find("q=ls-l").await), one(&k.shirt));
    assert_eq!(ids(&find("q=black").await), one(&k.headphones));
    assert_eq!(ids(&find("q=0123456789012&searchBy=all").await), one(&k.headphones));
    assert_eq!(ids(&find("q=linnen").await), one(&k.shirt));
}

#[tokio::test]
async fn bad_search_parameters_are_rejected_naming_the_parameter() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    for (query, field) in [
        ("q=mug&searchBy=name", "searchBy"),
        ("searchBy=title", "q"),
        ("q=%20%20", "q"),
        ("q=mug&sort=cheapest", "sort"),
        ("q=mug&limit=251", "limit"),
        ("q=mug&limit=0", "limit"),
        ("q=mug&page=0", "page"),
        ("q=mug&page=501&limit=20", "page"),
        ("q=mug&cursor=not-a-cursor", "cursor"),
    ] {
        let a = c.get(&search_path(&s, query), Some(&u.token)).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "VALIDATION_FAILED"), "{query}: {}", a.body);
        assert_eq!(a.body["error"]["fields"][0]["field"], field, "{query}: {}", a.body);
    }
    // Without a token, and for a store the caller is not a member of.
    assert_eq!(c.get(&search_path(&s, "q=mug"), None).await.status.as_u16(), 401);
    let other = create_user(c).await;
    assert_eq!(c.get(&search_path(&s, "q=mug"), Some(&other.token)).await.code(), "NOT_FOUND");
}

/// 25 chairs with distinct prices and titles.
async fn chairs(c: &HttpClient) -> (User, String, Vec<Value>) {
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let mut made = Vec::new();
    for i in 0..25i64 {
        let title = format!("Garden Chair {}", (b'A' + ((i * 7) % 25) as u8) as char);
        made.push(create(c, &u, &s, json!({"title": title, "price": usd(1000 + (i * 37) % 25 * 100), "status": "ACTIVE"})).await);
    }
    get_until(c, &search_path(&s, "q=chair"), Some(&u.token), &[], |b| b["total"] == 25).await;
    (u, s, made)
}

#[tokio::test]
async fn sorts_order_the_hits() {
    let app = spawn_app().await;
    let c = &app.client;
    let (u, s, made) = chairs(c).await;
    let get = |sort: &str| {
        let path = search_path(&s, &format!("q=chair&limit=250&sort={sort}"));
        let token = u.token.clone();
        async move { c.get(&path, Some(&token)).await.expect(200).body }
    };
    let prices = |b: &Value| -> Vec<i64> {
        b["data"].as_array().unwrap().iter().map(|p| p["price"]["amount"].as_i64().unwrap()).collect()
    };
    let titles = |b: &Value| -> Vec<String> {
        b["data"].as_array().unwrap().iter().map(|p| p["title"].as_str().unwrap().to_string()).collect()
    };

    let asc = prices(&get("price_asc").await);
    let mut sorted = asc.clone();
    sorted.sort();
    assert_eq!(asc, sorted);
    assert_eq!(asc.len(), 25);
    let desc = prices(&get("price_desc").await);
    sorted.reverse();
    assert_eq!(desc, sorted);

    let t = titles(&get("title_asc").await);
    let mut want: Vec<String> = made.iter().map(|p| p["title"].as_str().unwrap().to_string()).collect();
    want.sort();
    assert_eq!(t, want);
    want.reverse();
    assert_eq!(titles(&get("title_desc").await), want);

    // Newest first; products created in the same millisecond by id, also newest first.
    let newest: Vec<String> = ids(&get("created_desc").await);
    let mut created: Vec<(i64, String)> = made
        .iter()
        .map(|p| (parse_rfc3339(p["createdAt"].as_str().unwrap()).unwrap(), p["id"].as_str().unwrap().to_string()))
        .collect();
    created.sort();
    created.reverse();
    assert_eq!(newest, created.into_iter().map(|(_, id)| id).collect::<Vec<_>>());

    // Relevance answers every match too.
    assert_eq!(get("relevance").await["total"], 25);
}

#[tokio::test]
async fn cursors_page_through_every_hit_once() {
    let app = spawn_app().await;
    let c = &app.client;
    let (u, s, made) = chairs(c).await;
    for sort in ["relevance", "price_asc", "price_desc", "title_asc", "title_desc", "created_desc"] {
        let first = c.get(&search_path(&s, &format!("q=chair&limit=7&sort={sort}")), Some(&u.token)).await.expect(200).body;
        let mut seen = ids(&first);
        let mut pages = vec![first["page"].as_u64().unwrap()];
        let mut cursor = first["nextCursor"].as_str().map(str::to_string);
        // The second page by number is the second page by cursor.
        let by_number =
            c.get(&search_path(&s, &format!("q=chair&limit=7&sort={sort}&page=2")), Some(&u.token)).await.expect(200).body;
        let mut second = None;
        while let Some(cur) = cursor {
            let b = c
                .get(&search_path(&s, &format!("q=chair&limit=7&sort={sort}&cursor={cur}")), Some(&u.token))
                .await
                .expect(200)
                .body;
            assert_eq!(b["total"], 25, "{sort}");
            assert_eq!(b["totalPages"], 4, "{sort}");
            second.get_or_insert_with(|| ids(&b));
            seen.extend(ids(&b));
            pages.push(b["page"].as_u64().unwrap());
            cursor = b["nextCursor"].as_str().map(str::to_string);
        }
        assert_eq!(pages, [1, 2, 3, 4], "{sort}");
        assert_eq!(seen.len(), 25, "{sort}");
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 25, "{sort}: a product came twice");
        let all: HashSet<&str> = made.iter().map(|p| p["id"].as_str().unwrap()).collect();
        assert!(seen.iter().all(|id| all.contains(id.as_str())), "{sort}");
        assert_eq!(second, Some(ids(&by_number)), "{sort}");
    }
    // A cursor belongs to its query and sort.
    let first = c.get(&search_path(&s, "q=chair&limit=7&sort=price_asc"), Some(&u.token)).await.expect(200).body;
    let cur = first["nextCursor"].as_str().unwrap();
    for other in
        [format!("q=chair&limit=7&sort=price_desc&cursor={cur}"), format!("q=garden&limit=7&sort=price_asc&cursor={cur}")]
    {
        let a = c.get(&search_path(&s, &other), Some(&u.token)).await;
        assert_eq!((a.status.as_u16(), a.body["error"]["fields"][0]["field"].as_str()), (400, Some("cursor")), "{other}");
    }
}

#[tokio::test]
async fn a_second_term_narrows_the_results() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let blue_chair = create(c, &u, &s, json!({"title": "Blue Garden Chair", "price": usd(100)})).await;
    create(c, &u, &s, json!({"title": "Red Garden Chair", "price": usd(100)})).await;
    create(c, &u, &s, json!({"title": "Blue Mug", "price": usd(100)})).await;
    get_until(c, &search_path(&s, "q=chair"), Some(&u.token), &[], |b| b["total"] == 2).await;
    let b = c.get(&search_path(&s, "q=chair&search=blue"), Some(&u.token)).await.expect(200).body;
    assert_eq!(ids(&b), [blue_chair["id"].as_str().unwrap().to_string()]);
    assert_eq!(b["total"], 1);
    assert_eq!(c.get(&search_path(&s, "q=blue"), Some(&u.token)).await.expect(200).body["total"], 2);
    assert_eq!(c.get(&search_path(&s, "q=mug&search=chair"), Some(&u.token)).await.expect(200).body["total"], 0);
}

#[tokio::test]
async fn every_word_must_match_unless_no_product_has_them_all() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let id = |v: Value| v["id"].as_str().expect("id").to_string();
    let blue_chair = id(create(c, &u, &s, json!({"title": "Blue Garden Chair", "price": usd(100)})).await);
    let red_chair = id(create(c, &u, &s, json!({"title": "Red Garden Chair", "price": usd(100)})).await);
    let blue_mug = id(create(c, &u, &s, json!({"title": "Blue Mug", "price": usd(100)})).await);
    get_until(c, &search_path(&s, "q=garden"), Some(&u.token), &[], |b| b["total"] == 2).await;
    let find = |q: &str| {
        let path = search_path(&s, &format!("q={}", q.replace(' ', "%20")));
        let token = u.token.clone();
        async move { c.get(&path, Some(&token)).await.expect(200).body }
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    // Both words match: only the product having both, though each word alone finds two.
    assert_eq!(find("blue").await["total"], 2);
    assert_eq!(find("chair").await["total"], 2);
    let b = find("blue chair").await;
    assert_eq!((ids(&b), b["total"].as_u64()), (one(&blue_chair), Some(1)));
    // Each word keeps its own typo tolerance, and the last one matches as a prefix.
    assert_eq!(ids(&find("bleu chiar").await), one(&blue_chair));
    assert_eq!(sorted(ids(&find("garden ch").await)), sorted(vec![blue_chair.clone(), red_chair.clone()]));
    let b = find("red garden chair").await;
    assert_eq!((ids(&b), b["total"].as_u64()), (one(&red_chair), Some(1)));

    // A word no product has: the others' matches are still found.
    let b = find("chair zebra").await;
    assert_eq!((sorted(ids(&b)), b["total"].as_u64()), (sorted(vec![blue_chair.clone(), red_chair.clone()]), Some(2)));
    // No product has every word: products with any of them, those with more words first.
    let b = find("red mug").await;
    assert_eq!((sorted(ids(&b)), b["total"].as_u64()), (sorted(vec![red_chair.clone(), blue_mug.clone()]), Some(2)));
    let b = find("blue garden zebra").await;
    assert_eq!(b["total"], 3);
    assert_eq!(ids(&b)[0], blue_chair);
    // Words no product has find nothing.
    assert_eq!(find("zebra okapi").await["total"], 0);
    // A second term still narrows a relaxed query.
    let path = search_path(&s, "q=red%20mug&search=chair");
    let b = c.get(&path, Some(&u.token)).await.expect(200).body;
    assert_eq!((ids(&b), b["total"].as_u64()), (one(&red_chair), Some(1)));
}

#[tokio::test]
async fn another_stores_products_never_appear() {
    let app = spawn_app().await;
    let c = &app.client;
    let a = create_user(c).await;
    let b = create_user(c).await;
    let sa = create_store(c, &a).await;
    let sb = create_store(c, &b).await;
    let pa = create(
        c,
        &a,
        &sa,
        json!({"title": "Copper Kettle", "price": usd(100), "variants": [{"sku": "KET-1", "price": usd(100)}]}),
    )
    .await;
    let pb = create(
        c,
        &b,
        &sb,
        json!({"title": "Copper Kettle", "price": usd(100), "variants": [{"sku": "KET-1", "price": usd(100)}]}),
    )
    .await;
    let in_a = get_until(c, &search_path(&sa, "q=kettle"), Some(&a.token), &[], |b| b["total"] == 1).await;
    let in_b = get_until(c, &search_path(&sb, "q=kettle"), Some(&b.token), &[], |b| b["total"] == 1).await;
    assert_eq!(ids(&in_a), [pa["id"].as_str().unwrap().to_string()]);
    assert_eq!(ids(&in_b), [pb["id"].as_str().unwrap().to_string()]);
    assert_eq!(ids(&c.get(&search_path(&sa, "q=KET-1&searchBy=sku"), Some(&a.token)).await.expect(200).body), ids(&in_a));
    let sel = c.get(&format!("/api/v1/stores/{sa}/products/selection"), Some(&a.token)).await.expect(200).body;
    assert_eq!(ids(&sel), ids(&in_a));
}

#[tokio::test]
async fn writes_are_searchable_within_a_second() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let p = create(c, &u, &s, json!({"title": "Walnut Desk", "price": usd(50000)})).await;
    let id = p["id"].as_str().unwrap().to_string();
    let b = get_until(c, &search_path(&s, "q=walnut"), Some(&u.token), &[], |b| b["total"] == 1).await;
    assert_eq!(ids(&b), one(&id));

    // A title change: the new words find it, the old ones no longer do.
    c.patch(&format!("/api/v1/stores/{s}/products/{id}"), Some(&u.token), json!({"title": "Oak Desk", "status": "active"}))
        .await
        .expect(200);
    get_until(c, &search_path(&s, "q=oak"), Some(&u.token), &[], |b| b["total"] == 1).await;
    assert_eq!(c.get(&search_path(&s, "q=walnut"), Some(&u.token)).await.expect(200).body["total"], 0);
    // The stored view is served, not a copy from the index.
    let hit = c.get(&search_path(&s, "q=oak"), Some(&u.token)).await.expect(200).body;
    assert_eq!(hit["data"][0]["status"], "ACTIVE");

    // A new variant's sku.
    c.post(
        &format!("/api/v1/stores/{s}/products/{id}/variants"),
        Some(&u.token),
        json!({"title": "Large", "sku": "DESK-L", "price": usd(60000)}),
    )
    .await
    .expect(201);
    get_until(c, &search_path(&s, "q=DESK-L&searchBy=sku"), Some(&u.token), &[], |b| ids(b) == one(&id)).await;

    // A delete.
    c.delete(&format!("/api/v1/stores/{s}/products/{id}"), Some(&u.token)).await.expect(204);
    get_until(c, &search_path(&s, "q=oak"), Some(&u.token), &[], |b| b["total"] == 0).await;
    assert_eq!(c.get(&search_path(&s, "q=DESK-L&searchBy=sku"), Some(&u.token)).await.expect(200).body["total"], 0);
}

/// Reads a product row of a stopped server's cell, changes its title, writes it back and, when
/// `queue`, appends an outbox entry as the product writer would have.
fn retitle_offline(cell_db: &std::path::Path, store: Uuid, id: Uuid, title: &str, queue: bool) {
    use redb::ReadableTable;
    let db = storage::open(cell_db, shopcell::cells::DATABASE, shopcell::storage::ONE_OFF_CACHE).expect("open the stopped cell");
    let txn = db.begin_write().expect("write");
    {
        let mut products = txn.open_table(PRODUCTS.def).expect("products");
        let key = Key::store(store).id(id).into_vec();
        let row = products.get(key.as_slice()).expect("get").expect("the row").value().to_vec();
        let mut p: Product = decode(&row).expect("decode");
        p.title = title.to_string();
        products.insert(key.as_slice(), encode(&p).expect("encode").as_slice()).expect("insert");
        if queue {
            let mut outbox = txn.open_table(OUTBOX).expect("outbox");
            outbox.insert(Key::store(store).u64(u64::MAX - 1).bytes(), id.as_bytes().as_slice()).expect("append");
        }
    }
    txn.commit().expect("commit");
}

fn outbox_len(cell_db: &std::path::Path) -> u64 {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = storage::open(cell_db, shopcell::cells::DATABASE, shopcell::storage::ONE_OFF_CACHE).expect("open the stopped cell");
    db.begin_read().expect("read").open_table(OUTBOX).expect("outbox").len().expect("len")
}

#[tokio::test]
async fn a_restart_replays_the_outbox_and_keeps_the_index_without_rebuilding_it() {
    let mut app = spawn_app().await;
    let data = app.dir.path().to_path_buf();
    let cell_db = data.join("cells/cell-1/cell.redb");
    let (u, s) = {
        let c = &app.client;
        let u = create_user(c).await;
        let s = create_store(c, &u).await;
        (u, s)
    };
    let c = app.client.clone();
    let lamp = create(&c, &u, &s, json!({"title": "Brass Lamp", "price": usd(100)})).await;
    let vase = create(&c, &u, &s, json!({"title": "Glass Vase", "price": usd(100)})).await;
    get_until(&c, &search_path(&s, "q=vase"), Some(&u.token), &[], |b| b["total"] == 1).await;
    app.stop().await;
    // A clean stop leaves nothing pending.
    assert_eq!(outbox_len(&cell_db), 0);

    // As if the process had died between a commit and its indexing: the row changed and its
    // outbox entry is pending. The vase changes without an entry, which only a rebuild would see.
    let store = Uuid::parse_str(&s).unwrap();
    let lamp_id = Uuid::parse_str(lamp["id"].as_str().unwrap()).unwrap();
    let vase_id = Uuid::parse_str(vase["id"].as_str().unwrap()).unwrap();
    retitle_offline(&cell_db, store, lamp_id, "Copper Lamp", true);
    retitle_offline(&cell_db, store, vase_id, "Crystal Bowl", false);
    assert_eq!(outbox_len(&cell_db), 1);

    let mut app2 = spawn_app_in(&data).await;
    let c2 = app2.client.clone();
    get_until(&c2, &search_path(&s, "q=copper"), Some(&u.token), &[], |b| ids(b) == [lamp_id.to_string()]).await;
    assert_eq!(c2.get(&search_path(&s, "q=brass"), Some(&u.token)).await.expect(200).body["total"], 0);
    // Not rebuilt: the vase is still found by its indexed title, not by the new one.
    assert_eq!(ids(&c2.get(&search_path(&s, "q=vase"), Some(&u.token)).await.expect(200).body), [vase_id.to_string()]);
    assert_eq!(c2.get(&search_path(&s, "q=crystal"), Some(&u.token)).await.expect(200).body["total"], 0);
    app2.stop().await;
    assert_eq!(outbox_len(&cell_db), 0);

    // `admin reindex` rebuilds from redb.
    let n = product_search::reindex_offline(&data.join("cells/cell-1")).expect("reindex");
    assert_eq!(n, 2);
    let mut app3 = spawn_app_in(&data).await;
    let c3 = app3.client.clone();
    assert_eq!(ids(&c3.get(&search_path(&s, "q=crystal"), Some(&u.token)).await.expect(200).body), [vase_id.to_string()]);
    assert_eq!(c3.get(&search_path(&s, "q=vase"), Some(&u.token)).await.expect(200).body["total"], 0);
    app3.stop().await;
}

#[tokio::test]
async fn a_moved_store_is_searchable_on_its_new_cell_and_gone_from_the_old() {
    let app = spawn_app_with_cells(&["cell-1", "cell-2"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let p =
        create(c, &u, &s, json!({"title": "Velvet Sofa", "price": usd(100), "variants": [{"sku": "SOFA-9", "price": usd(100)}]}))
            .await;
    get_until(c, &search_path(&s, "q=sofa"), Some(&u.token), &[], |b| b["total"] == 1).await;

    let node = app.server.as_ref().unwrap().node.clone();
    let account = node.account.clone().unwrap();
    let store = Uuid::parse_str(&s).unwrap();
    let from = account.locate(store).unwrap().unwrap();
    let to = if from == "cell-1" { "cell-2" } else { "cell-1" };
    let key = account.service_key.clone();
    let moved = c
        .send(
            hyper::Method::POST,
            "/internal/v1/moves",
            None,
            &[("x-shopcell-service", key.as_str())],
            Some(bytes::Bytes::from(json!({"storeId": s, "to": to}).to_string())),
        )
        .await;
    assert!(moved.status.is_success(), "move: {} {}", moved.status, moved.body);
    assert_eq!(account.locate(store).unwrap().as_deref(), Some(to));

    // Searchable on the target (queued whole on arrival), by title and by sku.
    let b = get_until(c, &search_path(&s, "q=sofa"), Some(&u.token), &[], |b| b["total"] == 1).await;
    assert_eq!(ids(&b), [p["id"].as_str().unwrap().to_string()]);
    assert_eq!(c.get(&search_path(&s, "q=SOFA-9&searchBy=sku"), Some(&u.token)).await.expect(200).body["total"], 1);
    // The source's index holds nothing of the store any more.
    let req = SearchRequest {
        store,
        terms: Vec::new(),
        status: None,
        product_type: None,
        allowed: None,
        sort: Sort::CreatedDesc,
        offset: 0,
        limit: 10,
        after: None,
    };
    assert_eq!(node.cells[&from].search.search(&req, 0).unwrap().total, 0);
    assert_eq!(node.cells[to].search.search(&req, 0).unwrap().total, 1);
}

#[tokio::test]
async fn selection_lists_simplified_products_offset_style() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let mut made = Vec::new();
    for (title, status, kind) in [
        ("Oak Table", "ACTIVE", "Furniture"),
        ("Pine Table", "DRAFT", "Furniture"),
        ("Tea Cup", "ACTIVE", "Kitchen"),
        ("Tea Pot", "ARCHIVED", "Kitchen"),
        ("Oak Shelf", "ACTIVE", "Furniture"),
    ] {
        made.push(create(c, &u, &s, json!({"title": title, "status": status, "productType": kind, "price": usd(700)})).await);
    }
    let sku = create(
        c,
        &u,
        &s,
        json!({"title": "Lamp", "variants": [{"sku": "LAMP-1", "price": usd(300)}, {"sku": "LAMP-2", "price": usd(200)}]}),
    )
    .await;
    let base = format!("/api/v1/stores/{s}/products/selection");
    let all = get_until(c, &base, Some(&u.token), &[], |b| b["total"] == 6).await;
    assert_eq!(
        (all["page"].as_u64(), all["limit"].as_u64(), all["offset"].as_u64(), all["totalPages"].as_u64()),
        (Some(1), Some(20), Some(0), Some(1))
    );
    // Newest first, simplified items.
    assert_eq!(
        all["data"][0],
        json!({
            "id": sku["id"], "title": "Lamp", "status": "DRAFT", "productType": "", "price": usd(200), "imageUrl": null, "variantsCount": 2
        })
    );
    assert_eq!(all["data"][1]["title"], "Oak Shelf");

    let page = c.get(&format!("{base}?offset=2&limit=2"), Some(&u.token)).await.expect(200).body;
    assert_eq!(
        (page["page"].as_u64(), page["offset"].as_u64(), page["limit"].as_u64(), page["totalPages"].as_u64()),
        (Some(2), Some(2), Some(2), Some(3))
    );
    assert_eq!(ids(&page), [made[3]["id"].as_str().unwrap().to_string(), made[2]["id"].as_str().unwrap().to_string()]);
    // page = floor(offset / limit) + 1
    assert_eq!(c.get(&format!("{base}?offset=3&limit=2"), Some(&u.token)).await.expect(200).body["page"], 2);

    let titles = |b: &Value| -> Vec<String> {
        b["data"].as_array().unwrap().iter().map(|p| p["title"].as_str().unwrap().to_string()).collect()
    };
    let active = c.get(&format!("{base}?status=active"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&active), ["Oak Shelf", "Tea Cup", "Oak Table"]);
    assert_eq!(active["total"], 3);
    let furniture = c.get(&format!("{base}?productType=furniture&status=ACTIVE"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&furniture), ["Oak Shelf", "Oak Table"]);
    assert_eq!(titles(&c.get(&format!("{base}?search=oak"), Some(&u.token)).await.expect(200).body), ["Oak Shelf", "Oak Table"]);
    assert_eq!(titles(&c.get(&format!("{base}?search=LAMP-2"), Some(&u.token)).await.expect(200).body), ["Lamp"]);
    assert_eq!(
        titles(&c.get(&format!("{base}?search=tea&productType=kitchen&status=archived"), Some(&u.token)).await.expect(200).body),
        ["Tea Pot"]
    );

    for (query, field) in
        [("limit=251", "limit"), ("offset=-1", "offset"), ("status=live", "status"), ("collection=abc", "collection")]
    {
        let a = c.get(&format!("{base}?{query}"), Some(&u.token)).await;
        assert_eq!(
            (a.status.as_u16(), a.body["error"]["fields"][0]["field"].as_str()),
            (400, Some(field)),
            "{query}: {}",
            a.body
        );
    }
    // Only a collection's products, combined with the other filters.
    let col =
        c.post(&format!("/api/v1/stores/{s}/collections"), Some(&u.token), json!({"title": "Oak things"})).await.expect(201).body;
    let col_id = col["id"].as_str().unwrap();
    c.post(
        &format!("/api/v1/stores/{s}/collections/{col_id}/products"),
        Some(&u.token),
        json!({"productIds": [made[0]["id"], made[1]["id"], made[4]["id"]]}),
    )
    .await
    .expect(200);
    let in_col = c.get(&format!("{base}?collection={col_id}"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&in_col), ["Oak Shelf", "Pine Table", "Oak Table"]);
    assert_eq!(in_col["total"], 3);
    let active_in_col =
        c.get(&format!("{base}?collection={col_id}&status=active&search=oak"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&active_in_col), ["Oak Shelf", "Oak Table"]);
    // A collection that does not exist in the store is named.
    let a = c.get(&format!("{base}?collection={}", Uuid::now_v7()), Some(&u.token)).await;
    assert_eq!((a.status.as_u16(), a.body["error"]["fields"][0]["field"].as_str()), (400, Some("collection")), "{}", a.body);
}
