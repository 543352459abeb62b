use clap::Parser;
use shopcell::cli::{Cli, Command};
use shopcell::run;

/// The server's allocator: request handling allocates many short-lived buffers from several
/// threads, which jemalloc serves far faster than the system allocator here, and caches keep
/// long-lived entries beside them, which it strands less memory around (docs/memory.md "The
/// allocator"). Declared by the binary alone, so the benchmarks' load generator and bare-hyper
/// baseline keep the system's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read by it before `main` (its `malloc_conf`; an operator's
/// `_RJEM_MALLOC_CONF` is read after it and wins): a background thread returns pages freed for a
/// second to the system, at once and for good (`muzzy_decay_ms:0`: no lazy `MADV_FREE`, whose
/// pages would still count as resident), so memory freed by an eviction or a finished build
/// leaves the process whether or not it allocates again; and one arena per CPU, each thread
/// allocating from the arena of the CPU it runs on (`percpu_arena:percpu`), instead of four per
/// CPU shared out among threads: less memory stranded among arenas, at the same speed
/// (benches/README.md "One arena per CPU").
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 80] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,percpu_arena:percpu\0";

fn main() -> std::process::ExitCode {
    // Before anything is created: keys, databases, mail and backups are the service user's alone
    // (files 0600, directories 0700), whatever umask the caller left.
    // SAFETY: umask(2) only sets the process's mask; it cannot fail and touches no memory.
    unsafe { libc::umask(0o077) };
    // `/metrics` may show jemalloc's own heap figures: it is this process's allocator.
    shopcell::memory::ALLOCATOR_STATS.store(true, std::sync::atomic::Ordering::Relaxed);
    // No transparent huge pages for this process (docs/memory.md "Huge pages"): the kernel may
    // back the allocator's arenas with them, and each first touch of a huge page zeroes 2 MiB at
    // once (and may compact memory first), so reading a large store cold spent most of its time
    // in the kernel zeroing memory it did not use. Set before the runtime and every cache exist.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes integers only, sets one flag of this process and
    // touches no memory; a kernel without it answers an error, which leaves things as they were.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0)
    };
    let cli = Cli::parse();
    // Held to the end: dropping it writes out the lines still queued.
    let _log = shopcell::logs::init(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            // Each role binds its address first: one in use is refused before anything is
            // written to the data directory.
            Command::Serve(a) => {
                let listener = run::bind(a.listen).await?;
                let node = run::build_serve(&a)?;
                println!("shopcell data in {}", a.data.display());
                run::serve_until_signal(node, listener, "serve", a.demo).await
            }
            Command::Account(a) => {
                let listener = run::bind(a.listen).await?;
                run::serve_until_signal(run::build_account(&a)?, listener, "account", false).await
            }
            Command::Cell(a) => {
                let listener = run::bind(a.listen).await?;
                run::serve_until_signal(run::build_cell(&a).await?, listener, "cell", false).await
            }
            Command::Router(a) => {
                let listener = run::bind(a.listen).await?;
                run::serve_until_signal(run::build_router(&a)?, listener, "router", false).await
            }
            Command::Admin(c) => shopcell::admin::run(c).await,
            Command::Healthcheck(a) => shopcell::healthcheck::run(a).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
