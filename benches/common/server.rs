//! The server under test: the shipped binary as a process of its own ([`ServerProcess`]), or
//! `shopcell serve` in the bench process on a data directory one left behind ([`InProcess`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::runtime::Runtime;

use super::BoxError;

/// `shopcell serve` in this process on its own runtime (as the binary has), on a data directory
/// a [`ServerProcess`] left behind: for measurements that call the cell directly. It runs on the
/// bench process's allocator (the system's), not the binary's.
pub struct InProcess {
    pub running: shopcell::run::Running,
    runtime: Runtime,
    _dir: TempDir,
}

impl InProcess {
    /// Serves `<dir>/data` with the job runner paused: what is timed in process is the handler's
    /// own work, not mail the earlier scenarios queued being delivered beside it.
    pub fn open(dir: TempDir) -> Result<InProcess, BoxError> {
        use clap::Parser;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("server").build()?;
        let data = dir.path().join("data");
        let data = data.to_str().ok_or("temp dir is not UTF-8")?;
        let cli = shopcell::cli::Cli::try_parse_from([
            "shopcell",
            "serve",
            "--data",
            data,
            "--listen",
            "127.0.0.1:0",
            "--jobs-paused",
        ])?;
        let shopcell::cli::Command::Serve(args) = cli.command else { return Err("not a serve command".into()) };
        let running = runtime.block_on(async {
            let node = shopcell::run::build_serve(&args)?;
            shopcell::run::spawn(node, args.listen).await
        })?;
        Ok(InProcess { running, runtime, _dir: dir })
    }

    /// Runs `f` to its end on the server's runtime: a handler's function timed in process.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// The one cell of the server.
    pub fn cell(&self) -> Result<Arc<shopcell::cells::Cell>, BoxError> {
        self.running.node.cells.values().next().cloned().ok_or_else(|| "no cell".into())
    }

    /// Stops the server gracefully (every acknowledged write on disk).
    pub fn stop(self) {
        self.runtime.block_on(self.running.stop());
    }
}

/// How long `shopcell serve` may take to print its URL (first start generates the signing key).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The shipped binary running `shopcell serve` on `<dir>/data`: the server under test, in its own
/// process with its own allocator, apart from the load generator and the baselines. Killed when
/// dropped.
pub struct ServerProcess {
    pub addr: SocketAddr,
    pub url: String,
    child: KillOnDrop,
    dir: TempDir,
}

