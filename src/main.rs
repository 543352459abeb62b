use clap::Parser;
use shopcell::cli::{Cli, Command};
use shopcell::run;

/// The server's allocator: request handling allocates many short-lived buffers from several
/// threads, which mimalloc serves far faster than the system allocator here. Declared by the
/// binary alone, so the benchmarks' load generator and bare-hyper baseline keep the system's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` of mimalloc.h (milliseconds before freed pages are returned; 0 at
/// once), which the bindings do not name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // Before anything is created: keys, databases, mail and backups are the service user's alone
    // (files 0600, directories 0700), whatever umask the caller left.
    // SAFETY: umask(2) only sets the process's mask; it cannot fail and touches no memory.
    unsafe { libc::umask(0o077) };
    // Freed memory goes back to the system at once (docs/memory.md "Freed memory"): with a
    // delay the allocator purges only when a later allocation gets round to it, so memory freed
    // by an eviction or a finished build stayed in the process, uncounted, often for good. An
    // operator's own `MIMALLOC_PURGE_DELAY` is kept (the allocator reads it itself).
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set stores one integer in the allocator's option table; it
        // allocates nothing and is safe to call at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    // No transparent huge pages for this process (docs/memory.md "Huge pages"): the allocator
    // asks for them on its arenas, and each first touch of a huge page zeroes 2 MiB at once (and
    // may compact memory first), so reading a large store cold spent most of its time in the
    // kernel zeroing memory it did not use. Set before the runtime and every cache exist.
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
