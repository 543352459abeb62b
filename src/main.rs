use clap::Parser;
use shopcell::cli::{Cli, Command};
use shopcell::run;

/// The server's allocator: request handling allocates many short-lived buffers from several
/// threads, which mimalloc serves far faster than the system allocator here. Declared by the
/// binary alone, so the benchmarks' load generator and bare-hyper baseline keep the system's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
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
            Command::Serve(a) => {
                let node = run::build_serve(&a)?;
                println!("shopcell data in {}", a.data.display());
                run::serve_until_signal(node, a.listen, "serve").await
            }
            Command::Account(a) => run::serve_until_signal(run::build_account(&a)?, a.listen, "account").await,
            Command::Cell(a) => run::serve_until_signal(run::build_cell(&a).await?, a.listen, "cell").await,
            Command::Router(a) => run::serve_until_signal(run::build_router(&a)?, a.listen, "router").await,
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
