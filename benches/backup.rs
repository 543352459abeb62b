//! Backup benchmark (issue "A service operators can run"), the shipped binary with the job runner
//! paused (the orders' mail waits in the database, and is backed up with it):
//!
//! A cell of `BACKUP_PRODUCTS` products and `BACKUP_ORDERS` orders, each order a real checkout
//! (created, addressed with a shipping rate, a payment session confirmed, completed) from 64
//! clients, is backed up with `shopcell admin backup` (a process of its own, as an operator runs
//! it) while 64 clients create products. Targets: the backup completes in under 10 s; the
//! writers' p99 during it stays under 50 ms, and their rate at 80 % or more of the same writers
//! without a backup (measured just before). Printed too: how long the writers were held at the
//! cut (the manifest's `heldUs`), the writers' longest answer during the backup, and the time of
//! `shopcell admin restore` of the backup (which verifies every checksum and rebuilds search).
//!
//! `cargo bench --bench backup`. Environment: `BACKUP_PRODUCTS` (default 2,000; the size
//! is 100,000), `BACKUP_ORDERS` (default 1,000; the is 200,000), `BENCH_SECONDS` (the
//! writers' window without a backup, default 5), `BACKUP_NICE` (the backup process's niceness,
//! default 0: it runs on the service's machine here, competing with the writers for its CPUs;
//! an operator may run it at 19, or on another host), `BACKUP_TO` (a directory the backup is
//! written under, default the system's temporary one: another disk stands for the operator's
//! host, whose writes do not queue before the service's fsyncs; the restore is made beside the
//! server's data either way), `BENCH_SHOPCELL` (the binary that serves, backs up and restores,
//! e.g. an earlier build's for a before and after in one session), `BACKUP_ROUNDS` (pairs of
//! windows, alone then with a backup, measured on the one filled cell; default 1) and
//! `BACKUP_COMPARE` (a second binary: each round then measures both, the server restarted on
//! the same data between them, so a before and after shares one fill and one hour).

mod common;

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::inspect::{millis, scrape_metrics, thousands};
use common::shop::Shop;
use common::{BoxError, Client, Endpoint, ServerProcess, Settings, Usage, env_or, product_body};
use hyper::StatusCode;
use serde_json::{Value, json};

/// Clients writing during the backup, as the issue asks.
const WRITERS: usize = 64;
/// Tracked products the orders buy from (the rest of the catalog is untracked).
const SOLD: usize = 20;
/// Creates or checkouts per batch: each batch's answers are checked, then dropped.
const BATCH: usize = 5_000;

const TARGET_BACKUP: Duration = Duration::from_secs(10);
const TARGET_P99: Duration = Duration::from_millis(50);
const TARGET_RATE: f64 = 0.8;

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("backup benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> Result<(), BoxError> {
    let products: usize = env_or("BACKUP_PRODUCTS", 2_000)?;
    let orders: usize = env_or("BACKUP_ORDERS", 1_000)?;
    if products < SOLD {
        return Err(format!("BACKUP_PRODUCTS must be at least {SOLD}").into());
    }
    let rounds: usize = env_or::<usize>("BACKUP_ROUNDS", 1)?.max(1);
    let settings = Settings::from_env()?;
    // The server, the backup's caller and the restore: one build (`BENCH_SHOPCELL`, else this
    // one's), and the build it is compared with on the same cell (`BACKUP_COMPARE`), if any.
    let binary: &'static str = common::served_binary().leak();
    let mut builds = vec![binary];
    if let Ok(other) = std::env::var("BACKUP_COMPARE") {
        builds.push(other.leak());
    }
    let load = common::runtime("load-gen")?;
    let mut server = Some(ServerProcess::spawn_with(binary, &["--jobs-paused"])?);
    let mut serving = binary;
    let result = (|| -> Result<(), BoxError> {
        let endpoint = Endpoint::new(server.as_ref().ok_or("no server")?.addr);
        let mut shop = load.block_on(fill(&endpoint, products, orders))?;
        let created = Arc::new(AtomicU64::new(products as u64));
        let backups = tempfile::Builder::new().prefix("shopcell-backup-bench-").tempdir()?;
        let elsewhere = match std::env::var_os("BACKUP_TO") {
            Some(dir) => Some(tempfile::Builder::new().prefix("shopcell-backup-bench-").tempdir_in(dir)?),
            None => None,
        };
        let mut rows = Vec::new();
        for round in 1..=rounds {
            for &build in &builds {
                if build != serving {
                    // The same data; the owner's token stays valid (same keys).
                    let stopped = server.take().ok_or("no server")?;
                    let restarted = stopped.restart_with(build, &["--jobs-paused"])?;
                    shop.owner = shop.owner.at(restarted.addr);
                    server = Some(restarted);
                    serving = build;
                }
                let running = server.as_ref().ok_or("no server")?;
                let to = elsewhere.as_ref().unwrap_or(&backups).path().join("backup");
                println!("round {round} of {rounds}, {build}:");
                let outcome = load.block_on(measure(running, &shop, &created, &settings, (products, orders), build, &to))?;
                if round == rounds && build == binary {
                    restore(binary, &to, &backups.path().join("restored"))?;
                }
                std::fs::remove_dir_all(&to)?;
                rows.push((build, outcome));
            }
        }
        summary(&builds, &rows);
        Ok(())
    })();
    let Some(server) = server else { return result };
    let logs = server.log_tail();
    server.stop()?;
    result.map_err(|e| format!("{e}\n{logs}").into())
}