/// A child process killed (and reaped) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl ServerProcess {
    /// Starts `<binary> serve --data <tmp>/data --listen 127.0.0.1:0` and waits for the first
    /// stdout line containing `http://`; the address in it is where the server listens.
    pub fn spawn(binary: &str) -> Result<Self, BoxError> {
        Self::spawn_with(binary, &[])
    }

    /// [`ServerProcess::spawn`] with `flags` added to `serve`.
    pub fn spawn_with(binary: &str, flags: &[&str]) -> Result<Self, BoxError> {
        Self::start(binary, tempfile::Builder::new().prefix("shopcell-bench-").tempdir()?, flags)
    }

    /// Stops the server gracefully and starts it again on the same data with `flags` added.
    pub fn restart_with(self, binary: &str, flags: &[&str]) -> Result<Self, BoxError> {
        let dir = self.stop()?;
        Self::start(binary, dir, flags)
    }

    /// Stops the server gracefully (SIGTERM: every acknowledged write is on disk, the indexer
    /// finishes its pass) and hands its directory over.
    pub fn stop(mut self) -> Result<TempDir, BoxError> {
        let status = Command::new("kill").arg("-TERM").arg(self.child.0.id().to_string()).status()?;
        if !status.success() {
            return Err("kill -TERM failed".into());
        }
        self.child.0.wait()?;
        Ok(self.dir)
    }

    /// Starts the server on `<dir>/data`, e.g. a directory [`ServerProcess::stop`] handed over: a
    /// restart whose stop and start can be timed apart. `flags` are not remembered from an
    /// earlier start.
    pub fn start(binary: &str, dir: TempDir, flags: &[&str]) -> Result<Self, BoxError> {
        let data = dir.path().join("data");
        let mut command = Command::new(binary);
        if !access_log()? {
            // Every other line at info as in production; the access lines alone silenced.
            command.env("SHOPCELL_LOG", format!("info,{}=off", shopcell::logs::ACCESS));
        }
        let mut child = command
            .arg("serve")
            .arg("--data")
            .arg(&data)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(dir.path().join("stderr.log"))?)
            .spawn()
            .map_err(|e| format!("cannot start {binary}: {e}"))?;

        let stdout = child.stdout.take().expect("stdout is piped");
        let child = KillOnDrop(child);
        let stdout_log = BufWriter::new(File::create(dir.path().join("stdout.log"))?);
        let (url_tx, url_rx) = mpsc::channel();
        // Keeps draining after the URL is found: a server logging to a full pipe would block.
        std::thread::spawn(move || forward_stdout(stdout, stdout_log, url_tx));

        let started = url_rx
            .recv_timeout(STARTUP_TIMEOUT)
            .map_err(|e| -> BoxError {
                match e {
                    mpsc::RecvTimeoutError::Timeout => format!("no http:// URL on stdout within {STARTUP_TIMEOUT:?}").into(),
                    mpsc::RecvTimeoutError::Disconnected => "stdout closed before an http:// URL was printed".into(),
                }
            })
            .and_then(|url| Ok((parse_url_addr(&url)?, url)));
        match started {
            Ok((addr, url)) => Ok(Self { addr, url, child, dir }),
            Err(why) => {
                drop(child);
                let logs = log_tail(dir.path());
                Err(format!("shopcell serve did not start: {why}\n{logs}").into())
            }
        }
    }

    /// The CPU time the server has used so far, user and system, from `/proc/PID/stat` (in
    /// clock ticks of 10 ms: Linux's `USER_HZ` is 100). On a machine shared with other work,
    /// CPU per operation moves far less than throughput does.
    pub fn cpu(&self) -> Result<Duration, BoxError> {
        process_cpu(self.child.0.id())
    }

    /// Bytes the server has handed to `write` and `pwrite` so far (`wchar` of `/proc/PID/io`):
    /// what its commits copy into the page cache, fsynced or not.
    pub fn bytes_written(&self) -> Result<u64, BoxError> {
        bytes_written(self.child.0.id())
    }

    /// The CPU time, user and system, of the server's threads whose name starts with `prefix`
    /// (e.g. `writer-`: the cells' single writers), from `/proc/PID/task/TID/stat`.
    pub fn threads_cpu(&self, prefix: &str) -> Result<Duration, BoxError> {
        Ok(self.cpu_by_thread()?.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, cpu)| *cpu).sum())
    }

    /// The CPU time, user and system, of the server's live threads by name (threads of one
    /// name summed), from `/proc/PID/task/TID/stat`.
    pub fn cpu_by_thread(&self) -> Result<BTreeMap<String, Duration>, BoxError> {
        cpu_by_thread(self.child.0.id())
    }

    /// What the server has used so far, to tell apart what it used in a window.
    pub fn usage(&self) -> Result<Usage, BoxError> {
        Usage::of(self.child.0.id())
    }

    /// The server's process id (for `perf record -p`).
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// The directory the server's data is in (`data/` inside it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The service key the server keeps in its data: `/metrics` on the API port wants it.
    pub fn service_key(&self) -> Result<String, BoxError> {
        Ok(std::fs::read_to_string(self.dir.path().join("data/account/service.key"))?.trim().to_string())
    }

    /// The end of the server's stdout and stderr, for error messages.
    pub fn log_tail(&self) -> String {
        log_tail(self.dir.path())
    }
}

/// The CPU time process `pid` has used so far, user and system, in clock ticks of 10 ms.
fn process_cpu(pid: u32) -> Result<Duration, BoxError> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces: the fields counted from after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or("a /proc/PID/stat without CPU times");
    // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name.
    Ok(Duration::from_millis((tick(11)? + tick(12)?) * 10))
}

/// Bytes process `pid` has handed to `write` and `pwrite` so far.
fn bytes_written(pid: u32) -> Result<u64, BoxError> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    let wchar = io.lines().find_map(|l| l.strip_prefix("wchar: ")).ok_or("a /proc/PID/io without wchar")?;
    Ok(wchar.trim().parse()?)
}

/// The CPU time of process `pid`'s live threads by name (threads of one name summed).
fn cpu_by_thread(pid: u32) -> Result<BTreeMap<String, Duration>, BoxError> {
    let mut by_name = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        // A thread that ended since the listing has no stat left to read.
        let Ok(stat) = std::fs::read_to_string(task?.path().join("stat")) else { continue };
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or("a task stat without CPU times");
        *by_name.entry(name.to_string()).or_insert(Duration::ZERO) += Duration::from_millis((tick(11)? + tick(12)?) * 10);
    }
    Ok(by_name)
}

