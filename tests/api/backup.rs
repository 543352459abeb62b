//! Online backup, restore and check: one cut under write load, and every refusal.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::Value;
use shopcell::backup::{client, manifest, restore};

use crate::support::*;

fn service_key(app: &TestApp) -> String {
    std::fs::read_to_string(app.dir.path().join("account/service.key")).unwrap().trim().to_string()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A product create answered to a writer, with when it was sent and answered.
struct Acked {
    sent: Instant,
    answered: Instant,
    product: Value,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_write_load_restores_every_acknowledged_write_whole_or_absent() {
    let app = spawn_app().await;
    let c = app.client.clone();
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    let mut before = Vec::new();
    for i in 0..10 {
        before.push(create_product(&c, &owner, &store, &format!("Before {i}"), 1000 + i).await);
    }

    // Four writers create products throughout the backup.
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (c, token, store, stop) = (c.clone(), owner.token.clone(), store.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let body = serde_json::json!({"title": format!("During {w}-{i}"), "price": {"amount": 500, "currency": "USD"}, "status": "ACTIVE"});
                let a = c.post(&format!("/api/v1/stores/{store}/products"), Some(&token), body).await;
                assert_eq!(a.status, 201, "no write is refused during a backup: {}", a.body);
                acked.push(Acked { sent, answered: Instant::now(), product: a.body });
                i += 1;
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await; // let the writers get going
    let backup_dir = tempfile::tempdir().unwrap();
    let to = backup_dir.path().join("b");
    let began = Instant::now();
    let report = client::backup(&app.base, &service_key(&app), &to).await.expect("backup");
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    // Overlapping it, not within it: on a loaded machine a backup of this small store can take
    // less time than one write's round trip.
    assert!(acked.iter().any(|a| a.sent < ended && a.answered > began), "some writes ran during the backup");

    // The layout: private files and directories, the keys, a manifest listing checksums.
    assert_eq!(mode(&to), 0o700);
    for f in ["manifest.json", "account/account.rows", "account/jwt-rs256.pem", "account/service.key", "cells/cell-1/cell.rows"] {
        assert_eq!(mode(&to.join(f)), 0o600, "{f}");
    }
    assert_eq!(mode(&to.join("cells/cell-1")), 0o700);
    assert!(!to.join("cells/cell-1/search").exists(), "the search index is rebuilt, not copied");
    let m: Value = serde_json::from_slice(&std::fs::read(to.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["backupFormat"], 3);
    assert!(
        m["files"].as_array().unwrap().iter().all(|f| f["tables"].get("product_views").is_none()),
        "rebuilt at restore, not backed up"
    );
    assert_eq!(m["dataFormat"], shopcell::storage::FORMAT_VERSION);
    let cell_entry = m["files"].as_array().unwrap().iter().find(|f| f["path"] == "cells/cell-1/cell.rows").unwrap().clone();
    assert_eq!(cell_entry["kind"], "cell");
    assert_eq!(cell_entry["sha256"].as_str().unwrap().len(), 64);
    let products_rows = cell_entry["tables"]["products"].as_u64().unwrap();
    assert_eq!(report.manifest.files.len(), m["files"].as_array().unwrap().len());
    // Checksums, rows, every counter against its rows (events were written under load) and
    // placement all agree.
    shopcell::admin::run(shopcell::cli::AdminCommand::Check { data: to.join("none"), backup: Some(to.clone()) })
        .await
        .expect("the backup checks");

    // Restored and started: the token issued before works, every write acknowledged before the
    // backup is there, each one during it whole or absent, none after it.
    let restored_dir = tempfile::tempdir().unwrap();
    let parent_mode = 0o755;
    std::fs::set_permissions(restored_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(parent_mode)).unwrap();
    let data = restored_dir.path().join("data");
    let done = restore::restore(&to, &data, false).expect("restore");
    assert_eq!(mode(restored_dir.path()), parent_mode, "the parent keeps its mode");
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("account/jwt-rs256.pem")), 0o600);
    assert!(done.kept_aside.is_none() && done.unplaced.is_empty());
    assert_eq!(done.indexed["cell-1"], products_rows, "search is rebuilt from every product");
    let again = spawn_app_in(&data).await;
    let r = &again.client;
    let get = |id: &str| format!("/api/v1/stores/{store}/products/{id}");
    for p in &before {
        let a = r.get(&get(p["id"].as_str().unwrap()), Some(&owner.token)).await.expect(200);
        assert_eq!(a.body["title"], p["title"]);
    }
    let mut present = before.len() as u64;
    for a in &acked {
        let id = a.product["id"].as_str().unwrap();
        let got = r.get(&get(id), Some(&owner.token)).await;
        if a.answered < began {
            assert_eq!(got.status, 200, "acknowledged before the backup: {}", a.product["title"]);
        }
        if a.sent > ended {
            assert_eq!(got.status, 404, "sent after the backup: {}", a.product["title"]);
        }
        match got.status.as_u16() {
            200 => {
                assert_eq!(got.body["title"], a.product["title"]);
                assert_eq!(got.body["variants"], a.product["variants"], "whole");
                present += 1;
            }
            404 => assert_eq!(got.code(), "NOT_FOUND"),
            other => panic!("{other}: {}", got.body),
        }
    }
    assert_eq!(present, products_rows, "the backup holds exactly the products found");
    let list = r.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["total"].as_u64(), Some(present), "counters agree with the rows");
    let me = r.get("/api/v1/stores", Some(&owner.token)).await.expect(200);
    assert_eq!(me.body[0]["id"], store.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_backup_at_a_time_and_an_abandoned_one_releases_everything() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let key = service_key(&app);
    let headers = [("x-shopcell-service", key.as_str())];
    let begin = || c.send(Method::POST, "/internal/v1/backups", None, &headers, None);
    let first = begin().await.expect(200);
    let id = first.body["id"].as_str().unwrap().to_string();
    assert_eq!(first.body["databases"][0]["path"], "account/account.redb");
    assert_eq!(first.body["databases"][1]["path"], "cells/cell-1/cell.redb");
    let second = begin().await.expect(409);
    assert_eq!(second.code(), "CONFLICT");
    assert!(second.body["error"]["message"].as_str().unwrap().contains("another backup is under way"));
    // Without the service key the routes do not exist.
    assert_eq!(c.post("/internal/v1/backups", Some(&owner.token), Value::Null).await.status, 404);
    // The caller went away after the cut: writes go on (the barrier is released)…
    create_product(c, &owner, &store, "After the cut", 100).await;
    // …a chunk out of order is refused…
    let wrong = c.send(Method::POST, &format!("/internal/v1/backups/{id}/next?seq=3"), None, &headers, None).await.expect(409);
    assert!(wrong.body["error"]["message"].as_str().unwrap().contains("chunk 0 is next"));
    // …and a minute later the backup has lapsed: another may begin.
    app.clock.advance(Duration::from_secs(61));
    let third = begin().await.expect(200);
    let third_id = third.body["id"].as_str().unwrap();
    let gone = c.send(Method::POST, &format!("/internal/v1/backups/{id}/next?seq=0"), None, &headers, None).await.expect(404);
    assert_eq!(gone.code(), "NOT_FOUND");
    c.send(Method::DELETE, &format!("/internal/v1/backups/{third_id}"), None, &headers, None).await.expect(204);
    begin().await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_or_used_targets_are_refused_with_the_service_untouched() {
    let app = spawn_app().await;
    let key = service_key(&app);
    let tmp = tempfile::tempdir().unwrap();
    // A path under a regular file can be created by no one (the tests may run as root).
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = client::backup(&app.base, &key, &file.join("b")).await.unwrap_err().to_string();
    assert!(err.contains(&file.join("b").display().to_string()), "{err}");
    let used = tmp.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("old"), b"x").unwrap();
    let err = client::backup(&app.base, &key, &used).await.unwrap_err().to_string();
    assert!(err.contains("is not empty"), "{err}");
    // A wrong key: refused by the service, nothing left behind.
    let err = client::backup(&app.base, "wrong", &tmp.path().join("k")).await.unwrap_err().to_string();
    assert!(err.contains("backup not started"), "{err}");
    assert!(!tmp.path().join("k/manifest.json").exists());
    // Nothing was started: a backup proceeds at once.
    client::backup(&app.base, &key, &tmp.path().join("ok")).await.expect("backup");
}

/// Makes a backup of a small installation; answers (app, backup dir holder, backup path).
async fn small_backup() -> (TestApp, User, tempfile::TempDir, std::path::PathBuf) {
    let app = spawn_app().await;
    let owner = create_user(&app.client).await;
    let store = create_store(&app.client, &owner).await;
    create_product(&app.client, &owner, &store, "Kept", 100).await;
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("b");
    client::backup(&app.base, &service_key(&app), &to).await.expect("backup");
    (app, owner, tmp, to)
}

/// A stopped service's data directory holding one store with one product, `title`.
async fn stopped_with_one_product(title: &str) -> (TestApp, User, String, std::path::PathBuf) {
    let mut app = spawn_app().await;
    let owner = create_user(&app.client).await;
    let store = create_store(&app.client, &owner).await;
    create_product(&app.client, &owner, &store, title, 100).await;
    let data = app.dir.path().to_path_buf();
    app.stop().await;
    (app, owner, store, data)
}

/// Writes the manifest of a backup of format `format` in `old` (beside `files`), then checks it,
/// restores it next to it and reads its one product, `title`, back through a started service.
async fn an_earlier_backup_checks_and_restores(
    old: &Path,
    format: u32,
    files: Vec<manifest::Entry>,
    (owner, store, title): (&User, &str, &str),
) {
    let begun = shopcell::backup::Begun {
        id: uuid::Uuid::nil(),
        backup_format: format,
        data_format: shopcell::storage::FORMAT_VERSION,
        cut_at_ms: 0,
        held_us: 0,
        databases: Vec::new(),
    };
    manifest::write(old, &manifest::Manifest::new(&begun, files)).unwrap();
    assert_eq!(manifest::verify(old).expect("it verifies").backup_format, format);
    let beside = old.parent().unwrap();
    shopcell::admin::run(shopcell::cli::AdminCommand::Check { data: beside.join("none"), backup: Some(old.to_path_buf()) })
        .await
        .unwrap_or_else(|e| panic!("a format {format} backup checks: {e}"));
    let restored = beside.join("data");
    let done = restore::restore(old, &restored, false).unwrap_or_else(|e| panic!("a format {format} backup restores: {e}"));
    assert_eq!(done.indexed["cell-1"], 1);
    let again = spawn_app_in(&restored).await;
    let list = again.client.get(&format!("/api/v1/stores/{store}/products"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["total"], 1);
    assert_eq!(list.body["data"][0]["title"], title);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_in_format_1_of_redb_files_still_checks_and_restores() {
    let (_app, owner, store, data) = stopped_with_one_product("Kept in format 1").await;
    // Laid out as format 1 wrote a backup: each database as a redb file (a stopped directory's
    // file holds what the row-by-row copy held), the keys, a manifest of checksums and rows.
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("old");
    let mut files = Vec::new();
    for (path, kind) in [
        ("account/account.redb", Some("account")),
        ("cells/cell-1/cell.redb", Some("cell")),
        ("account/jwt-rs256.pem", None),
        ("account/service.key", None),
    ] {
        let file = old.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::copy(data.join(path), &file).unwrap();
        files.push(match kind {
            Some(kind) => {
                let rows = manifest::table_counts(&file, kind).unwrap();
                manifest::Entry::database(path.into(), kind.into(), &file, rows).unwrap()
            }
            None => manifest::Entry::file(path.into(), &std::fs::read(&file).unwrap()),
        });
    }
    an_earlier_backup_checks_and_restores(&old, 1, files, (&owner, &store, "Kept in format 1")).await;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_or_newer_backups_are_refused_before_anything_is_written() {
    let (_app, _owner, tmp, good) = small_backup().await;
    manifest::verify(&good).expect("the backup verifies");
    let refuse = |dir: &Path, why: &str| {
        let data = tmp.path().join("never");
        let err = restore::restore(dir, &data, false).unwrap_err().to_string();
        assert!(err.contains(why), "{why:?} not in {err:?}");
        assert!(!data.exists(), "nothing written");
        let siblings: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(siblings.iter().all(|n| !n.to_string_lossy().contains("restoring")), "{siblings:?}");
    };
    let case = |name: &str| {
        let dir = tmp.path().join(name);
        copy_dir(&good, &dir);
        dir
    };
    let truncated = case("truncated");
    let cell = truncated.join("cells/cell-1/cell.rows");
    let len = std::fs::metadata(&cell).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&cell).unwrap().set_len(len / 2).unwrap();
    refuse(&truncated, "cells/cell-1/cell.rows is");
    refuse(&truncated, "truncated");

    let altered = case("altered");
    let key = altered.join("account/jwt-rs256.pem");
    let mut bytes = std::fs::read(&key).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&key, bytes).unwrap();
    refuse(&altered, "account/jwt-rs256.pem does not match its checksum");

    let newer = case("newer");
    let m = newer.join("manifest.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    v["dataFormat"] = (shopcell::storage::FORMAT_VERSION + 1).into();
    std::fs::write(&m, serde_json::to_vec(&v).unwrap()).unwrap();
    refuse(&newer, "newer than this build supports");
    v["dataFormat"] = shopcell::storage::FORMAT_VERSION.into();
    v["backupFormat"] = (shopcell::backup::BACKUP_FORMAT + 1).into();
    std::fs::write(&m, serde_json::to_vec(&v).unwrap()).unwrap();
    refuse(&newer, &format!("backup format {}, newer", shopcell::backup::BACKUP_FORMAT + 1));

    let unfinished = case("unfinished");
    std::fs::remove_file(unfinished.join("manifest.json")).unwrap();
    refuse(&unfinished, "no manifest.json: not a complete backup");

    // `admin check` says the same of a backup.
    let check = |dir: &Path| {
        shopcell::admin::run(shopcell::cli::AdminCommand::Check {
            data: tmp.path().join("none"),
            backup: Some(dir.to_path_buf()),
        })
    };
    check(&good).await.expect("a good backup checks");
    let err = check(&altered).await.unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_over_a_directory_needs_replace_and_a_stopped_service() {
    let (mut app, owner, tmp, backup) = small_backup().await;
    let live = app.dir.path().to_path_buf();
    let err = restore::restore(&backup, &live, false).unwrap_err().to_string();
    assert!(err.contains("is not empty") && err.contains("--replace"), "{err}");
    let err = restore::restore(&backup, &live, true).unwrap_err().to_string();
    assert!(err.contains("open in a running shopcell"), "{err}");
    // Changed after the backup; restoring over it brings back the cut and keeps this aside.
    let store = app.client.get("/api/v1/stores", Some(&owner.token)).await.body[0]["id"].as_str().unwrap().to_string();
    create_product(&app.client, &owner, &store, "After the backup", 100).await;
    app.stop().await;
    let done = restore::restore(&backup, &live, true).expect("restore with --replace");
    let aside = done.kept_aside.expect("kept aside");
    assert!(aside.join("account/account.redb").exists());
    assert!(aside.file_name().unwrap().to_string_lossy().contains("before-restore"));
    let again = spawn_app_in(&live).await;
    let list = again.client.get(&format!("/api/v1/stores/{store}/products"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["total"], 1);
    assert_eq!(list.body["data"][0]["title"], "Kept");
    drop(tmp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_roles_back_up_through_the_account_service_and_a_lost_cell_is_named() {
    let mut routed = Routed::start().await;
    let c = HttpClient::new(&routed.router.url);
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    create_product(&c, &owner, &store, "Relayed", 100).await;
    let key = std::fs::read_to_string(&routed.service_key).unwrap().trim().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let report = client::backup(&routed.account.url, &key, &tmp.path().join("b")).await.expect("backup");
    let cell = report.manifest.files.iter().find(|f| f.path == "cells/c1/cell.rows").expect("the cell's part, relayed");
    assert_eq!(cell.tables.as_ref().unwrap()["products"], 1);

    // The backup starts as one `serve` (or as each role on the same directory), same keys.
    let data = tmp.path().join("data");
    restore::restore(&tmp.path().join("b"), &data, false).expect("restore");
    let mut args = default_args(&data);
    args.cells = vec!["c1".into()];
    let served = serve(&args, tempfile::tempdir().unwrap(), shopcell::clock::Clock::system()).await;
    let list = served.client.get(&format!("/api/v1/stores/{store}/products"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["data"][0]["title"], "Relayed");

    // A cell that is gone: the backup fails naming it, with no manifest.
    routed.cell.child.kill().unwrap();
    routed.cell.child.wait().unwrap();
    let err = client::backup(&routed.account.url, &key, &tmp.path().join("c")).await.unwrap_err().to_string();
    assert!(err.contains("cell c1"), "{err}");
    assert!(!tmp.path().join("c/manifest.json").exists());
    // The account service goes on.
    create_user(&HttpClient::new(&routed.account.url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_a_counter_that_disagrees_with_its_rows() {
    let (mut app, owner, _tmp, _backup) = small_backup().await;
    let store = app.client.get("/api/v1/stores", Some(&owner.token)).await.body[0]["id"].as_str().unwrap().to_string();
    let data = app.dir.path().to_path_buf();
    app.stop().await;
    let check = || shopcell::admin::run(shopcell::cli::AdminCommand::Check { data: data.clone(), backup: None });
    check().await.expect("a stopped directory checks");
    // The store's location counter, damaged.
    {
        let db = redb::Database::open(data.join("cells/cell-1/cell.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        let mut key = uuid::Uuid::parse_str(&store).unwrap().as_bytes().to_vec();
        key.extend_from_slice(shopcell::storage::keys::Key::default().str("locations").bytes());
        txn.open_table(shopcell::storage::tables::COUNTERS.def)
            .unwrap()
            .insert(key.as_slice(), 5u64.to_le_bytes().as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let err = check().await.unwrap_err().to_string();
    assert!(err.contains(&format!("store {store}: the locations counter says 5, there are 1 rows")), "{err}");
}

/// Carts, checkouts and payment intents are never listed and keep no counters: a shop that has
/// sold checks, backed up and restored, as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shop_that_has_sold_checks_backed_up_and_restored() {
    use crate::checkout::{paid_intent, ready_checkout, stocked, us_shipping};
    let mut app = spawn_app().await;
    let c = &app.client;
    let shop = crate::calculate::Shop::new(c).await;
    let rate = us_shipping(c, &shop).await;
    let lamp = stocked(c, &shop, "Lamp", 4000, 5).await;
    let guest = crate::carts::Guest::new(c, &shop).await;
    guest.post(c, &shop.path("/carts/items"), serde_json::json!({"variantId": lamp, "quantity": 1})).await.expect(201);
    let co = ready_checkout(c, &shop, serde_json::json!([{"variantId": lamp, "quantity": 2}]), &rate).await;
    let intent = paid_intent(c, &shop, &co).await;
    let complete = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
    let body = serde_json::json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent});
    let order = c.post(&complete, Some(&shop.owner.token), body).await.expect(201).body;

    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("b");
    client::backup(&app.base, &service_key(&app), &to).await.expect("backup");
    let m: Value = serde_json::from_slice(&std::fs::read(to.join("manifest.json")).unwrap()).unwrap();
    let cell = m["files"].as_array().unwrap().iter().find(|f| f["kind"] == "cell").unwrap().clone();
    for table in ["carts", "checkouts", "payment_intents", "orders"] {
        assert_eq!(cell["tables"][table], 1, "{table}");
    }
    let check = |data: std::path::PathBuf, backup: Option<std::path::PathBuf>| {
        shopcell::admin::run(shopcell::cli::AdminCommand::Check { data, backup })
    };
    check(to.join("none"), Some(to.clone())).await.expect("the backup checks");
    let data = app.dir.path().to_path_buf();
    app.stop().await;
    check(data, None).await.expect("the stopped directory checks");

    let restored = tmp.path().join("restored");
    restore::restore(&to, &restored, false).expect("restore");
    check(restored.clone(), None).await.expect("the restored directory checks");
    let again = spawn_app_in(&restored).await;
    let path = shop.path(&format!("/orders/{}", order["id"].as_str().unwrap()));
    let read = again.client.get(&path, Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!((&read["number"], &read["lineItems"][0]["quantity"]), (&order["number"], &serde_json::json!(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_the_directory_does_not_place_is_dropped_as_after_a_crash() {
    let app = spawn_app().await;
    let owner = create_user(&app.client).await;
    let placed = create_store(&app.client, &owner).await;
    // Cut between the two halves of a store's creation: the cell has it, the directory not
    // yet (as also the copy of a move whose directory had not flipped).
    let half = app.clock.new_id();
    let now = app.clock.now_ms();
    let settings = shopcell::domain::store::StoreSettings {
        id: half,
        name: "Half made".into(),
        currency: shopcell::domain::money::Currency::parse("USD").unwrap(),
        country: "US".into(),
        timezone: "UTC".into(),
        address: Default::default(),
        taxes_included: false,
        weight_unit: "kg".into(),
        owner_id: uuid::Uuid::parse_str(&owner.id).unwrap(),
        created_at: now,
        updated_at: now,
        storefront_url: None,
        email_from: None,
        reply_to: None,
    };
    shopcell::cells::stores::create_store(&app.cell(), settings).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("b");
    client::backup(&app.base, &service_key(&app), &to).await.expect("backup");
    let data = tmp.path().join("data");
    let done = restore::restore(&to, &data, false).expect("restore");
    assert_eq!(done.unplaced, vec![("cell-1".to_string(), half)]);
    let again = spawn_app_in(&data).await;
    assert_eq!(again.cell().state_of(half), None, "dropped at start");
    assert!(again.cell().holds(uuid::Uuid::parse_str(&placed).unwrap()));
    let stores = again.client.get("/api/v1/stores", Some(&owner.token)).await.expect(200);
    assert_eq!(stores.body.as_array().unwrap().len(), 1);
    assert_eq!(stores.body[0]["id"], placed.as_str());
}

/// `shopcell admin backup` of `app` into `to`, as an operator runs it: a child process of the
/// shipped binary, started through `sh` so `prelude` (a `ulimit`, a `trap`) applies to it.
fn backup_process(app: &TestApp, to: &Path, prelude: &str) -> std::process::Child {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{prelude} exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_shopcell"))
        .args(["admin", "backup", "--url", &app.base, "--data"])
        .arg(app.dir.path())
        .arg("--to")
        .arg(to)
        .env("SHOPCELL_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shopcell admin backup")
}

/// Files under `dir`, recursively, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Text that does not compress: `len` hex digits of a generator seeded with `seed`.
fn noise(seed: u64, len: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap_or('0')
        })
        .collect()
}

/// A store whose products hold about `megabytes` MiB of descriptions that do not compress:
/// several chunks of the cell's rows, on the wire and on disk, so a backup of it is mid-stream
/// for a while. Answers the store id.
async fn sizeable_store(app: &TestApp, owner: &User, megabytes: usize) -> String {
    let store = create_store(&app.client, owner).await;
    const DESCRIPTION: usize = 60_000;
    let per_task = megabytes * (1 << 20) / DESCRIPTION / 8 + 1;
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (c, token, store) = (app.client.clone(), owner.token.clone(), store.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let description = noise((t * per_task + i) as u64, DESCRIPTION);
                let body = serde_json::json!({"title": format!("Bulky {t}-{i}"), "description": description,
                    "price": {"amount": 900, "currency": "USD"}, "status": "ACTIVE"});
                c.post(&format!("/api/v1/stores/{store}/products"), Some(&token), body).await.expect(201);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_to_a_full_disk_fails_naming_the_file_and_leaves_the_service_as_it_was() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = sizeable_store(&app, &owner, 2).await;
    let products = c.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    let total = products.body["total"].as_u64().unwrap();
    let service_files = files_under(app.dir.path()).into_iter().filter(|f| !f.contains("search/")).collect::<Vec<_>>();

    // A disk that fills up: past 2 MiB every write of the caller fails with EFBIG (SIGXFSZ
    // ignored, as a full disk's ENOSPC would: an I/O error, not a signal).
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("b");
    let out = backup_process(&app, &to, "trap '' XFSZ; ulimit -f 4096;").wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a clear failure, not a crash: {stderr}");
    assert!(stderr.contains("backup failed, no manifest written"), "{stderr}");
    assert!(stderr.contains("cells/cell-1/cell.rows"), "the file is named: {stderr}");
    assert!(stderr.contains("File too large"), "the I/O error is given: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!to.join("manifest.json").exists());
    assert_eq!(files_under(&to), Vec::<String>::new(), "the partial files are removed");

    // The barrier is released: a write goes through at once, and nothing changed at the service.
    let written = Instant::now();
    create_product(c, &owner, &store, "Right after", 100).await;
    // A hold would keep it for MAX_HOLD; half of that tells the two apart on a loaded machine.
    assert!(written.elapsed() < shopcell::storage::writer::MAX_HOLD / 2, "the writer is not held");
    let after = c.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    assert_eq!(after.body["total"].as_u64(), Some(total + 1));
    let now = files_under(app.dir.path()).into_iter().filter(|f| !f.contains("search/")).collect::<Vec<_>>();
    assert_eq!(now, service_files, "the service wrote nothing for the backup");

    // The caller told the service: a new backup begins at once (no minute's lapse) and restores.
    let again = tmp.path().join("again");
    let report = client::backup(&app.base, &service_key(&app), &again).await.expect("a new backup");
    let cell = report.manifest.files.iter().find(|f| f.path == "cells/cell-1/cell.rows").unwrap();
    assert_eq!(cell.tables.as_ref().unwrap()["products"], total + 1);
    let data = tmp.path().join("data");
    restore::restore(&again, &data, false).expect("restore");
    let restored = spawn_app_in(&data).await;
    let list = restored.client.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["total"].as_u64(), Some(total + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_killed_mid_stream_holds_nothing_and_after_the_lapse_a_new_backup_restores() {
    use std::os::unix::process::ExitStatusExt;
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = sizeable_store(&app, &owner, 4).await;
    let products = c.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    let total = products.body["total"].as_u64().unwrap();
    let key = service_key(&app);
    let headers = [("x-shopcell-service", key.as_str())];

    // Killed once the cell's rows are arriving (its file exists): the account database and the
    // keys are written, more than one chunk of the cell is still to come.
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("b");
    let mut child = backup_process(&app, &to, "");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !to.join("cells/cell-1/cell.rows").exists() {
        assert!(child.try_wait().unwrap().is_none(), "the backup ended before the cell's rows arrived");
        assert!(Instant::now() < deadline, "the cell's rows never arrived");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "killed mid-stream, not finished: {status:?}");
    assert!(to.join("account/account.rows").exists(), "the account database had been written");
    assert!(!to.join("manifest.json").exists(), "no manifest, no backup");

    // No writer is held: writes go on at once.
    let written = Instant::now();
    let kept = create_product(c, &owner, &store, "After the kill", 100).await;
    // A hold would keep it for MAX_HOLD; half of that tells the two apart on a loaded machine.
    assert!(written.elapsed() < shopcell::storage::writer::MAX_HOLD / 2, "the writer is not held");
    // The abandoned backup still counts as under way until it lapses…
    let busy = c.send(Method::POST, "/internal/v1/backups", None, &headers, None).await.expect(409);
    assert!(busy.body["error"]["message"].as_str().unwrap().contains("another backup is under way"), "{}", busy.body);
    // …a minute after its last request: then a new backup runs whole and restores.
    app.clock.advance(Duration::from_secs(61));
    let again = tmp.path().join("again");
    let report = client::backup(&app.base, &key, &again).await.expect("a backup after the lapse");
    let cell = report.manifest.files.iter().find(|f| f.path == "cells/cell-1/cell.rows").unwrap();
    assert_eq!(cell.tables.as_ref().unwrap()["products"], total + 1, "every product, the one after the kill too");
    let data = tmp.path().join("data");
    restore::restore(&again, &data, false).expect("restore");
    let restored = spawn_app_in(&data).await;
    let r = &restored.client;
    let list = r.get(&format!("/api/v1/stores/{store}/products?limit=1"), Some(&owner.token)).await.expect(200);
    assert_eq!(list.body["total"].as_u64(), Some(total + 1));
    let got = r.get(&format!("/api/v1/stores/{store}/products/{}", kept["id"].as_str().unwrap()), Some(&owner.token)).await;
    assert_eq!(got.expect(200).body["title"], "After the kill");
}

/// Rows read whole from one table, for comparing two databases.
#[derive(Default)]
struct AllRows(Vec<(Vec<u8>, Vec<u8>)>);

impl shopcell::storage::copy::RowSink for AllRows {
    fn row(&mut self, key: &[u8], value: &[u8]) {
        self.0.push((key.to_vec(), value.to_vec()));
    }
}

fn all_rows(t: &dyn shopcell::storage::copy::CopyTable, txn: &redb::ReadTransaction) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rows = AllRows::default();
    assert!(t.read(txn, None, usize::MAX, &mut rows).unwrap().is_none());
    rows.0
}

/// The tables a backup leaves out, written again from the rest of a database as a restore
/// does, hold exactly the rows the service wrote: the format-9 fixture (every kind of record,
/// through the migrations) with new writes on top, stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_a_backup_leaves_out_are_rebuilt_exactly_as_the_service_wrote_them() {
    use redb::{ReadableDatabase, TableHandle};
    use shopcell::storage::{copy, tables::REBUILT};

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    copy_dir(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data-format/fixtures/format-9")), &data);
    let mut app = spawn_app_in(&data).await;
    let owner = create_user(&app.client).await;
    let store = create_store(&app.client, &owner).await;
    for i in 0..5 {
        create_product(&app.client, &owner, &store, &format!("New {i}"), 100 + i).await;
    }
    app.stop().await;

    for (path, kind) in [("account/account.redb", "account"), ("cells/cell-1/cell.redb", "cell")] {
        let written = redb::ReadOnlyDatabase::open(data.join(path)).unwrap();
        let written = written.begin_read().unwrap();
        let tables = copy::present(&written, kind).unwrap();
        let rebuilt = |t: &&dyn copy::CopyTable| REBUILT.iter().any(|r| r.def.name() == t.name());
        assert!(tables.iter().any(rebuilt), "{kind}: the fixture holds tables a backup leaves out");
        // As a restore builds it: every other table's rows, then the rebuild.
        let copy = redb::Database::create(tmp.path().join(format!("{kind}.redb"))).unwrap();
        let txn = copy.begin_write().unwrap();
        for t in tables.iter().filter(|t| !rebuilt(t)) {
            let rows = all_rows(*t, &written);
            t.write(&txn, &mut rows.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))).unwrap();
        }
        shopcell::cells::rebuilt::rebuild(&txn, kind).unwrap();
        txn.commit().unwrap();
        let restored = copy.begin_read().unwrap();
        let mut compared = 0;
        for t in &tables {
            let (want, got) = (all_rows(*t, &written), all_rows(*t, &restored));
            let differs = want.iter().zip(&got).position(|(a, b)| a != b);
            assert!(
                want == got,
                "{kind}: {} holds {} rows, rebuilt {} (first difference at {differs:?})",
                t.name(),
                want.len(),
                got.len()
            );
            compared += usize::from(rebuilt(t) && !want.is_empty());
        }
        if kind == "cell" {
            assert!(compared >= 15, "the fixture fills most of the rebuilt tables: {compared}");
        }
    }
}

/// A backup of format 2 held every table, those a restore now rebuilds too: it restores as it
/// was, nothing rebuilt over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_in_format_2_holding_every_table_still_checks_and_restores() {
    use shopcell::backup::{block, rows_file};
    use shopcell::storage::copy;

    let (_app, owner, store, data) = stopped_with_one_product("Kept in format 2").await;
    // Laid out as format 2 wrote a backup: each database's rows, every table, in blocks.
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("old");
    let mut files = Vec::new();
    for (db, kind) in [("account/account", "account"), ("cells/cell-1/cell", "cell")] {
        let source = redb::ReadOnlyDatabase::open(data.join(format!("{db}.redb"))).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&source).unwrap();
        let mut builder = block::Builder::with_capacity(1 << 20);
        let present = copy::present(&txn, kind).unwrap();
        for t in &present {
            builder.table(t.name());
            assert!(t.read(&txn, None, usize::MAX, &mut builder).unwrap().is_none());
        }
        let built = builder.finish().unwrap();
        let path = format!("{db}.rows");
        std::fs::create_dir_all(old.join(&path).parent().unwrap()).unwrap();
        let mut writer = rows_file::Writer::create(&old.join(&path)).unwrap();
        writer.append(&built.tables, &built.bytes).unwrap();
        let mut written = writer.finish().unwrap();
        // The manifest lists the empty tables too.
        for t in &present {
            written.counts.entry(t.name().to_string()).or_insert(0);
        }
        assert!(kind == "account" || written.counts["product_views"] > 0, "the tables a restore now rebuilds are in it");
        files.push(manifest::Entry::database(path.clone(), kind.into(), &old.join(&path), written.counts).unwrap());
    }
    for path in ["account/jwt-rs256.pem", "account/service.key"] {
        files.push(manifest::Entry::file(path.into(), &std::fs::read(data.join(path)).unwrap()));
        std::fs::copy(data.join(path), old.join(path)).unwrap();
    }
    an_earlier_backup_checks_and_restores(&old, 2, files, (&owner, &store, "Kept in format 2")).await;
}