/// What one round measured: the writers alone, then during a backup.
struct Outcome {
    alone: Window,
    busy: Window,
    took: Duration,
    held: Duration,
}

/// The writers alone for the warm-up and `BENCH_SECONDS`, then the same writers while
/// `build` backs the service up into `to`; the backup must hold the shop's first
/// `shop_size` products and orders.
async fn measure(
    server: &ServerProcess,
    shop: &Shop,
    created: &Arc<AtomicU64>,
    settings: &Settings,
    shop_size: (usize, usize),
    build: &'static str,
    to: &Path,
) -> Result<Outcome, BoxError> {
    let path = format!("{}/products", shop.base);
    let window = settings.warmup + settings.duration;
    let metrics = Endpoint::new(server.addr);
    let key = server.service_key()?;
    let (before, commits) = (server.usage()?, Commits::of(&metrics, &key).await?);
    let (alone, ()) = write_while(&shop.owner, &path, created, tokio::time::sleep(window)).await?;
    let after = server.usage()?;
    let (used_alone, commits_alone) =
        (after.since(&before, alone.samples.len()), Commits::of(&metrics, &key).await?.since(&commits));
    // The server's CPU per create without a backup, to tell the backup's share of its CPU
    // during one from the writers'.
    let per_create = (after.process - before.process).as_secs_f64() / alone.samples.len().max(1) as f64;
    let from = alone.started + settings.warmup;
    let alone = alone.window(from, from + settings.duration);
    println!("measured {WRITERS} writers without a backup: {} creates/s, p99 {}", thousands(alone.rate), millis(alone.p99));
    println!("the server without a backup: {used_alone}; {commits_alone}");

    let data = server.dir().join("data");
    let (url, to_arg, warmup) = (server.url.clone(), to.to_path_buf(), settings.warmup);
    let nice: i32 = env_or("BACKUP_NICE", 0)?;
    let (cpu, pid) = (server.cpu()?, server.pid());
    let (during, backed_up) = write_while(&shop.owner, &path, created, async move {
        tokio::time::sleep(warmup).await;
        let commits = Commits::of(&metrics, &key).await?;
        let (times, before, after) = tokio::task::spawn_blocking(move || {
            let before = Usage::of(pid)?;
            let times = backup(build, &url, &data, &to_arg, nice)?;
            Ok::<_, BoxError>((times, before, Usage::of(pid)?))
        })
        .await??;
        Ok::<_, BoxError>((times, before, after, Commits::of(&metrics, &key).await?.since(&commits)))
    })
    .await?;
    let server_cpu = (server.cpu()? - cpu).as_secs_f64();
    let backup_cpu = server_cpu - per_create * during.samples.len() as f64;
    let ((began, ended), before, after, commits_during) = backed_up?;
    let took = ended - began;
    let busy = during.window(began, ended);
    let used_during = after.since(&before, (busy.rate * took.as_secs_f64()) as usize);
    let manifest: Value = serde_json::from_slice(&std::fs::read(to.join("manifest.json"))?)?;
    let held = Duration::from_micros(manifest["heldUs"].as_u64().ok_or("the manifest has no heldUs")?);
    let (bytes, cell) = contents(&manifest)?;
    let rows = |table: &str| cell.get(table).copied().unwrap_or(0);
    if rows("products") < shop_size.0 as u64 || rows("orders") < shop_size.1 as u64 {
        return Err(format!("the backup holds {} products and {} orders", rows("products"), rows("orders")).into());
    }
    println!(
        "measured backup: {:.2} s for {} bytes ({} products, {} orders, {} rows in all); writers held {} at the cut",
        took.as_secs_f64(),
        thousands(bytes as f64),
        thousands(rows("products") as f64),
        thousands(rows("orders") as f64),
        thousands(cell.values().sum::<u64>() as f64),
        millis(held),
    );
    let mut largest: Vec<(&String, &u64)> = cell.iter().collect();
    largest.sort_by(|a, b| b.1.cmp(a.1));
    let largest: Vec<String> = largest.iter().take(16).map(|(t, n)| format!("{t} {}", thousands(**n as f64))).collect();
    println!("measured the cell's largest tables by rows: {}", largest.join(", "));
    println!(
        "measured the cell's database file: {:.2} GiB",
        cell_file_bytes(&server.dir().join("data"))? as f64 / (1u64 << 30) as f64
    );
    let gb = bytes as f64 / 1e9;
    println!(
        "measured server CPU: {server_cpu:.2} s while the writers ran with the backup, of which the backup's about {backup_cpu:.2} s ({:.2} s per GB written; the writers' share at {:.0} µs per create as without a backup)",
        backup_cpu / gb,
        per_create * 1e6
    );
    println!(
        "measured {WRITERS} writers during the backup: {} creates/s ({:.1} % of without), p99 {}, longest {}",
        thousands(busy.rate),
        100.0 * busy.rate / alone.rate,
        millis(busy.p99),
        millis(busy.longest),
    );
    println!("the server during the backup: {used_during}; {commits_during}");
    Ok(Outcome { alone, busy, took, held })
}