/// A server's CPU (the process's and each live thread's) and bytes written, at one moment.
#[derive(Clone)]
pub struct Usage {
    pub at: Instant,
    pub process: Duration,
    pub threads: BTreeMap<String, Duration>,
    pub written: u64,
}

impl Usage {
    /// Process `pid`'s usage now (a server, from a thread that cannot borrow its handle).
    pub fn of(pid: u32) -> Result<Usage, BoxError> {
        let (process, threads, written) = (process_cpu(pid)?, cpu_by_thread(pid)?, bytes_written(pid)?);
        Ok(Usage { at: Instant::now(), process, threads, written })
    }

    /// What was used from `earlier` to this, a line: CPU per second of wall time in all and
    /// by thread (the busiest first; threads that ended meanwhile, such as a backup's reader or
    /// the search index's short-lived indexing threads, together), and bytes written per create.
    pub fn since(&self, earlier: &Usage, creates: usize) -> String {
        let seconds = (self.at - earlier.at).as_secs_f64().max(1e-9);
        let used = |now: Duration, then: Duration| now.saturating_sub(then).as_secs_f64() / seconds;
        let mut threads: Vec<(String, f64)> = self
            .threads
            .iter()
            .map(|(name, cpu)| (name.clone(), used(*cpu, earlier.threads.get(name).copied().unwrap_or_default())))
            .collect();
        let live: f64 = threads.iter().map(|(_, c)| c).sum();
        let ended = used(self.process, earlier.process) - live;
        if ended > 0.005 {
            threads.push(("threads that ended".into(), ended));
        }
        threads.sort_by(|a, b| b.1.total_cmp(&a.1));
        let busiest: Vec<String> = threads.iter().take(8).map(|(n, c)| format!("{n} {c:.2}")).collect();
        format!(
            "{:.2} cores ({}), {:.1} KB written per create",
            used(self.process, earlier.process),
            busiest.join(", "),
            self.written.saturating_sub(earlier.written) as f64 / 1e3 / creates.max(1) as f64
        )
    }
}

/// The binary served as the server under test: `BENCH_SHOPCELL` (another build's, for a before
/// and after in one session), else this build's.
pub fn served_binary() -> String {
    std::env::var("BENCH_SHOPCELL").unwrap_or_else(|_| env!("CARGO_BIN_EXE_shopcell").to_string())
}

/// Whether the server under test writes its JSON access line per request (`BENCH_ACCESS_LOG`,
/// `on` by default as in production, or `off`), so a benchmark can be run both ways.
fn access_log() -> Result<bool, BoxError> {
    match std::env::var("BENCH_ACCESS_LOG").as_deref() {
        Err(_) | Ok("on") => Ok(true),
        Ok("off") => Ok(false),
        Ok(other) => Err(format!("BENCH_ACCESS_LOG={other:?}: on or off").into()),
    }
}

fn log_tail(dir: &Path) -> String {
    ["stdout.log", "stderr.log"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            format!("--- {name} (last 20 lines) ---\n{tail}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn forward_stdout(stdout: impl std::io::Read, mut log: impl Write, url_tx: mpsc::Sender<String>) {
    let mut url_tx = Some(url_tx);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        // Until the URL appears, flush each line so a failed start can show what was printed;
        // afterwards buffer, since a server logging every request would cost a write per line.
        if url_tx.is_some() {
            let _ = log.flush();
            if let Some(url) = find_url(&line) {
                let _ = url_tx.take().expect("checked above").send(url);
            }
        }
    }
}

/// The first `http://…` in a log line, cut at whitespace, quotes, punctuation or colour codes.
fn find_url(line: &str) -> Option<String> {
    let start = line.find("http://")?;
    let url: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '"' | '\'' | ',' | ')'))
        .collect();
    Some(url.trim_end_matches('/').to_string())
}

fn parse_url_addr(url: &str) -> Result<SocketAddr, BoxError> {
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .filter(|authority| !authority.is_empty())
        .ok_or_else(|| format!("not an http:// URL: {url:?}"))?;
    authority.to_socket_addrs()?.next().ok_or_else(|| format!("{authority:?} resolves to no address").into())
}