/// The cells' writers' commit figures from `/metrics` (histogram sums and counts), to tell what
/// a window's commits were like.
struct Commits {
    at: Instant,
    fsync: (f64, f64),
    commit: (f64, f64),
    batch: (f64, f64),
}

impl Commits {
    async fn of(server: &Endpoint, key: &str) -> Result<Commits, BoxError> {
        let samples = scrape_metrics(&mut Client::new(server.addr), server, key).await?;
        // The cells' writers alone: the directory's (owner `account`) commits are not the writers'.
        let sum =
            |name: &str| samples.iter().filter(|s| s.name == name && s.label("owner") != Some("account")).map(|s| s.value).sum();
        let pair = |family: &str| (sum(&format!("{family}_sum")), sum(&format!("{family}_count")));
        Ok(Commits {
            at: Instant::now(),
            fsync: pair("shopcell_writer_fsync_seconds"),
            commit: pair("shopcell_writer_commit_seconds"),
            batch: pair("shopcell_writer_batch_size"),
        })
    }

    /// The window from `earlier` to this, a line: the mean fsync and commit, and the mean batch.
    fn since(&self, earlier: &Commits) -> String {
        let mean = |now: (f64, f64), then: (f64, f64)| (now.0 - then.0) / (now.1 - then.1).max(1.0);
        format!(
            "commits {:.0} a second of {:.1} creates on average, each written in {:.2} ms and fsynced in {:.2} ms",
            (self.commit.1 - earlier.commit.1) / (self.at - earlier.at).as_secs_f64().max(1e-9),
            mean(self.batch, earlier.batch),
            1e3 * mean(self.commit, earlier.commit),
            1e3 * mean(self.fsync, earlier.fsync)
        )
    }
}

/// `shopcell admin restore` of the backup in `from` into `into`, timed.
fn restore(binary: &str, from: &Path, into: &Path) -> Result<(), BoxError> {
    let started = Instant::now();
    run(Command::new(binary).args(["admin", "restore", "--from"]).arg(from).arg("--data").arg(into))?;
    println!(
        "measured restore: {:.2} s (checksums verified, search rebuilt); the restored cell's database file: {:.2} GiB",
        started.elapsed().as_secs_f64(),
        cell_file_bytes(into)? as f64 / (1u64 << 30) as f64
    );
    println!(
        "measured the restored cell's largest tables by pages (of which keys and values): {}",
        largest_tables(into)?.join(", ")
    );
    std::fs::remove_dir_all(into)?;
    Ok(())
}

/// Every round in a line, then the targets against the first round (the first build's, on the
/// cell of the sizes asked for).
fn summary(builds: &[&str], rows: &[(&str, Outcome)]) {
    println!();
    println!("{:<8} {:>6} {:>12} {:>10} {:>12} {:>10}  build", "round", "backup", "alone", "p99", "during", "rate");
    for (i, (build, o)) in rows.iter().enumerate() {
        println!(
            "{:<8} {:>5.2}s {:>10}/s {:>10} {:>10}/s {:>9.1}%  {build}",
            i / builds.len() + 1,
            o.took.as_secs_f64(),
            thousands(o.alone.rate),
            millis(o.busy.p99),
            thousands(o.busy.rate),
            100.0 * o.busy.rate / o.alone.rate
        );
    }
    // The targets are the sizes' own: later rounds back up a cell the writers have grown.
    let Some((build, first)) = rows.first() else { return };
    let (took, p99, ratio, held) = (first.took, first.busy.p99, first.busy.rate / first.alone.rate, first.held);
    println!();
    println!("{:<58} {:>12} {:>12}  result ({build}, round 1)", "target", "measured", "required");
    let row = |name: &str, measured: String, required: &str, pass: bool| {
        println!("{name:<58} {measured:>12} {required:>12}  {}", if pass { "pass" } else { "FAIL" });
    };
    row("backup duration, 64 writers running", format!("{:.2} s", took.as_secs_f64()), "< 10 s", took < TARGET_BACKUP);
    row("writers' p99 during the backup", millis(p99), "< 50 ms", p99 < TARGET_P99);
    row("writers' rate during the backup / without", format!("{:.1} %", 100.0 * ratio), "≥ 80 %", ratio >= TARGET_RATE);
    println!("{:<58} {:>12}", "longest hold at the cut (heldUs)", millis(held));
}

/// The size of every cell database under the data directory `data`.
fn cell_file_bytes(data: &std::path::Path) -> Result<u64, BoxError> {
    let mut bytes = 0;
    for cell in std::fs::read_dir(data.join("cells"))? {
        bytes += std::fs::metadata(cell?.path().join("cell.redb"))?.len();
    }
    Ok(bytes)
}

/// The largest tables of the cells under the data directory `data` by the pages their trees
/// take (keys and values, branch keys, and the space left unused in their pages).
fn largest_tables(data: &std::path::Path) -> Result<Vec<String>, BoxError> {
    use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let mut sizes = Vec::new();
    for cell in std::fs::read_dir(data.join("cells"))? {
        let db = redb::Database::open(cell?.path().join("cell.redb"))?;
        let txn = db.begin_read()?;
        for table in txn.list_tables()? {
            let s = txn.open_untyped_table(table.clone())?.stats()?;
            sizes.push((
                s.stored_bytes() + s.metadata_bytes() + s.fragmented_bytes(),
                s.stored_bytes(),
                table.name().to_string(),
            ));
        }
    }
    sizes.sort_by(|a, b| b.cmp(a));
    Ok(sizes.iter().take(8).map(|(pages, data, name)| format!("{name} {:.2} GiB ({:.2})", gib(*pages), gib(*data))).collect())
}

/// A selling store of `products` products, `SOLD` of them tracked, and `orders` orders made
/// through checkouts of two lines each.
async fn fill(endpoint: &Endpoint, products: usize, orders: usize) -> Result<Shop, BoxError> {
    let shop = Shop::open(endpoint, "Backup").await?;
    let mut client = Client::new(endpoint.addr);
    let mut variants = Vec::new();
    for i in 0..SOLD {
        variants.push(shop.product(&mut client, &format!("Sold {i}"), 1000 + 100 * i as u64, orders.max(1)).await?);
    }
    let started = Instant::now();
    for from in (SOLD..products).step_by(BATCH) {
        let count = BATCH.min(products - from);
        let (owner, path) = (shop.owner.clone(), format!("{}/products", shop.base));
        shop.batch("create product", count, StatusCode::CREATED, move |n| owner.post_json(&path, &product_body(from as u64 + n)))
            .await?;
    }
    println!("created {products} products in {:.1} s", started.elapsed().as_secs_f64());

    let started = Instant::now();
    let variants = Arc::new(variants);
    for from in (0..orders).step_by(BATCH) {
        let count = BATCH.min(orders - from);
        let v = variants.clone();
        let prepared = shop
            .prepare(count, move |n| {
                let n = from + n as usize;
                json!([{"variantId": v[n % SOLD], "quantity": 1}, {"variantId": v[(n + 7) % SOLD], "quantity": 2}])
            })
            .await?;
        shop.complete(prepared).await?;
    }
    println!(
        "made {orders} orders through checkouts in {:.1} s ({:.0} orders/s, five requests each)",
        started.elapsed().as_secs_f64(),
        orders as f64 / started.elapsed().as_secs_f64()
    );
    Ok(shop)
}

/// Product creates answered while something ran: when each was sent and how long it took.
struct Writes {
    started: Instant,
    samples: Vec<(Instant, Duration)>,
}

/// What the writers did in a window of time.
struct Window {
    /// Creates answered inside the window, per second.
    rate: f64,
    /// Over the creates answered inside the window or in flight across its edges.
    p99: Duration,
    longest: Duration,
}

impl Writes {
    fn window(&self, from: Instant, to: Instant) -> Window {
        let inside = self.samples.iter().filter(|(sent, took)| *sent >= from && *sent + *took <= to).count();
        let mut touching: Vec<Duration> =
            self.samples.iter().filter(|(sent, took)| *sent < to && *sent + *took > from).map(|(_, took)| *took).collect();
        touching.sort_unstable();
        let p99 = match touching.len() {
            0 => Duration::ZERO,
            n => touching[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1],
        };
        let seconds = (to - from).as_secs_f64();
        Window { rate: inside as f64 / seconds, p99, longest: touching.last().copied().unwrap_or_default() }
    }
}

/// [`WRITERS`] clients creating products back to back while `during` runs; every create must
/// be answered 201 (a write refused during a backup is a defect). Product numbers come from
/// `next`, so every run creates new titles. Answers the writes and what `during` answered.
async fn write_while<T, F>(owner: &Endpoint, path: &str, next: &Arc<AtomicU64>, during: F) -> Result<(Writes, T), BoxError>
where
    F: std::future::Future<Output = T>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (owner, path, next, stop) = (owner.clone(), path.to_string(), next.clone(), stop.clone());
            tokio::spawn(async move {
                let mut client = Client::new(owner.addr);
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let sent = Instant::now();
                    let answer = client.send(owner.post_json(&path, &product_body(n))).await?;
                    samples.push((sent, sent.elapsed()));
                    common::expect_json(answer, StatusCode::CREATED, "create product during the run")?;
                }
                Ok::<_, BoxError>(samples)
            })
        })
        .collect();
    let outcome = during.await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await??);
    }
    Ok((Writes { started, samples }, outcome))
}

/// Runs `shopcell admin backup` of the service at `url` (its key in `data`) into `to`, at
/// `nice` (0: as the writers; the caller may run on the service's host or its own); answers
/// when it started and ended, and prints the CPU time it took.
fn backup(binary: &str, url: &str, data: &Path, to: &Path, nice: i32) -> Result<(Instant, Instant), BoxError> {
    let cpu = children_cpu();
    let started = Instant::now();
    let mut command = Command::new("nice");
    command.arg("-n").arg(nice.to_string()).arg(binary).args(["admin", "backup", "--url", url, "--data"]);
    let out = run(command.arg(data).arg("--to").arg(to))?;
    let ended = Instant::now();
    if let Some(line) = out.lines().last() {
        println!("admin backup: {line}");
    }
    println!(
        "the backup process used {:.2} s of CPU in {:.2} s (nice {nice})",
        (children_cpu() - cpu).as_secs_f64(),
        (ended - started).as_secs_f64()
    );
    Ok((started, ended))
}

/// User and system time of this process's children that have ended (the server runs on).
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Runs an operator command to completion; its stdout, or an error with its stderr.
fn run(command: &mut Command) -> Result<String, BoxError> {
    let out = command.env("SHOPCELL_LOG", "warn").stdin(Stdio::null()).output()?;
    if !out.status.success() {
        return Err(format!("{command:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The backup's bytes in all and the rows of each table of its one cell.
fn contents(manifest: &Value) -> Result<(u64, std::collections::BTreeMap<String, u64>), BoxError> {
    let files = manifest["files"].as_array().ok_or("the manifest lists no files")?;
    let bytes = files.iter().filter_map(|f| f["bytes"].as_u64()).sum();
    let cell = files.iter().find(|f| f["kind"] == "cell").ok_or("the manifest lists no cell")?;
    let tables = serde_json::from_value(cell["tables"].clone())?;
    Ok((bytes, tables))
}
